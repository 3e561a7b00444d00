-- The log a delivery of a workflow run carries: the message joins the log
-- at its first delivery (a retry finds it there), and the delivery
-- carries the log up to and including it.
-- KEYS[1]: the run's hash
-- KEYS[2]: the run's log (a list of JSON entries)
-- ARGV[1]: the message id, as its entry spells it ("messageId":"<id>")
-- ARGV[2]: the message's entry (JSON)
-- Returns: {"missing"} when the run has ended (or never was); else
-- {"ok", createdAt, entries up to and including the message's}
local created = redis.call("HGET", KEYS[1], "createdAt")
if not created then return {"missing"} end
local log = redis.call("LRANGE", KEYS[2], 0, -1)
local out = {"ok", created}
for i = 1, #log do
  out[#out + 1] = log[i]
  if string.find(log[i], ARGV[1], 1, true) then return out end
end
-- The log lives as long as the run's hash (publish.lua keeps it).
local ttl = redis.call("PTTL", KEYS[1])
redis.call("RPUSH", KEYS[2], ARGV[2])
if ttl > 0 then redis.call("PEXPIRE", KEYS[2], ttl) end
out[#out + 1] = ARGV[2]
return out
