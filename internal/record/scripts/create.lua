-- Stores a new request and its index entries, claims the idempotency key,
-- counts the request among its owner's unfinished ones, writes its task
-- when it is pending at once (as asynq's enqueue would; else the task is
-- enqueued afterwards through asynq's own client) and rings the workers'
-- doorbell, all at once.
-- KEYS[1]: request hash
-- KEYS[2]: pending index
-- KEYS[3]: idempotency key (unused when ARGV[2] is "")
-- KEYS[4]: spec
-- KEYS[5]: the owner's set of unfinished request ids, and "~ttl" (unused
--   when ARGV[5] is "0")
-- KEYS[6]: the workers' doorbell list (unused when ARGV[8] is "0")
-- KEYS[7]: the task's hash (unused when ARGV[9] is "0")
-- KEYS[8]: the queue's pending list (unused when ARGV[9] is "0")
-- KEYS[9]: the host index (the list's host filter)
-- KEYS[10..]: the label indexes, one per label of the request
-- ARGV[1]: request id
-- ARGV[2]: idempotency value "id bodyhash", or ""
-- ARGV[3]: its TTL (ms)
-- ARGV[4]: the spec JSON
-- ARGV[5]: the owner's limit of unfinished requests ("0": no limit, no count)
-- ARGV[6]: the owner set's time to live (ms)
-- ARGV[7]: the submission time (ms), the request's score in the owner set
-- ARGV[8]: "1" to ring the doorbell (the task will be pending at once)
-- ARGV[9]: n, how many of the next ARGV are the task's (0: no task)
-- ARGV[10..9+n]: HSET field/value pairs of the task's hash
-- ARGV[10+n..]: HSET field/value pairs of the request hash
-- Returns: nil when stored; "full" when the owner is at its limit (nothing
-- written); the earlier idempotency value when the key was claimed before
-- (the claim is then marked " replayed", nothing else written)
if ARGV[2] ~= "" then
  local prev = redis.call("GET", KEYS[3])
  if prev then
    -- Marked, the submission that made the claim may no longer take its
    -- request back (this replay may be acknowledged). Written even when
    -- marked already: a write of this connection, so a WAIT after the
    -- script also covers the claim's first write, made on another
    -- connection (replication keeps the order).
    local marked = prev
    if string.sub(prev, -9) ~= " replayed" then marked = prev .. " replayed" end
    redis.call("SET", KEYS[3], marked, "KEEPTTL")
    return prev
  end
end
if ARGV[5] ~= "0" then
  -- The member "~ttl" scores minus the minute of the set's last PEXPIRE:
  -- outside the counted range (the ids score their submission time), and
  -- entered with the id, LT makes ZADD count it only when a new minute
  -- begins. The time to live is refreshed then, not on every submission.
  if redis.call("ZCOUNT", KEYS[5], "0", "+inf") >= tonumber(ARGV[5]) then return "full" end
  local minute = tostring(-math.floor(tonumber(ARGV[7]) / 60000))
  if redis.call("ZADD", KEYS[5], "LT", "CH", ARGV[7], ARGV[1], minute, "~ttl") > 1 then
    redis.call("PEXPIRE", KEYS[5], ARGV[6])
  end
end
if ARGV[2] ~= "" then
  redis.call("SET", KEYS[3], ARGV[2], "PX", ARGV[3])
end
redis.call("SET", KEYS[4], ARGV[4])
local n = tonumber(ARGV[9])
redis.call("HSET", KEYS[1], unpack(ARGV, 10 + n))
redis.call("ZADD", KEYS[2], "0", ARGV[1])
for i = 9, #KEYS do redis.call("ZADD", KEYS[i], "0", ARGV[1]) end
if n > 0 then
  redis.call("HSET", KEYS[7], unpack(ARGV, 10, 9 + n))
  redis.call("LPUSH", KEYS[8], ARGV[1])
end
-- Without the task, the ring comes just before its enqueue: a woken
-- worker that finds the queue still empty tries again for a few
-- milliseconds.
if ARGV[8] == "1" and redis.call("LLEN", KEYS[6]) == 0 then
  redis.call("RPUSH", KEYS[6], "1")
end
return false
