-- Sets a hash field to a new value only if it still holds the old one: a
-- rekey never undoes a change made while it ran.
-- KEYS[1]: the hash
-- ARGV[1]: the field
-- ARGV[2]: the value it must hold
-- ARGV[3]: the new value
-- Returns: 1 when replaced, else 0
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0
