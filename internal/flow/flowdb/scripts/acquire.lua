-- Takes a parallelism slot of a flow-control key for a request, or puts
-- the request in the key's waiting line, keeping its place. A slot handed
-- over (par_next.lua, or here) is already the request's: taking it only
-- renews the lease. Free slots go to the longest waiters first, so a
-- newcomer never overtakes the line: within a key, waiters start in
-- the order they were made. handBack (par_hand_back.lua) runs first.
-- KEYS[1]: the key's slots (member: request id, score: lease end, ms)
-- KEYS[2]: the key's waiting line (member: request id, score: its place:
--          when the request was made, ms; ids of one millisecond go by id)
-- KEYS[3]: the requests handed a slot and not yet started (member: request
--          id, score: its place)
-- ARGV[1]: request id
-- ARGV[2]: parallelism
-- ARGV[3]: now (ms)
-- ARGV[4]: the lease's end (ms)
-- ARGV[5]: how long the keys live untouched (ms)
-- ARGV[6]: a handed-over slot's lease end (ms): time for the woken
--          request to start
-- ARGV[7]: the request's place in the line (ms)
-- Returns: {1, 0, 0, woken...} when the slot is taken; {0, waiters, end
-- of the earliest lease (ms), woken...} when the request waits. woken are
-- the waiters ahead of it that free slots were handed to: the caller
-- wakes them.
handBack(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[5])
if redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  redis.call("ZADD", KEYS[1], ARGV[4], ARGV[1])
  lineLeave(KEYS[2], ARGV[1])
  redis.call("ZREM", KEYS[3], ARGV[1])
  redis.call("PEXPIRE", KEYS[1], ARGV[5])
  return {1, 0, 0}
end
local free = tonumber(ARGV[2]) - redis.call("ZCARD", KEYS[1])
if free > 0 and lineSize(KEYS[2]) == 0 then
  redis.call("ZADD", KEYS[1], ARGV[4], ARGV[1])
  redis.call("PEXPIRE", KEYS[1], ARGV[5])
  return {1, 0, 0}
end
lineJoin(KEYS[2], ARGV[1], ARGV[7], ARGV[5])
local reply = {0, 0, 0}
if free > 0 then
  -- Slots freed without a hand-over (leases that ended): the oldest
  -- waiters get them, this request too if it is one of them.
  local next = lineTake(KEYS[2], free)
  for i = 1, #next, 2 do
    if next[i] == ARGV[1] then
      redis.call("ZADD", KEYS[1], ARGV[4], ARGV[1])
      reply[1] = 1
    else
      redis.call("ZADD", KEYS[1], ARGV[6], next[i])
      redis.call("ZADD", KEYS[3], next[i + 1], next[i])
      reply[#reply + 1] = next[i]
    end
  end
  redis.call("PEXPIRE", KEYS[1], ARGV[5])
  redis.call("PEXPIRE", KEYS[3], ARGV[5])
end
if reply[1] == 0 then
  reply[2] = lineSize(KEYS[2])
  local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
  if #first > 0 then reply[3] = tonumber(first[2]) end
end
return reply
