-- Starts an attempt: records an attempt left in flight by a crashed worker
-- as "interrupted" (it does not count against the budget), numbers the new
-- attempt and marks it in flight. The interruption that reaches the
-- allowance is not recorded here: the request is poison (its attempts keep
-- killing workers), and Go ends it failed through Finish, writing nothing
-- here. It returns what the attempt reads of the record, read with what
-- decides, and the spec: a script's reply costs Redis more per field than
-- a plain HGETALL's, so only the fields Go names, not the whole hash.
-- KEYS[1]: request hash
-- KEYS[2]: attempts list
-- KEYS[3]: stats hash
-- KEYS[4]: spec
-- ARGV[1]: now (ms)
-- ARGV[2]: the error text of an interrupted attempt
-- ARGV[3]: interruptions allowed per run (since submission or redrive)
-- ARGV[4..]: the hash fields to return (none this script writes)
-- Returns: {"missing"}; {status, failedRun} when terminal; {"notdue", dueMs};
-- {"poison", inflightN, inflightAt, spec, fields...}; {"ok", n, waitingFor,
-- waitUntil, spec, fields...}: what the request waited for since its last
-- attempt and until when it was to wait (ms), each "" for none; fields are
-- the values of ARGV[4..] in order, "" for an absent one
-- An empty field reads as absent (request.go's hash fields): a finish
-- empties the marks a request loses.
local kReq, kAtt, kStats = KEYS[1], KEYS[2], KEYS[3]
local now = ARGV[1]
local cur = redis.call("HMGET", kReq, "status", "failedRun", "nextAttemptAt", "attemptCount", "inflightN", "inflightAt", "waitingFor", "interrupted",
  "waitUntil", unpack(ARGV, 4))
-- record is the reply's tail: the spec, then the fields asked for.
local function record(reply)
  reply[#reply + 1] = redis.call("GET", KEYS[4]) or ""
  for i = 4, #ARGV do reply[#reply + 1] = cur[i + 6] or "" end
  return reply
end
local st = cur[1]
if not st then return {"missing"} end
if st ~= "pending" and st ~= "retrying" then return {st, cur[2] or "-1"} end
local due = tonumber(cur[3]) or 0
if due > tonumber(now) then return {"notdue", cur[3]} end
if cur[5] and cur[5] ~= "" then
  local k = tonumber(cur[8] or "0") + 1
  if k >= tonumber(ARGV[3]) then return record({"poison", cur[5], cur[6] or now}) end
  redis.call("HSET", kReq, "interrupted", tostring(k))
  redis.call("RPUSH", kAtt, cjson.encode({n = tonumber(cur[5]), startedAtMs = tonumber(cur[6]), outcome = "interrupted", error = ARGV[2]}))
  redis.call("HINCRBY", kStats, "att|interrupted|", "1")
end
local n = tostring(tonumber(cur[4] or "0") + 1)
if not cur[7] or cur[7] == "" then
  redis.call("HSET", kReq, "attemptCount", n, "inflightN", n, "inflightAt", now, "updatedAt", now)
  return record({"ok", n, "", ""})
end
redis.call("HSET", kReq, "attemptCount", n, "inflightN", n, "inflightAt", now, "updatedAt", now)
redis.call("HDEL", kReq, "waitingFor", "waitUntil")
return record({"ok", n, cur[7], cur[9] or ""})
