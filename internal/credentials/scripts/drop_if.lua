-- Deletes a key only if it still holds the value the caller read: a token
-- dropped after a 401, or a lock released, is never another's.
-- KEYS[1]: the key
-- ARGV[1]: the value it must hold
-- Returns: 1 when deleted, else 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
