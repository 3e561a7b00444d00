-- Takes the first waiters out of a closed endpoint's line, to be woken in
-- line order, unless it was opened again meanwhile.
-- KEYS[1]: the endpoint's state hash (field state)
-- KEYS[2]: the endpoint's line (member: request id, score: its place, ms)
-- ARGV[1]: at most this many
-- Returns: the ids taken, in line order
local state = redis.call("HGET", KEYS[1], "state")
if state and state ~= "closed" then return {} end
local taken = lineTake(KEYS[2], tonumber(ARGV[1]))
local ids = {}
for i = 1, #taken, 2 do table.insert(ids, taken[i]) end
return ids
