-- Shared by ep_cancel.lua and ep_enter.lua (prepended to each): takes a
-- request out of an endpoint's line. A library, not a script: it defines
-- epLeave(state, line, keys, joined, id) for the script it is prepended to
-- (after the line library), and has no KEYS, ARGV or Returns of its own
-- (those are its host's). epLeave answers {} when nobody is to be woken
-- for a probe, or {next, at} when the request was the first waiter (the
-- one woken for the next probe) of an endpoint that is probed: the new
-- first waiter next takes that turn, at at (ms).
local function epLeave(state, line, keys, joined, id)
  redis.call("HDEL", keys, id)
  redis.call("ZREM", joined, id)
  local first = lineHead(line, 1)
  lineLeave(line, id)
  if first[1] ~= id then return {} end
  local h = redis.call("HMGET", state, "state", "nextProbe", "probeUntil", "by")
  if h[4] == "operator" or (h[1] ~= "open" and h[1] ~= "half_open") then return {} end
  local at = h[2]
  if h[1] == "half_open" then at = h[3] end
  local next = lineHead(line, 1)
  if not next[1] then return {} end
  return {next[1], at}
end
