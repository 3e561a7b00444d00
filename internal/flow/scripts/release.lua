-- Gives back a request's parallelism slot and hands it straight to the
-- request that has waited longest, so no newcomer takes it first; the
-- caller wakes that request.
-- KEYS[1]: the key's slots
-- KEYS[2]: the key's waiting line
-- ARGV[1]: request id
-- ARGV[2]: parallelism
-- ARGV[3]: now (ms)
-- ARGV[4]: the handed-over slot's lease end (ms): time for the woken
--          request to start
-- Returns: the id of the request the slot went to, or false
redis.call("ZREM", KEYS[1], ARGV[1])
redis.call("ZREM", KEYS[2], ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[3])
if redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[2]) then return false end
local nxt = redis.call("ZPOPMIN", KEYS[2])
if #nxt == 0 then return false end
redis.call("ZADD", KEYS[1], ARGV[4], nxt[1])
return nxt[1]
