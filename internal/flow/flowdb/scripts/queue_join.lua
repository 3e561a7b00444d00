-- Puts a request in its queue's line, once, after every request that
-- joined before it: its place is its creation time (µs of the ms) or
-- just after the last place given, whichever is later, so requests made
-- within one millisecond keep the order they were made in.
-- KEYS[1]: the queue's line; KEYS[2]: the last place given
-- ARGV[1]: request id; ARGV[2]: its creation (ms * 1000); ARGV[3]: how
-- long the keys live untouched (ms)
-- Returns: 1 when it joined, 0 when it was in the line already
if linePlace(KEYS[1], ARGV[1]) then return 0 end
local place = math.max(tonumber(ARGV[2]), tonumber(redis.call("GET", KEYS[2]) or "0") + 1)
redis.call("SET", KEYS[2], string.format("%.0f", place), "PX", ARGV[3])
lineJoin(KEYS[1], ARGV[1], string.format("%.0f", place), ARGV[3])
return 1
