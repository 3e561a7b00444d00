-- Moves a pending or retrying request to canceled, fills the outcome of an
-- open redrive, starts retention, and marks the outcome callback due.
-- KEYS[1]: request hash
-- KEYS[2]: attempts list
-- KEYS[3]: redrives list
-- KEYS[4..8]: status indexes in Statuses order (pending retrying completed failed canceled)
-- KEYS[9]: spec
-- KEYS[10]: result
-- KEYS[11]: callback-due index
-- KEYS[12]: the tenant's payload-expiry index, only while the tenant has a
--   payload retention
-- ARGV[1]: request id
-- ARGV[2]: now (ms)
-- ARGV[3]: the tenant's retention (ms)
-- ARGV[4]: who cancels (the audit's actor)
-- Returns: "missing"; the status when it cannot be canceled; "callback"
-- (canceled, callback due); "ok"
local st = redis.call("HGET", KEYS[1], "status")
if not st then return "missing" end
if st ~= "pending" and st ~= "retrying" then return st end
redis.call("ZREM", KEYS[4], ARGV[1])
redis.call("ZREM", KEYS[5], ARGV[1])
redis.call("ZADD", KEYS[8], 0, ARGV[1])
redis.call("HSET", KEYS[1], "status", "canceled", "updatedAt", ARGV[2], "completedAt", ARGV[2], "canceledBy", ARGV[4])
redis.call("HDEL", KEYS[1], "nextAttemptAt")
if redis.call("HGET", KEYS[1], "redriveOpen") then
  local e = cjson.decode(redis.call("LINDEX", KEYS[3], -1))
  e.outcome = redis.call("HGET", KEYS[1], "status")
  redis.call("LSET", KEYS[3], -1, cjson.encode(e))
  redis.call("HDEL", KEYS[1], "redriveOpen")
end
for _, i in ipairs({1, 2, 3, 9, 10}) do redis.call("PEXPIRE", KEYS[i], ARGV[3]) end
if KEYS[12] then redis.call("ZADD", KEYS[12], ARGV[2], ARGV[1]) end
if redis.call("HGET", KEYS[1], "cb") == "1" then
  redis.call("HSET", KEYS[1], "cbStatus", "pending")
  redis.call("ZADD", KEYS[11], 0, ARGV[1])
  return "callback"
end
return "ok"
