-- Starts an attempt: records an attempt left in flight by a crashed worker
-- as "interrupted" (it does not count against the budget), numbers the new
-- attempt, marks it in flight and returns the record.
-- KEYS[1]: request hash
-- KEYS[2]: attempts list
-- KEYS[3]: stats hash
-- KEYS[4]: spec
-- ARGV[1]: now (ms)
-- ARGV[2]: the error text of an interrupted attempt
-- Returns: {"missing"}; {status, failedRun} when terminal; {"notdue", dueMs};
-- {"ok", n, HGETALL of the request, spec}
local kReq, kAtt, kStats, kSpec = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, ierr = ARGV[1], ARGV[2]
local st = redis.call("HGET", kReq, "status")
if not st then return {"missing"} end
if st ~= "pending" and st ~= "retrying" then return {st, redis.call("HGET", kReq, "failedRun") or "-1"} end
local due = tonumber(redis.call("HGET", kReq, "nextAttemptAt") or "0")
if due > tonumber(now) then return {"notdue", tostring(due)} end
local inN = redis.call("HGET", kReq, "inflightN")
if inN then
  local at = redis.call("HGET", kReq, "inflightAt")
  redis.call("RPUSH", kAtt, cjson.encode({n = tonumber(inN), startedAtMs = tonumber(at), outcome = "interrupted", error = ierr}))
  redis.call("HINCRBY", kStats, "att|interrupted|", 1)
end
local n = redis.call("HINCRBY", kReq, "attemptCount", 1)
redis.call("HSET", kReq, "inflightN", n, "inflightAt", now, "updatedAt", now)
redis.call("HDEL", kReq, "waitingFor")
return {"ok", tostring(n), redis.call("HGETALL", kReq), redis.call("GET", kSpec)}
