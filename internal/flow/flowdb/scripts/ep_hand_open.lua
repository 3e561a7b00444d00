-- Lists an endpoint a tenant opens by hand, within the tenant's limit
-- (ENDPOINT_LIMIT): one listed already stays listed and counts once.
-- KEYS[1]: the tenant's endpoints opened by hand (field: the endpoint's
--          name, value: when it was listed, ms)
-- ARGV[1]: the endpoint's (tenant-qualified) name
-- ARGV[2]: the limit; 0: none
-- ARGV[3]: now (ms)
-- Returns 1 when it is listed, 0 when the tenant has its limit already.
if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then return 1 end
local limit = tonumber(ARGV[2])
if limit > 0 and redis.call("HLEN", KEYS[1]) >= limit then return 0 end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[3])
return 1
