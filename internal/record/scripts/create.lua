-- Stores a new request and its index entries, and claims the idempotency key,
-- all at once. The task is enqueued afterwards through asynq's own client.
-- KEYS[1]: request hash
-- KEYS[2]: all-requests index
-- KEYS[3]: pending index
-- KEYS[4]: idempotency key (unused when ARGV[2] is "")
-- KEYS[5]: spec
-- ARGV[1]: request id
-- ARGV[2]: idempotency value "id bodyhash", or ""
-- ARGV[3]: its TTL (ms)
-- ARGV[4]: the spec JSON
-- ARGV[5..]: HSET field/value pairs of the request hash
-- Returns: nil when stored; the earlier idempotency value when the key was
-- claimed before (nothing written)
if ARGV[2] ~= "" then
  local prev = redis.call("GET", KEYS[4])
  if prev then return prev end
  redis.call("SET", KEYS[4], ARGV[2], "PX", ARGV[3])
end
redis.call("SET", KEYS[5], ARGV[4])
redis.call("HSET", KEYS[1], unpack(ARGV, 5))
redis.call("ZADD", KEYS[2], 0, ARGV[1])
redis.call("ZADD", KEYS[3], 0, ARGV[1])
return false
