-- Adds (or moves) a timer entry and says whether it is now the earliest,
-- so that only an entry earlier than every other is announced.
-- KEYS[1]: the timer (member: task id, score: due, ms)
-- ARGV[1]: task id
-- ARGV[2]: due (ms)
-- Returns: 1 when the entry is the earliest, else 0
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
local first = redis.call("ZRANGE", KEYS[1], 0, 0)
if first[1] == ARGV[1] then return 1 end
return 0
