-- Takes a parallelism slot of a flow-control key for a request, or puts
-- the request in the key's waiting line. A slot handed over by release.lua
-- is already the request's: taking it only renews the lease.
-- KEYS[1]: the key's slots (member: request id, score: lease end, ms)
-- KEYS[2]: the key's waiting line (member: request id, score: when it
--          first waited, ms)
-- ARGV[1]: request id
-- ARGV[2]: parallelism
-- ARGV[3]: now (ms)
-- ARGV[4]: the lease's end (ms)
-- ARGV[5]: how long the keys live untouched (ms)
-- Returns: {1} when the slot is taken; {0, end of the earliest lease (ms)}
-- when the request waits
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[3])
local mine = redis.call("ZSCORE", KEYS[1], ARGV[1])
if mine or redis.call("ZCARD", KEYS[1]) < tonumber(ARGV[2]) then
  redis.call("ZADD", KEYS[1], ARGV[4], ARGV[1])
  redis.call("ZREM", KEYS[2], ARGV[1])
  redis.call("PEXPIRE", KEYS[1], ARGV[5])
  return {1}
end
redis.call("ZADD", KEYS[2], "NX", ARGV[3], ARGV[1])
redis.call("PEXPIRE", KEYS[2], ARGV[5])
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
return {0, first[2]}
