-- Makes a queue's settings (parallelism 1) unless it has them.
-- KEYS[1]: the queue's settings hash
-- ARGV[1]: now (ms), its createdAt and updatedAt
-- Returns 1 when it made them, 0 when they existed.
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
redis.call("HSET", KEYS[1], "parallelism", 1, "paused", "0", "createdAt", ARGV[1], "updatedAt", ARGV[1])
return 1
