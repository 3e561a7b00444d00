-- Puts a request in a destination's fairness line (a worker had no fair
-- slot for it). A request promoted from the line that found no slot where
-- it landed goes back to the place it had (and is no longer handed over);
-- one already in line keeps its place.
-- KEYS[1]: the destination's line (member: request id, score: its place, ms)
-- KEYS[2]: the promoted requests (field: request id, value: its place)
-- KEYS[3]: the handed-over requests (member: request id, score: when, ms)
-- ARGV[1]: request id
-- ARGV[2]: now (ms), the place of a newcomer
-- ARGV[3]: how long the keys live untouched (ms)
-- Returns: the number of requests in line
local place = redis.call("HGET", KEYS[2], ARGV[1]) or ARGV[2]
redis.call("HDEL", KEYS[2], ARGV[1])
redis.call("ZREM", KEYS[3], ARGV[1])
redis.call("ZADD", KEYS[1], "NX", place, ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[3])
return redis.call("ZCARD", KEYS[1])
