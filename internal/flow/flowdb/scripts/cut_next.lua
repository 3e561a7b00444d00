-- Gives the oldest waiters of a cut key's line the turns a worker's rate
-- has free, once each: a turn is kept in Redis until its request comes
-- back for it (cut_wait), on any worker. The place of each is kept too: a
-- request whose turn is lost goes back to it. A waiter's place is when it
-- may start at the earliest (a retry's due time), so a turn before it is
-- not its; the line is in that order, so nobody after it can take it
-- either.
-- KEYS[1]: the key's line (member: request id, score: its place, ms)
-- KEYS[2]: places of requests taken from the line (field: id, value: place)
-- KEYS[3]: turns given and not yet taken (field: request id, value: ms)
-- ARGV[1]: how long the keys live untouched (ms)
-- ARGV[2...]: the turns to give (ms), earliest first
-- Returns: {waiters left, the first one's place (ms, or -1), id, turn
-- index (1-based), id, turn index...}
local out = {"0", "-1"}
local heads = lineHead(KEYS[1], #ARGV - 1)
local h, given = 1, 0
for i = 2, #ARGV do
  if h > #heads then break end
  if tonumber(heads[h + 1]) <= tonumber(ARGV[i]) then
    lineLeave(KEYS[1], heads[h])
    redis.call("HSET", KEYS[2], heads[h], heads[h + 1])
    redis.call("HSET", KEYS[3], heads[h], ARGV[i])
    out[#out + 1] = heads[h]
    out[#out + 1] = tostring(i - 1)
    h, given = h + 2, given + 1
  end
end
if given > 0 then
  redis.call("PEXPIRE", KEYS[2], ARGV[1])
  redis.call("PEXPIRE", KEYS[3], ARGV[1])
end
local left = lineSize(KEYS[1])
if left == 0 then
  redis.call("DEL", KEYS[2])
else
  out[2] = lineHead(KEYS[1], 1)[2]
end
out[1] = tostring(left)
return out
