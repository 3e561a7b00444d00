-- Records a finished attempt and moves the request to its next status. An
-- attempt whose in-flight mark is gone (a later run recorded it as interrupted)
-- is dropped; a request canceled meanwhile keeps its status and only gains the
-- attempt. On a terminal status it fills the outcome of an open redrive,
-- enters the finished index (by which the sweeper's trim deletes the
-- request once its retention has passed: no key of it gets a TTL), and
-- marks the callback due. An attempt that made no call (ARGV[14]) is
-- recorded all the same, but takes back the attempt number Begin gave it:
-- it is not an attempt. It spends no budget, unless it is to
-- be retried (ARGV[14] "2": a credential or proxy that failed for now),
-- which would otherwise be retried forever.
-- KEYS[1]: request hash
-- KEYS[2]: attempts list
-- KEYS[3]: redrives list
-- KEYS[4..8]: status indexes in Statuses order
-- KEYS[9]: callback-due index
-- KEYS[10]: result
-- KEYS[11]: the failed-by-host index of the request's host (the DLQ's host filter)
-- KEYS[12]: the finished index (by completedAt; the list's finished filter)
-- KEYS[13]: the failure-class index of this attempt's class (unused when ARGV[9] is "")
-- KEYS[14]: the status-code index of this attempt's code (unused when ARGV[10] is "")
-- The failure-class and status-code indexes of the request's previous
-- attempt are derived inside, from ARGV[12] and ARGV[13] and the class and
-- code the hash holds: they share KEYS[1]'s hash tag.
-- KEYS[15]: the tenant's payload-expiry index, only while the tenant has a
--   payload retention (absent: the payload lives as long as the record)
-- ARGV[1]: request id
-- ARGV[2]: the attempt's n
-- ARGV[3]: the attempt as JSON
-- ARGV[4]: the next status
-- ARGV[5]: now (ms)
-- ARGV[6]: the tenant's retention (ms), the failed-by-host index's TTL
-- ARGV[7]: what to do with ARGV[8], a response body: "0" nothing; "1" keep
--   it in the result key; "2" keep it in the hash's "result" field (short
--   enough to keep the hash compact: no key and no command of its own)
-- ARGV[8]: the response body
-- ARGV[9]: this attempt's failure class ("" when it succeeded)
-- ARGV[10]: its status code when it failed with one, else ""
-- ARGV[11]: the request's finished-index member (id, then what names its
-- other index entries; see finishedMember), entered on a terminal status
-- ARGV[12]: the failure-class indexes' key prefix
-- ARGV[13]: the status-code indexes' key prefix
-- ARGV[14]: "0" for a call, "1" for an attempt that made no call, "2" for
--   one that made no call and spends budget
-- ARGV[15..]: HSET field/value pairs for the next state
-- Returns: "stale", "canceled", "callback" or "ok"
-- One read of what decides and one write of the hash: fewer commands than
-- field by field. Numbers go to redis.call as
-- strings: Redis formats a Lua number with snprintf on every call.
local cur = redis.call("HMGET", KEYS[1], "inflightN", "status", "budgetUsed", "redriveOpen", "cb", "failureClass",
  "lastStatusCode", "cbOn")
if cur[1] ~= ARGV[2] then return "stale" end
redis.call("RPUSH", KEYS[2], ARGV[3])
local called = ARGV[14] == "0"
local budget = cur[3] or "0"
if ARGV[14] ~= "1" then
  budget = tostring(tonumber(budget) + 1)
end
if not called then
  redis.call("HINCRBY", KEYS[1], "attemptCount", "-1")
end
local st = cur[2]
if st == "canceled" then
  redis.call("HSET", KEYS[1], "budgetUsed", budget)
  redis.call("HDEL", KEYS[1], "inflightN", "inflightAt")
  return "canceled"
end
local idx = {pending = KEYS[4], retrying = KEYS[5], completed = KEYS[6], failed = KEYS[7], canceled = KEYS[8]}
if st ~= ARGV[4] then
  redis.call("ZREM", idx[st], ARGV[1])
  redis.call("ZADD", idx[ARGV[4]], "0", ARGV[1])
end
local terminal = ARGV[4] ~= "pending" and ARGV[4] ~= "retrying"
local set = {"status", ARGV[4], "updatedAt", ARGV[5], "budgetUsed", budget}
for i = 15, #ARGV do set[#set + 1] = ARGV[i] end
-- The failure indexes hold the requests whose last attempt failed: an
-- attempt that succeeds after a success touches neither.
local oldClass = cur[6] or ""
local oldCode = ""
if oldClass ~= "" then oldCode = cur[7] or "" end
if oldClass ~= ARGV[9] then
  if oldClass ~= "" then redis.call("ZREM", ARGV[12] .. oldClass, ARGV[1]) end
  if ARGV[9] ~= "" then redis.call("ZADD", KEYS[13], "0", ARGV[1]) end
end
if oldCode ~= ARGV[10] then
  if oldCode ~= "" then redis.call("ZREM", ARGV[13] .. oldCode, ARGV[1]) end
  if ARGV[10] ~= "" then redis.call("ZADD", KEYS[14], "0", ARGV[1]) end
end
if ARGV[7] == "1" then
  redis.call("SET", KEYS[10], ARGV[8])
  set[#set + 1] = "hasResult"; set[#set + 1] = "1"
  set[#set + 1] = "result"; set[#set + 1] = ""
elseif ARGV[7] == "2" then
  -- A result key of an earlier run (redriven since) is left to the trim:
  -- "hasResult" says which of the two is read.
  set[#set + 1] = "hasResult"; set[#set + 1] = "2"
  set[#set + 1] = "result"; set[#set + 1] = ARGV[8]
end
-- A callback is due at the end of a request that has one ("cb"); for a
-- QStash message only on the ends it has one for ("cbOn": "c" success,
-- "f" failure), so no task runs for a callback that sends nothing.
local on = cur[8]
local due = terminal and cur[5] == "1" and (not on or (ARGV[4] == "completed" and string.find(on, "c", 1, true) ~= nil) or
  (ARGV[4] == "failed" and string.find(on, "f", 1, true) ~= nil))
-- The marks the request loses are emptied in the same write (an empty
-- field reads as absent): no HDEL, but for a redrive's open mark, which
-- only a redriven request has.
set[#set + 1] = "inflightN"; set[#set + 1] = ""
set[#set + 1] = "inflightAt"; set[#set + 1] = ""
if terminal then
  set[#set + 1] = "completedAt"; set[#set + 1] = ARGV[5]
  set[#set + 1] = "nextAttemptAt"; set[#set + 1] = ""
  if due then set[#set + 1] = "cbStatus"; set[#set + 1] = "pending" end
end
redis.call("HSET", KEYS[1], unpack(set))
if terminal and cur[4] then redis.call("HDEL", KEYS[1], "redriveOpen") end
if not terminal then return "ok" end
redis.call("ZADD", KEYS[12], ARGV[5], ARGV[11])
if KEYS[15] then redis.call("ZADD", KEYS[15], ARGV[5], ARGV[1]) end
if ARGV[4] == "failed" then
  -- Entries of requests redriven or expired since are dropped when read.
  redis.call("ZADD", KEYS[11], "0", ARGV[1])
  redis.call("PEXPIRE", KEYS[11], ARGV[6])
end
if cur[4] then
  local e = cjson.decode(redis.call("LINDEX", KEYS[3], -1))
  e.outcome = ARGV[4]
  redis.call("LSET", KEYS[3], -1, cjson.encode(e))
end
if due then
  redis.call("ZADD", KEYS[9], "0", ARGV[1])
  return "callback"
end
return "ok"
