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
-- One read of the whole hash decides; the answer is that hash, patched
-- with what this script writes (fewer commands than reading field by field).
local flat = redis.call("HGETALL", kReq)
if #flat == 0 then return {"missing"} end
local h, at = {}, {}
for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1]; at[flat[i]] = i + 1 end
local st = h.status
if st ~= "pending" and st ~= "retrying" then return {st, h.failedRun or "-1"} end
local due = tonumber(h.nextAttemptAt or "0")
if due > tonumber(now) then return {"notdue", tostring(due)} end
if h.inflightN then
  redis.call("RPUSH", kAtt, cjson.encode({n = tonumber(h.inflightN), startedAtMs = tonumber(h.inflightAt), outcome = "interrupted", error = ierr}))
  redis.call("HINCRBY", kStats, "att|interrupted|", 1)
end
local n = tonumber(h.attemptCount or "0") + 1
redis.call("HSET", kReq, "attemptCount", n, "inflightN", n, "inflightAt", now, "updatedAt", now)
local set = {attemptCount = tostring(n), inflightN = tostring(n), inflightAt = now, updatedAt = now}
for f, v in pairs(set) do
  if at[f] then flat[at[f]] = v else flat[#flat + 1] = f; flat[#flat + 1] = v end
end
if h.waitingFor then
  redis.call("HDEL", kReq, "waitingFor")
  flat[at.waitingFor] = ""
end
return {"ok", tostring(n), flat, redis.call("GET", kSpec)}
