-- Parks a request in its key's paused line if the key is still paused
-- (one step, so a resume cannot slip between the check and the park).
-- KEYS[1]: the key's control hash (field paused: "1" while paused)
-- KEYS[2]: the key's paused line (member: request id, score: ms)
-- ARGV[1]: request id
-- ARGV[2]: now (ms), its place
-- ARGV[3]: the line's time to live (ms)
-- Returns 1 when it parked the request, 0 when the key is not paused.
if redis.call("HGET", KEYS[1], "paused") ~= "1" then return 0 end
lineJoin(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return 1
