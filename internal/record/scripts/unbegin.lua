-- Takes back an attempt that Begin started but that did not go out: the
-- request must wait for a flow-control slot first. The attempt is not
-- counted (attemptCount goes back) and the request says what it waits for.
-- KEYS[1]: request hash
-- ARGV[1]: the attempt's n (from Begin)
-- ARGV[2]: what the request waits for (paused, queue, rate, ...; "" for nothing to show)
-- ARGV[3]: when retryd starts it (ms), 0 when an event will
-- Returns: 1, or 0 when the attempt is no longer the one in flight
if redis.call("HGET", KEYS[1], "inflightN") ~= ARGV[1] then return 0 end
redis.call("HDEL", KEYS[1], "inflightN", "inflightAt")
redis.call("HINCRBY", KEYS[1], "attemptCount", -1)
if ARGV[2] == "" then
  redis.call("HDEL", KEYS[1], "waitingFor", "waitUntil")
  return 1
end
redis.call("HSET", KEYS[1], "waitingFor", ARGV[2])
if ARGV[3] == "0" then
  redis.call("HDEL", KEYS[1], "waitUntil")
else
  redis.call("HSET", KEYS[1], "waitUntil", ARGV[3])
end
return 1
