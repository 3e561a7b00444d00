-- Takes a canceled request out of its endpoint's line. When it was the
-- first waiter (the one woken for the next probe), the next waiter takes
-- that turn.
-- KEYS[1]: the endpoint's state hash (state, nextProbe, probeUntil, by)
-- KEYS[2]: the endpoint's line (member: request id, score: its place, ms)
-- KEYS[3]: the waiters' keys with parallelism (ep_enter.lua)
-- ARGV[1]: request id
-- Returns {} when nobody is to be woken for a probe; {id, at} when the
-- new first waiter id is to be woken at at (ms).
redis.call("HDEL", KEYS[3], ARGV[1])
local first = lineHead(KEYS[2], 1)
if first[1] ~= ARGV[1] then
  lineLeave(KEYS[2], ARGV[1])
  return {}
end
lineLeave(KEYS[2], ARGV[1])
local h = redis.call("HMGET", KEYS[1], "state", "nextProbe", "probeUntil", "by")
if h[4] == "operator" or (h[1] ~= "open" and h[1] ~= "half_open") then return {} end
local at = h[2]
if h[1] == "half_open" then at = h[3] end
local next = lineHead(KEYS[2], 1)
if not next[1] then return {} end
return {next[1], at}
