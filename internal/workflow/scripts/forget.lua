-- Takes back a message Publish counted and retryd then refused: an init's
-- run goes (it never started), a step leaves the run's messages and its
-- bytes the log's count.
-- KEYS[1]: the run's hash
-- KEYS[2]: the run's messages
-- KEYS[3]: the run's log
-- KEYS[4]: what is kept of the run once ended
-- KEYS[5], KEYS[6]: the log and what was kept of an earlier run of the
--   id, set aside by a start (publish.lua): a refused start puts them back
-- ARGV[1]: the message id
-- ARGV[2]: the bytes it was counted for ("0" when it was not)
-- ARGV[3]: how long what is put back is kept (ms): a retention
-- Returns: "run" when the run went, "step" when the step did, "none"
local first = redis.call("HGET", KEYS[1], "first")
if not first then return "none" end
if first == ARGV[1] then
  redis.call("DEL", KEYS[1], KEYS[2], KEYS[3])
  for i = 5, 6 do
    if redis.call("EXISTS", KEYS[i]) == 1 then
      redis.call("RENAME", KEYS[i], KEYS[i - 2])
      redis.call("PEXPIRE", KEYS[i - 2], ARGV[3])
    end
  end
  return "run"
end
if redis.call("LREM", KEYS[2], -1, ARGV[1]) == 0 then return "none" end
redis.call("HINCRBY", KEYS[1], "bytes", -tonumber(ARGV[2]))
return "step"
