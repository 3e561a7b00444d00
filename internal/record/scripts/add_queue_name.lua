-- Lists a queue's name in its tenant's queue index, unless the tenant has
-- its limit of queues already: the check and the add are one step, so
-- concurrent upserts cannot pass the limit together.
-- KEYS[1]: the tenant's queue index (a sorted set of names, all score 0)
-- ARGV[1]: the queue's name
-- ARGV[2]: the most queues the tenant may have (0: no limit)
-- Returns: 1 listed (or listed already), 0 the limit is reached (nothing changed)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 1
end
local limit = tonumber(ARGV[2])
if limit > 0 and redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
return 1
