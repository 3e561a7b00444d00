-- Moves parked tasks from asynq's retry set to its scheduled set, at the
-- same due time: a request waiting for flow control is not a retry (no
-- attempt failed), and the dashboard must not show it as one.
-- KEYS[1]: the parked tasks (member: "<task id>|<when parked, ms>",
--          score: when to look, ms)
-- ARGV[1]: now (ms)
-- ARGV[2]: at most this many
-- ARGV[3]: asynq's key prefix of the queue
-- ARGV[4]: how long a parked task may still be active (its handler is
--          returning it to asynq) before its entry is dropped (ms)
-- ARGV[5]: how soon such an entry is looked at again (ms)
-- Returns: the earliest entry left (ms), or -1
local now = tonumber(ARGV[1])
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "LIMIT", 0, tonumber(ARGV[2]))
for _, member in ipairs(due) do
  local sep = string.find(member, "|", 1, true)
  local id, at = member, now
  if sep then
    id, at = string.sub(member, 1, sep - 1), tonumber(string.sub(member, sep + 1)) or now
  end
  local task = ARGV[3] .. "t:" .. id
  local state = redis.call("HGET", task, "state")
  if state == "retry" then
    local score = redis.call("ZSCORE", ARGV[3] .. "retry", id)
    redis.call("ZREM", ARGV[3] .. "retry", id)
    redis.call("ZADD", ARGV[3] .. "scheduled", score, id)
    redis.call("HSET", task, "state", "scheduled")
    redis.call("ZREM", KEYS[1], member)
  elseif state == "active" and now - at < tonumber(ARGV[4]) then
    redis.call("ZADD", KEYS[1], now + tonumber(ARGV[5]), member)
  else
    redis.call("ZREM", KEYS[1], member)
  end
end
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
if #first == 0 then return -1 end
return tonumber(first[2])
