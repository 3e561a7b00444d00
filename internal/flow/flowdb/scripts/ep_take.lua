-- Takes the first waiters out of a closed endpoint's line, to be woken in
-- line order, unless it was opened again meanwhile, with their places and
-- the keys of those with parallelism.
-- KEYS[1]: the endpoint's state hash (field state)
-- KEYS[2]: the endpoint's line (member: request id, score: its place, ms)
-- KEYS[3]: the waiters' keys with parallelism (ep_enter.lua)
-- KEYS[4]: the waiters by when each began to wait (ep_enter.lua)
-- ARGV[1]: at most this many
-- Returns: {id, place (ms), key, id, place, key, ...} in line order; key
-- is "" for a waiter with no parallelism
local state = redis.call("HGET", KEYS[1], "state")
if state and state ~= "closed" then return {} end
local taken = lineTake(KEYS[2], tonumber(ARGV[1]))
local out = {}
for i = 1, #taken, 2 do
  local id = taken[i]
  table.insert(out, id)
  table.insert(out, taken[i + 1])
  table.insert(out, redis.call("HGET", KEYS[3], id) or "")
  redis.call("HDEL", KEYS[3], id)
  redis.call("ZREM", KEYS[4], id)
end
return out
