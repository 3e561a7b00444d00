-- Moves a schedule from the tick it was due at to the next one and keeps
-- the fires, only if no other replica did it first.
-- KEYS[1]: schedule hash
-- KEYS[2]: due set
-- KEYS[3]: fires list
-- ARGV[1]: schedule id
-- ARGV[2]: the due tick (ms) this replica processed
-- ARGV[3]: the next tick (ms)
-- ARGV[4]: how many fires are kept
-- ARGV[5..]: fire JSON entries, oldest first
-- Returns: 1 when advanced; 0 when another replica advanced it (or it was
-- paused or deleted meanwhile)
if redis.call("HGET", KEYS[1], "nextFireAt") ~= ARGV[2] or redis.call("HGET", KEYS[1], "paused") ~= "0" then return 0 end
redis.call("HSET", KEYS[1], "nextFireAt", ARGV[3])
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[1])
for i = 5, #ARGV do redis.call("LPUSH", KEYS[3], ARGV[i]) end
redis.call("LTRIM", KEYS[3], 0, tonumber(ARGV[4]) - 1)
return 1
