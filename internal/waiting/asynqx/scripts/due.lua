-- Moves the tasks whose timer entries are due to asynq's pending list.
-- An active task is one whose handler is returning it to asynq (or one
-- running): it gets its woken mark (so a park that lands reads it,
-- hold.lua) and its entry is looked at again soon, until ARGV[5] after
-- this script first saw it active for this entry. That time is its own
-- (the task hash's field "retryd_due_seen": "<first seen, ms>|<the
-- entry's score it set then>"), not the woken mark's, which an earlier
-- wake may have left long before; an entry set since at another score is
-- a new wait and starts afresh. The field goes when the entry leaves the
-- timer. move_waiting.lua is prepended.
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
-- ARGV[5]: how long after it first saw the task of an entry active an
--          entry whose task is still active is looked at again (ms)
-- ARGV[6]: how soon (ms)
-- ARGV[7]: who moves (noted in KEYS[3] when it moved any)
-- ARGV[8]: how long the note lives (ms)
-- ARGV[9]: "1" to ring the doorbell after a move
-- ARGV[10]: how long a woken mark is in force (ms)
-- Returns: {moved, the earliest entry left (ms) or -1, the last mover
-- within its note's life or ""}

-- seenAt is when this script first saw the task of the entry at score
-- active, from its note seen (or false); nil when the note is of another
-- entry (the entry was set again since: a new wait).
local function seenAt(seen, score)
  if not seen then return nil end
  local sep = string.find(seen, "|", 1, true)
  if not sep or tonumber(string.sub(seen, sep + 1)) ~= tonumber(score) then return nil end
  return tonumber(string.sub(seen, 1, sep - 1))
end

local now = tonumber(ARGV[1])
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "WITHSCORES", "LIMIT", 0, tonumber(ARGV[2]))
local moved = 0
for i = 1, #due, 2 do
  local id, score = due[i], due[i + 1]
  local task = ARGV[3] .. id
  local cur = redis.call("HMGET", task, "state", "retryd_woken", "retryd_due_seen")
  local state, mark, seen = cur[1], cur[2], cur[3]
  local keep = false
  if state == "retry" or state == "scheduled" then
    move(task, state == "retry" and KEYS[5] or KEYS[6], KEYS[2], id, ARGV[4])
    if mark then redis.call("HDEL", task, "retryd_woken") end
    moved = moved + 1
  elseif state == "active" then
    woken(task, mark, now, ARGV[10])
    local since = seenAt(seen, score) or now
    if now - since < tonumber(ARGV[5]) then
      local again = now + tonumber(ARGV[6])
      redis.call("ZADD", KEYS[1], again, id)
      redis.call("HSET", task, "retryd_due_seen", since .. "|" .. again)
      keep = true
    end
  end
  if not keep then
    redis.call("ZREM", KEYS[1], id)
    if seen then redis.call("HDEL", task, "retryd_due_seen") end
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
