-- The endpoint gate's decision for a request: go (the endpoint is closed),
-- go as its probe (a probe is due and none is out), or wait in the
-- endpoint's line, keeping its first place.
-- KEYS[1]: the endpoint's state hash (state, since, interval, nextProbe, probe, probeUntil)
-- KEYS[2]: the endpoint's line (member: request id, score: its place, ms)
-- ARGV[1]: request id
-- ARGV[2]: now (ms), its place if it joins
-- ARGV[3]: the line's time to live (ms)
-- ARGV[4]: a probe's lease (ms): after it, a probe that never ended is lost and another is due
-- Returns {0} to go ({0, 1}: the endpoint has no state, which expired:
-- its listing is stale); {2} to go as the probe; {1, nextProbe, since, head}
-- to wait (head: 1 when it is first in line; nextProbe 0 for an endpoint
-- an operator opened, which is never probed: an operator closes it).
local state = redis.call("HGET", KEYS[1], "state")
if not state or state == "closed" then
  lineLeave(KEYS[2], ARGV[1])
  if not state then return {0, 1} end
  return {0}
end
-- An endpoint in use stays: its state lives as long as its line.
redis.call("PEXPIRE", KEYS[1], ARGV[3])
local now = tonumber(ARGV[2])
local h = redis.call("HMGET", KEYS[1], "since", "nextProbe", "probeUntil", "by", "probe")
local since, nextProbe, probeUntil = tonumber(h[1]), tonumber(h[2]), tonumber(h[3]) or 0
local due
if h[4] == "operator" then
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
  return {2}
end
lineJoin(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
local first = lineHead(KEYS[2], 1)
local head = 0
if first[1] == ARGV[1] then head = 1 end
return {1, nextProbe, since, head}
