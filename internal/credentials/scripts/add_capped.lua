-- Sets a hash field unless the hash already holds ARGV[3] fields (a field
-- that exists is replaced whatever the count): counted and added at once,
-- so concurrent adds cannot pass the cap.
-- KEYS[1]: the hash
-- ARGV[1]: the field
-- ARGV[2]: the value
-- ARGV[3]: the most fields the hash may hold
-- Returns: 1 when set, 0 when the cap refused it
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
