-- Starts an attempt: records an attempt left in flight by a crashed worker
-- as "interrupted" (it does not count against the budget), numbers the new
-- attempt and marks it in flight. The interruption that reaches the
-- allowance is not recorded here: the request is poison (its attempts keep
-- killing workers), and Go ends it failed through Finish, writing nothing
-- here. One read of the whole record decides, and the record goes back as
-- the script left it, with its spec: one round trip, four commands.
-- KEYS[1]: request hash
-- KEYS[2]: attempts list
-- KEYS[3]: stats hash
-- KEYS[4]: spec
-- ARGV[1]: now (ms)
-- ARGV[2]: the error text of an interrupted attempt
-- ARGV[3]: interruptions allowed per run (since submission or redrive)
-- Returns: {"missing"}; {status, failedRun} when terminal; {"notdue", dueMs};
-- {"poison", inflightN, inflightAt, spec, record}; {"ok", n, spec, record}
-- (record: the hash's fields and values; spec false when it has none)
local kReq, kAtt, kStats = KEYS[1], KEYS[2], KEYS[3]
local now = ARGV[1]
local h = redis.call("HGETALL", kReq)
local cur = {}
for i = 1, #h, 2 do cur[h[i]] = h[i + 1] end
local st = cur.status
if not st then return {"missing"} end
if st ~= "pending" and st ~= "retrying" then return {st, cur.failedRun or "-1"} end
local due = tonumber(cur.nextAttemptAt or "0")
if due > tonumber(now) then return {"notdue", cur.nextAttemptAt} end
if cur.inflightN then
  local k = tonumber(cur.interrupted or "0") + 1
  if k >= tonumber(ARGV[3]) then
    return {"poison", cur.inflightN, cur.inflightAt or now, redis.call("GET", KEYS[4]), h}
  end
  cur.interrupted = tostring(k)
  redis.call("HSET", kReq, "interrupted", cur.interrupted)
  redis.call("RPUSH", kAtt, cjson.encode({n = tonumber(cur.inflightN), startedAtMs = tonumber(cur.inflightAt), outcome = "interrupted", error = ARGV[2]}))
  redis.call("HINCRBY", kStats, "att|interrupted|", "1")
end
local n = tostring(tonumber(cur.attemptCount or "0") + 1)
redis.call("HSET", kReq, "attemptCount", n, "inflightN", n, "inflightAt", now, "updatedAt", now)
cur.attemptCount, cur.inflightN, cur.inflightAt, cur.updatedAt = n, n, now, now
if cur.waitingFor then
  redis.call("HDEL", kReq, "waitingFor", "waitUntil")
  cur.waitingFor, cur.waitUntil = nil, nil
end
local out = {}
for f, v in pairs(cur) do
  out[#out + 1] = f
  out[#out + 1] = v
end
return {"ok", n, redis.call("GET", KEYS[4]), out}
