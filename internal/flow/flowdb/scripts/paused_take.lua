-- Takes the first waiters out of a resumed key's paused line, to be woken,
-- unless the key was paused again meanwhile.
-- KEYS[1]: the key's control hash (field paused: "1" while paused)
-- KEYS[2]: the key's paused line (member: request id, score: ms)
-- ARGV[1]: at most this many
-- Returns: the ids taken, in line order
if redis.call("HGET", KEYS[1], "paused") == "1" then return {} end
local taken = lineTake(KEYS[2], tonumber(ARGV[1]))
local ids = {}
for i = 1, #taken, 2 do table.insert(ids, taken[i]) end
return ids
