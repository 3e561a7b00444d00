-- Moves a pending or retrying request to canceled, fills the outcome of an
-- open redrive, enters the finished index (by which the sweeper's trim
-- deletes the request once its retention has passed: no key of it gets a
-- TTL), and marks the outcome callback due.
-- KEYS[1]: request hash
-- KEYS[2]: attempts list
-- KEYS[3]: redrives list
-- KEYS[4..8]: status indexes in Statuses order (pending retrying completed failed canceled)
-- KEYS[9]: callback-due index
-- KEYS[10]: the finished index (by completedAt; the list's finished filter)
-- KEYS[11]: the tenant's payload-expiry index, only while the tenant has a
--   payload retention
-- ARGV[1]: request id
-- ARGV[2]: now (ms)
-- ARGV[3]: who cancels (the audit's actor)
-- ARGV[4]: the request's finished-index member (see finishedMember), made
-- from the failure class and status code the caller read
-- ARGV[5]: that failure class ("" for none)
-- ARGV[6]: that status code ("" without a failure class or a code)
-- Returns: "missing"; the status when it cannot be canceled; "moved" when
-- an attempt changed the failure class or status code since the caller
-- read them (nothing written: read again); "callback" (canceled, callback
-- due); "ok"
local cur = redis.call("HMGET", KEYS[1], "status", "failureClass", "lastStatusCode")
local st = cur[1]
if not st then return "missing" end
if st ~= "pending" and st ~= "retrying" then return st end
-- The status code is indexed only with a failure class (failIndexes).
local class, code = cur[2] or "", ""
if class ~= "" then code = cur[3] or "" end
if class ~= ARGV[5] or code ~= ARGV[6] then return "moved" end
redis.call("ZREM", KEYS[4], ARGV[1])
redis.call("ZREM", KEYS[5], ARGV[1])
redis.call("ZADD", KEYS[8], 0, ARGV[1])
redis.call("HSET", KEYS[1], "status", "canceled", "updatedAt", ARGV[2], "completedAt", ARGV[2], "canceledBy", ARGV[3])
redis.call("HDEL", KEYS[1], "nextAttemptAt")
redis.call("ZADD", KEYS[10], ARGV[2], ARGV[4])
if redis.call("HGET", KEYS[1], "redriveOpen") then
  local e = cjson.decode(redis.call("LINDEX", KEYS[3], -1))
  e.outcome = redis.call("HGET", KEYS[1], "status")
  redis.call("LSET", KEYS[3], -1, cjson.encode(e))
  redis.call("HDEL", KEYS[1], "redriveOpen")
end
if KEYS[11] then redis.call("ZADD", KEYS[11], ARGV[2], ARGV[1]) end
-- A QStash message ("cbOn" set) has no callback on a cancel.
local cb = redis.call("HMGET", KEYS[1], "cb", "cbOn")
if cb[1] == "1" and not cb[2] then
  redis.call("HSET", KEYS[1], "cbStatus", "pending")
  redis.call("ZADD", KEYS[9], 0, ARGV[1])
  return "callback"
end
return "ok"
