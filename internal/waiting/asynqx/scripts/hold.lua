-- Looks at the tasks just parked, as they land in asynq's retry set: one
-- woken meanwhile (its woken mark in force) goes to the pending list at
-- once; the others move to the scheduled set at the same due time, since a
-- request waiting for flow control is not a retry (no attempt failed) and
-- the dashboard must not show it as one. move_waiting.lua is prepended.
-- KEYS[1]: the parked tasks (member: "<task id>|<when parked, ms>",
--          score: when to look, ms)
-- KEYS[2]: asynq's retry set
-- KEYS[3]: asynq's scheduled set
-- KEYS[4]: asynq's pending list
-- KEYS[5]: the doorbell, rung when it woke any if ARGV[8] is "1"
-- ARGV[1]: now (ms)
-- ARGV[2]: at most this many
-- ARGV[3]: asynq's key prefix of the task hashes (prefix .. id; in the
--          slot of KEYS[2])
-- ARGV[4]: how long a parked task may still be active (its handler is
--          returning it to asynq) before its entry is dropped, unless it
--          was woken meanwhile (ms)
-- ARGV[5]: how soon such an entry is looked at again (ms)
-- ARGV[6]: how long a woken mark is in force (ms)
-- ARGV[7]: now (ns, asynq's pending_since)
-- ARGV[8]: "1" to ring the doorbell after a wake
-- Returns: {the earliest entry left (ms) or -1, how many it woke}
local now = tonumber(ARGV[1])
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "LIMIT", 0, tonumber(ARGV[2]))
local woke = 0
for _, member in ipairs(due) do
  local sep = string.find(member, "|", 1, true)
  local id, at = member, now
  if sep then
    id, at = string.sub(member, 1, sep - 1), tonumber(string.sub(member, sep + 1)) or now
  end
  local task = ARGV[3] .. id
  local cur = redis.call("HMGET", task, "state", "retryd_woken")
  local state, mark = cur[1], cur[2]
  if state == "retry" then
    if mark then redis.call("HDEL", task, "retryd_woken") end
    if wokenAt(mark, now, ARGV[6]) then
      move(task, KEYS[2], KEYS[4], id, ARGV[7])
      woke = woke + 1
    else
      local score = redis.call("ZSCORE", KEYS[2], id)
      redis.call("ZREM", KEYS[2], id)
      redis.call("ZADD", KEYS[3], score, id)
      redis.call("HSET", task, "state", "scheduled")
    end
    redis.call("ZREM", KEYS[1], member)
  elseif state == "active" and (now - at < tonumber(ARGV[4]) or wokenAt(mark, now, ARGV[6])) then
    redis.call("ZADD", KEYS[1], now + tonumber(ARGV[5]), member)
  else
    redis.call("ZREM", KEYS[1], member)
  end
end
if woke > 0 then ring(KEYS[5], ARGV[8]) end
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
if #first == 0 then return {-1, woke} end
return {tonumber(first[2]), woke}
