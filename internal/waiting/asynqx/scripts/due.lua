-- Moves the tasks whose timer entries are due to asynq's pending list.
-- An active task is one whose handler is returning it to asynq (or one
-- running): it gets its woken mark (so a park that lands reads it,
-- hold.lua) and its entry is looked at again soon, until ARGV[5] after it
-- was first seen active (the mark's time). move_waiting.lua is prepended.
-- KEYS[1]: the timer (member: task id, score: due, ms)
-- KEYS[2]: asynq's pending list
-- KEYS[3]: the timer's mover note (a string)
-- KEYS[4]: the doorbell, rung when it moved any if ARGV[9] is "1"
-- KEYS[5]: asynq's retry set
-- KEYS[6]: asynq's scheduled set
-- ARGV[1]: now (ms)
-- ARGV[2]: at most this many entries
-- ARGV[3]: asynq's key prefix of the task hashes (prefix .. id; in the
--          slot of KEYS[2])
-- ARGV[4]: now (ns, asynq's pending_since)
-- ARGV[5]: how long after it was first seen active an entry whose task
--          is still active is looked at again (ms)
-- ARGV[6]: how soon (ms)
-- ARGV[7]: who moves (noted in KEYS[3] when it moved any)
-- ARGV[8]: how long the note lives (ms)
-- ARGV[9]: "1" to ring the doorbell after a move
-- ARGV[10]: how long a woken mark is in force (ms)
-- Returns: {moved, the earliest entry left (ms) or -1, the last mover
-- within its note's life or ""}
local now = tonumber(ARGV[1])
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "LIMIT", 0, tonumber(ARGV[2]))
local moved = 0
for _, id in ipairs(due) do
  local task = ARGV[3] .. id
  local cur = redis.call("HMGET", task, "state", "retryd_woken")
  local state, mark = cur[1], cur[2]
  if state == "retry" or state == "scheduled" then
    move(task, state == "retry" and KEYS[5] or KEYS[6], KEYS[2], id, ARGV[4])
    if mark then redis.call("HDEL", task, "retryd_woken") end
    moved = moved + 1
    redis.call("ZREM", KEYS[1], id)
  elseif state == "active" and now - woken(task, mark, now, ARGV[10]) < tonumber(ARGV[5]) then
    redis.call("ZADD", KEYS[1], now + tonumber(ARGV[6]), id)
  else
    redis.call("ZREM", KEYS[1], id)
  end
end
if moved > 0 then
  redis.call("SET", KEYS[3], ARGV[7], "PX", ARGV[8])
  ring(KEYS[4], ARGV[9])
end
local mover = redis.call("GET", KEYS[3]) or ""
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
if #first == 0 then return {moved, -1, mover} end
return {moved, tonumber(first[2]), mover}
