-- Ends a run: its messages' list and state go; what the workflow logs
-- show of it (its URL, times, state, result, invoker) is kept with its log
-- for a retention, and what a restart needs (its start's settings).
-- KEYS[1]: the run's hash
-- KEYS[2]: the run's messages
-- KEYS[3]: the run's log
-- KEYS[4]: what is kept of the run once ended (a hash)
-- ARGV[1]: how it ended: "success" or "canceled"
-- ARGV[2]: now (ms)
-- ARGV[3]: its result ("" for none)
-- ARGV[4]: how long it is kept (ms)
-- Returns: {"missing"} when the run is not running; else {"ok", the ids
-- of its messages...}
local run = redis.call("HMGET", KEYS[1], "url", "createdAt", "invoker", "config")
if not run[2] then return {"missing"} end
local ids = redis.call("LRANGE", KEYS[2], 0, -1)
redis.call("DEL", KEYS[4])
redis.call("HSET", KEYS[4], "url", run[1], "createdAt", run[2], "completedAt", ARGV[2], "state", ARGV[1])
if ARGV[3] ~= "" then redis.call("HSET", KEYS[4], "response", ARGV[3]) end
if run[3] then redis.call("HSET", KEYS[4], "invoker", run[3]) end
if run[4] then redis.call("HSET", KEYS[4], "config", run[4]) end
redis.call("DEL", KEYS[1], KEYS[2])
redis.call("PEXPIRE", KEYS[3], ARGV[4])
redis.call("PEXPIRE", KEYS[4], ARGV[4])
local out = {"ok"}
for i = 1, #ids do out[#out + 1] = ids[i] end
return out
