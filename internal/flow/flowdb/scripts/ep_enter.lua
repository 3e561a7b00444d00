-- The endpoint gate's decision for a request: go (the endpoint is closed),
-- go as its probe (a probe is due and none is out), wait in the
-- endpoint's line at its place (when it was made, as in its key's
-- parallelism line), so that the oldest waiter is the next probe, or end
-- (BREAKER_FAIL_AFTER). A waiter with parallelism also leaves its key
-- (ARGV[6]), for the close to put it back at its place in the key's line
-- before it wakes the endpoint's line (par_keep.lua): woken together, they
-- would race for their keys' slots.
-- A waiter's time to end counts from when it began to wait, never from
-- when the endpoint opened: it ends once it has waited ARGV[7] and a probe
-- made since it began to wait failed (failedAt), so that no request ends
-- for want of a probe. It looks at its end when it has waited ARGV[7];
-- if no probe has failed since it began by then, the next probe that
-- fails wakes it (ep_probed.lua). A waiter of an endpoint an operator
-- opened (never probed) ends once it has waited ARGV[7].
-- KEYS[1]: the endpoint's state hash (state, since, interval, nextProbe, probe, probeUntil, by, failedAt)
-- KEYS[2]: the endpoint's line (member: request id, score: its place, ms)
-- KEYS[3]: the waiters' keys with parallelism (field: request id, value:
--          its flow-control key)
-- KEYS[4]: the waiters by when each began to wait (member: request id, score: ms)
-- ARGV[1]: request id
-- ARGV[2]: now (ms)
-- ARGV[3]: the line's time to live (ms)
-- ARGV[4]: a probe's lease (ms): after it, a probe that never ended is lost and another is due
-- ARGV[5]: the request's place (ms)
-- ARGV[6]: its flow-control key when it has parallelism, or ""
-- ARGV[7]: how long a waiter waits before it ends (ms); 0: until the endpoint closes
-- Returns {0} to go ({0, 1}: the endpoint has no state, which expired:
-- its listing is stale); {2} to go as the probe; {1, nextProbe, since,
-- head, endAt} to wait (head: 1 when it is first in line; nextProbe 0 for
-- an endpoint an operator opened, which is never probed: an operator
-- closes it; endAt: when it looks at its end, 0 for none: the close or a
-- failed probe wakes it); {3, began} to end,
-- having waited since began, or {3, began, next, at} when the next waiter
-- is to be woken at at for the next probe in its place.
local state = redis.call("HGET", KEYS[1], "state")
if not state or state == "closed" then
  lineLeave(KEYS[2], ARGV[1])
  redis.call("HDEL", KEYS[3], ARGV[1])
  redis.call("ZREM", KEYS[4], ARGV[1])
  if not state then return {0, 1} end
  return {0}
end
-- An endpoint in use stays: its state lives as long as its line.
redis.call("PEXPIRE", KEYS[1], ARGV[3])
local now = tonumber(ARGV[2])
local h = redis.call("HMGET", KEYS[1], "since", "nextProbe", "probeUntil", "by", "probe", "failedAt")
local since, nextProbe, probeUntil = tonumber(h[1]), tonumber(h[2]), tonumber(h[3]) or 0
local operator = h[4] == "operator"
local due
if operator then
  due = false
  nextProbe = 0
elseif state == "half_open" then
  -- The probe back again (its worker stopped mid-attempt): still the probe.
  due = now >= probeUntil or h[5] == ARGV[1]
  nextProbe = probeUntil
else
  due = now >= nextProbe
end
if due then
  redis.call("HSET", KEYS[1], "state", "half_open", "probe", ARGV[1], "probeUntil", now + tonumber(ARGV[4]))
  lineLeave(KEYS[2], ARGV[1])
  redis.call("HDEL", KEYS[3], ARGV[1])
  redis.call("ZREM", KEYS[4], ARGV[1])
  return {2}
end
lineJoin(KEYS[2], ARGV[1], ARGV[5], ARGV[3])
if ARGV[6] ~= "" then
  redis.call("HSET", KEYS[3], ARGV[1], ARGV[6])
  redis.call("PEXPIRE", KEYS[3], ARGV[3])
end
redis.call("ZADD", KEYS[4], "NX", now, ARGV[1])
redis.call("PEXPIRE", KEYS[4], ARGV[3])
local began = tonumber(redis.call("ZSCORE", KEYS[4], ARGV[1]))
local endAt = 0
local failAfter = tonumber(ARGV[7])
if failAfter > 0 then
  local due = began + failAfter
  if now >= due and (operator or (tonumber(h[6]) or 0) >= began) then
    local out = {3, began}
    for _, v in ipairs(epLeave(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1])) do table.insert(out, v) end
    return out
  end
  -- Past due with no probe failed since it began: the next probe that
  -- fails wakes it.
  if now < due then endAt = due end
end
local first = lineHead(KEYS[2], 1)
local head = 0
if first[1] == ARGV[1] then head = 1 end
return {1, nextProbe, since, head, endAt}
