-- Opens an endpoint (too many of its attempts failed, or an operator said
-- so): no attempt is made but a probe, the first at now + the first probe
-- interval.
-- KEYS[1]: the endpoint's state hash (state, since, interval, nextProbe, ratio, probe, probeUntil, failedAt)
-- ARGV[1]: now (ms)
-- ARGV[2]: the first probe interval (ms)
-- ARGV[3]: the failure ratio that opened it (shown)
-- ARGV[4]: the state's time to live (ms)
-- ARGV[5]: who opened it ("breaker" or "operator")
-- Returns 1 when it opened the endpoint, 0 when it was not closed.
local state = redis.call("HGET", KEYS[1], "state")
if state and state ~= "closed" then
  -- An operator's open holds even an endpoint the breaker opened: no
  -- probe closes it.
  if ARGV[5] == "operator" then redis.call("HSET", KEYS[1], "by", "operator") end
  return 0
end
local now = tonumber(ARGV[1])
redis.call("HSET", KEYS[1], "state", "open", "since", now, "interval", ARGV[2],
  "nextProbe", now + tonumber(ARGV[2]), "ratio", ARGV[3], "by", ARGV[5], "probe", "", "probeUntil", 0, "failedAt", 0)
redis.call("PEXPIRE", KEYS[1], ARGV[4])
return 1
