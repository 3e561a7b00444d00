-- Records a finished attempt and moves the request to its next status. An
-- attempt whose in-flight mark is gone (a later run recorded it as interrupted)
-- is dropped; a request canceled meanwhile keeps its status and only gains the
-- attempt. On a terminal status it fills the outcome of an open redrive,
-- starts retention, and marks the callback due.
-- KEYS[1]: request hash
-- KEYS[2]: attempts list
-- KEYS[3]: redrives list
-- KEYS[4..8]: status indexes in Statuses order
-- KEYS[9]: callback-due index
-- KEYS[10]: stats hash
-- KEYS[11]: spec
-- KEYS[12]: result
-- KEYS[13]: the failed-by-host index of the request's host (the DLQ's host filter)
-- ARGV[1]: request id
-- ARGV[2]: the attempt's n
-- ARGV[3]: the attempt as JSON
-- ARGV[4]: the next status
-- ARGV[5]: now (ms)
-- ARGV[6]: retention (ms)
-- ARGV[7]: the attempt's stats fields "counter,durBucket,lateBucket"
-- ARGV[8]: duration (ms)
-- ARGV[9]: lateness (ms)
-- ARGV[10]: "1" when ARGV[11] is a response body to keep
-- ARGV[11]: the response body
-- ARGV[12..]: HSET field/value pairs for the next state
-- Returns: "stale", "canceled", "callback" or "ok"
if redis.call("HGET", KEYS[1], "inflightN") ~= ARGV[2] then return "stale" end
local c, d, l = string.match(ARGV[7], "([^,]+),([^,]+),([^,]+)")
redis.call("HINCRBY", KEYS[10], c, 1)
redis.call("HINCRBY", KEYS[10], d, 1)
redis.call("HINCRBY", KEYS[10], "dur_sum_ms", ARGV[8])
redis.call("HINCRBY", KEYS[10], l, 1)
redis.call("HINCRBY", KEYS[10], "late_sum_ms", ARGV[9])
redis.call("RPUSH", KEYS[2], ARGV[3])
redis.call("HDEL", KEYS[1], "inflightN", "inflightAt")
redis.call("HINCRBY", KEYS[1], "budgetUsed", 1)
local st = redis.call("HGET", KEYS[1], "status")
if st == "canceled" then return "canceled" end
local idx = {pending = KEYS[4], retrying = KEYS[5], completed = KEYS[6], failed = KEYS[7], canceled = KEYS[8]}
if st ~= ARGV[4] then
  redis.call("ZREM", idx[st], ARGV[1])
  redis.call("ZADD", idx[ARGV[4]], 0, ARGV[1])
end
redis.call("HSET", KEYS[1], "status", ARGV[4], "updatedAt", ARGV[5], unpack(ARGV, 12))
if ARGV[10] == "1" then
  redis.call("SET", KEYS[12], ARGV[11])
  redis.call("HSET", KEYS[1], "hasResult", "1")
end
if ARGV[4] == "pending" or ARGV[4] == "retrying" then return "ok" end
redis.call("HDEL", KEYS[1], "nextAttemptAt")
redis.call("HSET", KEYS[1], "completedAt", ARGV[5])
if ARGV[4] == "failed" then
  -- Entries of requests redriven or expired since are dropped when read.
  redis.call("ZADD", KEYS[13], 0, ARGV[1])
  redis.call("PEXPIRE", KEYS[13], ARGV[6])
end
if redis.call("HGET", KEYS[1], "redriveOpen") then
  local e = cjson.decode(redis.call("LINDEX", KEYS[3], -1))
  e.outcome = redis.call("HGET", KEYS[1], "status")
  redis.call("LSET", KEYS[3], -1, cjson.encode(e))
  redis.call("HDEL", KEYS[1], "redriveOpen")
end
for _, i in ipairs({1, 2, 3, 11, 12}) do redis.call("PEXPIRE", KEYS[i], ARGV[6]) end
if redis.call("HGET", KEYS[1], "cb") == "1" then
  redis.call("HSET", KEYS[1], "cbStatus", "pending")
  redis.call("ZADD", KEYS[9], 0, ARGV[1])
  return "callback"
end
return "ok"
