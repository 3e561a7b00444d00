-- Deletes the sweeper's lock only if this owner holds it.
-- KEYS[1]: the lock
-- ARGV[1]: the owner
-- Returns 1 when it deleted the lock, 0 when another holds it.
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0
