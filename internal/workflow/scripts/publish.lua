-- Counts a message published to a workflow run, starting the run when the
-- message starts it. A message joins the run's log when it is first
-- delivered (deliver.lua), not here: a step due later (a sleep, a wait's
-- timeout) must not show in the deliveries made before it is due. The run
-- is kept until its last message is due, and a retention after.
-- KEYS[1]: the run's hash (url, first, bytes, createdAt)
-- KEYS[2]: the run's messages (a list of ids, for a cancel)
-- KEYS[3]: the run's log
-- KEYS[4]: what is kept of the run once ended (a new start replaces it)
-- KEYS[5], KEYS[6]: where a new start sets the log and what was kept of
--   an earlier run of its id aside, for a minute: a start retryd then
--   refuses puts them back (forget.lua)
-- ARGV[1]: "init" when the message starts the run, else "step"
-- ARGV[2]: the workflow's URL ("" when the message is not to it: it
--   does not join the log, and is not counted in its bytes)
-- ARGV[3]: the bytes the message adds to the log
-- ARGV[4]: the message id
-- ARGV[5]: now (ms)
-- ARGV[6]: how long the run is kept after its last message is due (ms)
-- ARGV[7]: the most bytes the log may hold
-- ARGV[8]: the most messages a run may have
-- ARGV[9]: how long until the message is due (ms, 0 for now)
-- ARGV[10]: for an init, the step of another run that invoked this one
--   (kept to return this run's result to it), or ""
-- ARGV[11]: for an init, the run's settings its steps inherit, or ""
-- Returns: {"ok"}; {"dup", first message id} when an init finds the run
-- started with the same URL; {"url", its URL} when it has another;
-- {"missing"} when a step's run does not exist (never started, or
-- ended); {"full", bytes, messages} when the message would pass a limit
local run = redis.call("HMGET", KEYS[1], "url", "first", "bytes")
local keep = tonumber(ARGV[6]) + tonumber(ARGV[9])
-- The run's keys share one expiry, pushed out when it falls a minute
-- short (not on every message).
local function expire()
  if redis.call("PTTL", KEYS[1]) < keep - 60000 then
    for i = 1, 3 do redis.call("PEXPIRE", KEYS[i], keep) end
  end
end
if ARGV[1] == "init" then
  if run[1] then
    if run[1] ~= ARGV[2] then return {"url", run[1]} end
    return {"dup", run[2]}
  end
  redis.call("DEL", KEYS[2], KEYS[5], KEYS[6])
  for i = 3, 4 do
    if redis.call("EXISTS", KEYS[i]) == 1 then
      redis.call("RENAME", KEYS[i], KEYS[i + 2])
      redis.call("PEXPIRE", KEYS[i + 2], 60000)
    end
  end
  redis.call("HSET", KEYS[1], "url", ARGV[2], "first", ARGV[4], "bytes", ARGV[3], "createdAt", ARGV[5])
  if ARGV[10] ~= "" then redis.call("HSET", KEYS[1], "invoker", ARGV[10]) end
  if ARGV[11] ~= "" then redis.call("HSET", KEYS[1], "config", ARGV[11]) end
  redis.call("RPUSH", KEYS[2], ARGV[4])
  expire()
  return {"ok"}
end
if not run[1] then return {"missing"} end
if ARGV[2] ~= "" and run[1] ~= ARGV[2] then return {"url", run[1]} end
local bytes = tonumber(run[3] or "0")
if ARGV[2] ~= "" then bytes = bytes + tonumber(ARGV[3]) end
local n = redis.call("LLEN", KEYS[2]) + 1
if bytes > tonumber(ARGV[7]) or n > tonumber(ARGV[8]) then
  return {"full", tostring(bytes), tostring(n)}
end
redis.call("HSET", KEYS[1], "bytes", bytes)
redis.call("RPUSH", KEYS[2], ARGV[4])
expire()
return {"ok"}
