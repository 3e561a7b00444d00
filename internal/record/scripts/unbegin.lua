-- Takes back an attempt that Begin started but that did not go out: the
-- request must wait for a flow-control slot first. The attempt is not
-- counted (attemptCount goes back) and the request says what it waits for.
-- KEYS[1]: request hash
-- ARGV[1]: the attempt's n (from Begin)
-- ARGV[2]: what the request waits for ("flow_control")
-- Returns: 1, or 0 when the attempt is no longer the one in flight
if redis.call("HGET", KEYS[1], "inflightN") ~= ARGV[1] then return 0 end
redis.call("HDEL", KEYS[1], "inflightN", "inflightAt")
redis.call("HINCRBY", KEYS[1], "attemptCount", -1)
redis.call("HSET", KEYS[1], "waitingFor", ARGV[2])
return 1
