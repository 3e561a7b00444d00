-- Moves the tasks whose timer entries are due to asynq's pending list.
-- An active task is one whose handler has just returned and that asynq is
-- about to put in its retry set: its entry is kept a little longer.
-- move_waiting.lua is prepended.
-- KEYS[1]: the timer (member: task id, score: due, ms)
-- KEYS[2]: asynq's pending list
-- KEYS[3]: the timer's mover note (a string)
-- KEYS[4]: the doorbell, rung when it moved any if ARGV[9] is "1"
-- ARGV[1]: now (ms)
-- ARGV[2]: at most this many entries
-- ARGV[3]: asynq's key prefix of the queue
-- ARGV[4]: now (ns, asynq's pending_since)
-- ARGV[5]: how long past its due time an entry whose task is still active
--          is looked at again (ms)
-- ARGV[6]: how soon (ms)
-- ARGV[7]: who moves (noted in KEYS[3] when it moved any)
-- ARGV[8]: how long the note lives (ms)
-- ARGV[9]: "1" to ring the doorbell after a move
-- Returns: {moved, the earliest entry left (ms) or -1, the last mover
-- within its note's life or ""}
local now = tonumber(ARGV[1])
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "WITHSCORES", "LIMIT", 0, tonumber(ARGV[2]))
local moved = 0
for i = 1, #due, 2 do
  local id, at = due[i], tonumber(due[i + 1])
  local state = move(ARGV[3], KEYS[2], id, ARGV[4])
  if state == "retry" or state == "scheduled" then
    moved = moved + 1
    redis.call("ZREM", KEYS[1], id)
  elseif state == "active" and now - at < tonumber(ARGV[5]) then
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
