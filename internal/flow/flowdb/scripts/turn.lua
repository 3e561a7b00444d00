-- Gives a request its turn on a flow-control key's rate, once: a request
-- that must wait gets a turn of its own (GCRA's virtual time, one interval
-- after the last turn given), kept until it comes back for it, so each
-- waiter is scheduled exactly once and waiters start in arrival order.
-- A request back too late for its turn (more than the grace after it) has
-- lost it and gets a new one: a turn taken late would bunch starts.
-- KEYS[1]: the key's next free turn (µs)
-- KEYS[2]: the turns given and not yet taken (field: request id, value: µs)
-- ARGV[1]: request id
-- ARGV[2]: now (µs)
-- ARGV[3]: the interval between turns (µs)
-- ARGV[4]: the grace after a turn (µs)
-- ARGV[5]: how long the keys live untouched (ms)
-- Returns: {"1", turn} when the request may start now; {"0", turn} when it
-- waits until turn (µs)
local now, interval = tonumber(ARGV[2]), tonumber(ARGV[3])
-- Times in µs pass 10^14: tostring would write them in floating point.
local function str(n) return string.format("%.0f", n) end
local mine = tonumber(redis.call("HGET", KEYS[2], ARGV[1]) or "")
if mine then
  if mine <= now then
    redis.call("HDEL", KEYS[2], ARGV[1])
    if now - mine <= tonumber(ARGV[4]) then return {"1", str(mine)} end
    mine = nil -- lost: a new turn below
  else
    return {"0", str(mine)}
  end
end
local tat = tonumber(redis.call("GET", KEYS[1]) or "0")
if tat <= now then
  redis.call("SET", KEYS[1], str(now + interval), "PX", ARGV[5])
  return {"1", str(now)}
end
redis.call("SET", KEYS[1], str(tat + interval), "PX", ARGV[5])
redis.call("HSET", KEYS[2], ARGV[1], str(tat))
redis.call("PEXPIRE", KEYS[2], ARGV[5])
return {"0", str(tat)}
