-- A probe's attempt ended, or the probe was held by a later gate: a
-- success closes the endpoint; a failure opens it again, its probe
-- interval doubled (up to the longest), and failedAt says when (the
-- waiters that began to wait before it may end, ep_enter.lua); a probe
-- given back makes the next probe due at once.
-- KEYS[1]: the endpoint's state hash (state, since, interval, nextProbe, probe, probeUntil, failedAt)
-- KEYS[2]: the endpoint's line (member: request id, score: its place, ms)
-- KEYS[3]: the waiters by when each began to wait (ep_enter.lua)
-- ARGV[1]: the probe's request id
-- ARGV[2]: now (ms)
-- ARGV[3]: "ok" when the probe succeeded, "failed" when it failed, "back" when it was given back
-- ARGV[4]: the longest probe interval (ms)
-- ARGV[5]: how long a waiter waits before it ends (ms); 0: until the endpoint closes
-- Returns {-1} when the request was no probe of this endpoint's (any
-- more); {1} when it closed the endpoint; {0, nextProbe, head, id, ...}
-- when the endpoint stays open (head: the first waiter, to wake at
-- nextProbe, or ""; the ids after it: the waiters that waited ARGV[5]
-- already, to wake now, for their end, after this failed probe).
if redis.call("HGET", KEYS[1], "probe") ~= ARGV[1] then return {-1} end
local now = tonumber(ARGV[2])
if redis.call("HGET", KEYS[1], "by") == "operator" then
  -- An operator opened it meanwhile: only an operator closes it.
  redis.call("HSET", KEYS[1], "state", "open", "probe", "", "probeUntil", 0)
  return {0, 0, ""}
end
if ARGV[3] == "ok" then
  redis.call("HSET", KEYS[1], "state", "closed", "probe", "", "probeUntil", 0, "since", now)
  return {1}
end
local interval = tonumber(redis.call("HGET", KEYS[1], "interval"))
local nextProbe = now
if ARGV[3] == "failed" then
  interval = math.min(interval * 2, tonumber(ARGV[4]))
  nextProbe = now + interval
  redis.call("HSET", KEYS[1], "failedAt", now)
end
redis.call("HSET", KEYS[1], "state", "open", "interval", interval, "nextProbe", nextProbe, "probe", "", "probeUntil", 0)
local first = lineHead(KEYS[2], 1)
local out = {0, nextProbe, first[1] or ""}
local failAfter = tonumber(ARGV[5])
if ARGV[3] == "failed" and failAfter > 0 then
  for _, id in ipairs(redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", now - failAfter)) do table.insert(out, id) end
end
return out
