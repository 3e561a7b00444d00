-- Puts a failed request back to pending with a fresh budget and appends the
-- audit entry. Attempt numbering continues.
-- KEYS[1]: request hash
-- KEYS[2]: attempts list
-- KEYS[3]: redrives list
-- KEYS[4]: pending index
-- KEYS[5]: failed index
-- KEYS[6]: the redrive's idempotency key
-- KEYS[7]: stats hash
-- KEYS[8]: spec
-- KEYS[9]: result
-- KEYS[10]: the finished index (by completedAt; the list's finished filter)
-- The failure-class and status-code indexes of the request's last attempt
-- are derived inside, from ARGV[9] and ARGV[10] and the class and code the
-- hash holds: they share KEYS[1]'s hash tag.
-- ARGV[1]: request id
-- ARGV[2]: now (ms)
-- ARGV[3]: redrive limit
-- ARGV[4]: actor
-- ARGV[5]: reason
-- ARGV[6]: idempotency TTL (ms)
-- ARGV[7]: "1" when an idempotency key was given
-- ARGV[8]: the redrive's source for the stats (api or dashboard)
-- ARGV[9]: the failure-class indexes' key prefix
-- ARGV[10]: the status-code indexes' key prefix
-- Returns: {"replay", id}, {"missing"}, {"notfailed", status}, {"expunged"} (its
-- payload was erased: nothing to send), {"limit", count} or {"ok", n}
if ARGV[7] == "1" then
  local prev = redis.call("GET", KEYS[6])
  if prev then return {"replay", prev} end
end
local st = redis.call("HGET", KEYS[1], "status")
if not st then return {"missing"} end
if st ~= "failed" then return {"notfailed", st} end
if redis.call("HGET", KEYS[1], "expunged") == "1" then return {"expunged"} end
local rc = tonumber(redis.call("HGET", KEYS[1], "redriveCount") or "0")
if rc >= tonumber(ARGV[3]) then return {"limit", tostring(rc)} end
local n = rc + 1
local cur = redis.call("HMGET", KEYS[1], "failureClass", "lastStatusCode", "completedAt")
if cur[1] and cur[1] ~= "" then
  redis.call("ZREM", ARGV[9] .. cur[1], ARGV[1])
  if cur[2] and cur[2] ~= "" then redis.call("ZREM", ARGV[10] .. cur[2], ARGV[1]) end
end
if cur[3] then
  -- The finished entry starts with the id; its score is completedAt.
  for _, m in ipairs(redis.call("ZRANGE", KEYS[10], cur[3], cur[3], "BYSCORE")) do
    if string.sub(m, 1, #ARGV[1] + 1) == ARGV[1] .. "\31" then redis.call("ZREM", KEYS[10], m) end
  end
end
redis.call("RPUSH", KEYS[3], cjson.encode({
  n = n, atMs = tonumber(ARGV[2]), actor = ARGV[4], reason = ARGV[5],
  previousFailureClass = cur[1] or "",
  previousAttemptCount = tonumber(redis.call("HGET", KEYS[1], "attemptCount") or "0")}))
redis.call("HSET", KEYS[1], "status", "pending", "redriveCount", n, "redriveOpen", n, "budgetUsed", 0,
  "nextAttemptAt", ARGV[2], "updatedAt", ARGV[2])
redis.call("HDEL", KEYS[1], "completedAt", "failedRun", "lastError", "failureClass", "lastStatusCode", "cbStatus", "interrupted")
redis.call("ZREM", KEYS[5], ARGV[1])
redis.call("ZADD", KEYS[4], 0, ARGV[1])
-- A request finished by an earlier version carries its retention as a TTL:
-- it must not expire while it runs again. (Finished since, it has none: its
-- finished entry, gone above, was what would have ended it.)
for _, i in ipairs({1, 2, 3, 8, 9}) do redis.call("PERSIST", KEYS[i]) end
if ARGV[7] == "1" then redis.call("SET", KEYS[6], ARGV[1], "PX", ARGV[6]) end
redis.call("HINCRBY", KEYS[7], "rdr|" .. ARGV[8], 1)
return {"ok", tostring(n)}
