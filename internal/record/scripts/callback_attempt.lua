-- Records one attempt of a request's outcome callback, unless the request
-- is gone (deleted past its retention while its callback was due): a
-- write then would make a record of nothing that no trim would delete.
-- KEYS[1]: request hash
-- KEYS[2]: the partition's stats hash
-- KEYS[3]: the callback-due index
-- ARGV[1]: the callback's status (pending, delivered, failed)
-- ARGV[2]: the status code ("" for none)
-- ARGV[3]: the error
-- ARGV[4]: now (ms)
-- ARGV[5]: request id
-- Returns: the callback's attempts so far, or -1 when the request is gone
if redis.call("EXISTS", KEYS[1]) == 0 then
  redis.call("ZREM", KEYS[3], ARGV[5])
  return -1
end
local n = redis.call("HINCRBY", KEYS[1], "cbAttempts", 1)
redis.call("HSET", KEYS[1], "cbStatus", ARGV[1], "cbLastStatusCode", ARGV[2], "cbLastError", ARGV[3], "cbUpdatedAt", ARGV[4])
redis.call("HINCRBY", KEYS[2], "cb|" .. ARGV[1], 1)
if ARGV[1] ~= "pending" then redis.call("ZREM", KEYS[3], ARGV[5]) end
return n
