-- Closes an endpoint (an operator said so): its waiters are then taken
-- out of its line (ep_take.lua) and woken.
-- KEYS[1]: the endpoint's state hash (state, since, ...)
-- ARGV[1]: now (ms)
-- ARGV[2]: the state's time to live (ms)
-- Returns 1 when it closed the endpoint, 0 when it was closed already.
local state = redis.call("HGET", KEYS[1], "state")
if not state or state == "closed" then return 0 end
redis.call("HSET", KEYS[1], "state", "closed", "since", ARGV[1], "probe", "", "probeUntil", 0)
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return 1
