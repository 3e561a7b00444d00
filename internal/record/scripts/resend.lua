-- Makes a new pending request from a finished one (its resend), all at
-- once: refuses an unfinished or expunged original, claims the resend's
-- idempotency key, counts the new request among its owner's unfinished
-- ones, stores it with its index entries, links the original to it and
-- rings the workers' doorbell. The task is enqueued afterwards through
-- asynq's own client.
-- KEYS[1]: the original's request hash
-- KEYS[2]: the resend's idempotency key (unused when ARGV[3] is "")
-- KEYS[3]: the new request's hash
-- KEYS[4]: pending index
-- KEYS[5]: the new request's spec
-- KEYS[6]: the owner's set of unfinished request ids, and "~ttl" (unused
--   when ARGV[6] is "0")
-- KEYS[7]: the workers' doorbell list (unused when ARGV[9] is "0")
-- KEYS[8]: the host index (the list's host filter)
-- KEYS[9..]: the label indexes, one per label of the new request
-- ARGV[1]: the original's id
-- ARGV[2]: the new request's id
-- ARGV[3]: idempotency value "originalId newId", or ""
-- ARGV[4]: its TTL (ms)
-- ARGV[5]: the new request's spec JSON (its resentFrom audit included)
-- ARGV[6]: the owner's limit of unfinished requests ("0": no limit, no count)
-- ARGV[7]: the owner set's time to live (ms)
-- ARGV[8]: now (ms), the new request's score in the owner set
-- ARGV[9]: "1" to ring the doorbell (the task will be pending at once)
-- ARGV[10..]: HSET field/value pairs of the new request's hash
-- Returns: {"ok"}; {"replay", earlier idempotency value}; {"missing"};
-- {"unfinished", status}; {"expunged"}; {"full"} when the owner is at its
-- limit. Nothing is written but on "ok".
if ARGV[3] ~= "" then
  local prev = redis.call("GET", KEYS[2])
  if prev then return {"replay", prev} end
end
local cur = redis.call("HMGET", KEYS[1], "status", "expunged")
local st = cur[1]
if not st then return {"missing"} end
if st ~= "completed" and st ~= "failed" and st ~= "canceled" then return {"unfinished", st} end
if cur[2] == "1" then return {"expunged"} end
if ARGV[6] ~= "0" then
  -- The owner set as create.lua keeps it: "~ttl" (uncounted) marks the
  -- minute of its last PEXPIRE.
  if redis.call("ZCOUNT", KEYS[6], "0", "+inf") >= tonumber(ARGV[6]) then return {"full"} end
  local minute = tostring(-math.floor(tonumber(ARGV[8]) / 60000))
  if redis.call("ZADD", KEYS[6], "LT", "CH", ARGV[8], ARGV[2], minute, "~ttl") > 1 then
    redis.call("PEXPIRE", KEYS[6], ARGV[7])
  end
end
if ARGV[3] ~= "" then
  redis.call("SET", KEYS[2], ARGV[3], "PX", ARGV[4])
end
redis.call("SET", KEYS[5], ARGV[5])
redis.call("HSET", KEYS[3], unpack(ARGV, 10))
redis.call("ZADD", KEYS[4], "0", ARGV[2])
for i = 8, #KEYS do redis.call("ZADD", KEYS[i], "0", ARGV[2]) end
-- The original lists its resends, newest last, in its own hash: the
-- list ends with the record, whatever its retention.
local resends = redis.call("HGET", KEYS[1], "resends")
if resends then resends = resends .. " " .. ARGV[2] else resends = ARGV[2] end
redis.call("HSET", KEYS[1], "resends", resends)
if ARGV[9] == "1" and redis.call("LLEN", KEYS[7]) == 0 then
  redis.call("RPUSH", KEYS[7], "1")
end
return {"ok"}
