-- Takes a request out of its endpoint's line (it ends without waiting
-- further).
-- KEYS[1]: the endpoint's line (member: request id, score: its place, ms)
-- KEYS[2]: the waiters' keys with parallelism (ep_enter.lua)
-- ARGV[1]: request id
-- Returns 1.
lineLeave(KEYS[1], ARGV[1])
redis.call("HDEL", KEYS[2], ARGV[1])
return 1
