-- Admits a request of a queue in its order: it may start when it is among
-- the first `parallelism` requests of the queue's line (in the order they
-- were made) and the queue is not paused; otherwise it is
-- parked, to be woken when one ahead of it finishes.
-- KEYS[1]: the queue's line (member: request id, score: its place, see
--          queue_join.lua)
-- KEYS[2]: its parked waiters
-- KEYS[3]: its settings (parallelism, paused)
-- ARGV[1]: request id
-- ARGV[2]: how long the keys live untouched (ms)
-- ARGV[3]: its place if it never joined (its creation, ms * 1000): the
--          API's join was lost
-- Returns: {"1"} to start; {"0", the ids ahead of it that hold its turn}
lineJoin(KEYS[1], ARGV[1], ARGV[3], ARGV[2])
local p = tonumber(redis.call("HGET", KEYS[3], "parallelism") or "1") or 1
local paused = redis.call("HGET", KEYS[3], "paused") == "1"
local rank = redis.call("ZRANK", KEYS[1], ARGV[1])
if not paused and rank < p then
  redis.call("ZREM", KEYS[2], ARGV[1])
  return {"1"}
end
redis.call("ZADD", KEYS[2], 0, ARGV[1])
redis.call("PEXPIRE", KEYS[2], ARGV[2])
local out = {"0"}
local head = lineHead(KEYS[1], math.min(p, 10))
for i = 1, #head, 2 do
  table.insert(out, head[i])
end
return out
