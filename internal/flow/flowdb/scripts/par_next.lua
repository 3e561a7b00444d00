-- Gives back a request's parallelism slot (if one is named) and hands
-- every free slot, including those of leases that ended (a worker died
-- holding them), straight to the longest waiters, so no newcomer takes one
-- first; the caller wakes them. A handed slot that ended unused (its
-- request was never woken, because the worker that handed it died, or it
-- never came) puts its request back at its place first (handBack,
-- par_hand_back.lua).
-- KEYS[1]: the key's slots
-- KEYS[2]: the key's waiting line
-- KEYS[3]: the requests handed a slot and not yet started (score: place)
-- ARGV[1]: the request whose attempt ended, or ""
-- ARGV[2]: parallelism
-- ARGV[3]: now (ms)
-- ARGV[4]: the handed-over slots' lease end (ms): time for the woken
--          requests to start
-- ARGV[5]: how long the keys live untouched (ms)
-- Returns: {waiters left, end of the earliest lease (ms, 0: none),
-- woken...}
if ARGV[1] ~= "" then
  redis.call("ZREM", KEYS[1], ARGV[1])
  lineLeave(KEYS[2], ARGV[1])
  redis.call("ZREM", KEYS[3], ARGV[1])
end
handBack(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[5])
local reply = {0, 0}
local free = tonumber(ARGV[2]) - redis.call("ZCARD", KEYS[1])
if free > 0 then
  local next = lineTake(KEYS[2], free)
  for i = 1, #next, 2 do
    redis.call("ZADD", KEYS[1], ARGV[4], next[i])
    redis.call("ZADD", KEYS[3], next[i + 1], next[i])
    reply[#reply + 1] = next[i]
  end
  if #next > 0 then
    redis.call("PEXPIRE", KEYS[1], ARGV[5])
    redis.call("PEXPIRE", KEYS[3], ARGV[5])
  end
end
reply[1] = lineSize(KEYS[2])
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
if #first > 0 then reply[2] = tonumber(first[2]) end
return reply
