-- Takes a finished request out of its queue's line (ARGV[1], or "" for
-- none) and returns the parked waiters whose turn it now is: those among
-- the first `parallelism` of the line, unless the queue is paused. They
-- leave the parked set; the caller wakes them.
-- KEYS[1]: the queue's line; KEYS[2]: its parked waiters; KEYS[3]: its
-- settings
-- ARGV[1]: the finished request's id, or ""
-- Returns: the ids of the waiters to wake, in line order
lineLeave(KEYS[1], ARGV[1])
redis.call("ZREM", KEYS[2], ARGV[1])
if redis.call("HGET", KEYS[3], "paused") == "1" then return {} end
local p = tonumber(redis.call("HGET", KEYS[3], "parallelism") or "1") or 1
local out = {}
local head = lineHead(KEYS[1], p)
for i = 1, #head, 2 do
  if redis.call("ZREM", KEYS[2], head[i]) == 1 then table.insert(out, head[i]) end
end
return out
