-- Takes back a message Publish counted and retryd then refused: an init's
-- run goes (it never started), a step leaves the run's messages and its
-- bytes the log's count.
-- KEYS[1]: the run's hash
-- KEYS[2]: the run's messages
-- KEYS[3]: the run's log
-- ARGV[1]: the message id
-- ARGV[2]: the bytes it was counted for ("0" when it was not)
-- Returns: "run" when the run went, "step" when the step did, "none"
local first = redis.call("HGET", KEYS[1], "first")
if not first then return "none" end
if first == ARGV[1] then
  redis.call("DEL", KEYS[1], KEYS[2], KEYS[3])
  return "run"
end
if redis.call("LREM", KEYS[2], -1, ARGV[1]) == 0 then return "none" end
redis.call("HINCRBY", KEYS[1], "bytes", -tonumber(ARGV[2]))
return "step"
