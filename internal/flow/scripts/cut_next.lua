-- Gives the oldest waiters of a cut key's line the turns a worker's rate
-- has free, once each: a turn is kept in Redis until its request comes
-- back for it (cut_wait), on any worker. The place of each is kept too: a
-- request whose turn is lost goes back to it.
-- KEYS[1]: the key's line (member: request id, score: its place, ms)
-- KEYS[2]: places of requests taken from the line (field: id, value: place)
-- KEYS[3]: turns given and not yet taken (field: request id, value: ms)
-- ARGV[1]: how long the keys live untouched (ms)
-- ARGV[2...]: the turns to give (ms), earliest first
-- Returns: {waiters left, id...}: ids[i] got the i-th turn
local out = {"0"}
local popped = redis.call("ZPOPMIN", KEYS[1], #ARGV - 1)
for i = 1, #popped, 2 do
  redis.call("HSET", KEYS[2], popped[i], popped[i + 1])
  redis.call("HSET", KEYS[3], popped[i], ARGV[(i + 1) / 2 + 1])
  out[#out + 1] = popped[i]
end
if #popped > 0 then
  redis.call("PEXPIRE", KEYS[2], ARGV[1])
  redis.call("PEXPIRE", KEYS[3], ARGV[1])
end
local left = redis.call("ZCARD", KEYS[1])
if left == 0 then redis.call("DEL", KEYS[2]) end
out[1] = tostring(left)
return out
