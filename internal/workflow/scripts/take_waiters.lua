-- Takes the waiters of an event: all of them, or one run's, so that one
-- notify reaches each waiter once.
-- KEYS[1]: the event's waiters (a hash: run id, newline, timeout message
--   id -> waiter JSON)
-- ARGV[1]: the run id, or "" for every run
-- Returns: the waiters taken (JSON), none when nobody waits
if ARGV[1] == "" then
  local all = redis.call("HVALS", KEYS[1])
  redis.call("DEL", KEYS[1])
  return all
end
local prefix = ARGV[1] .. "\n"
local all = redis.call("HGETALL", KEYS[1])
local out, gone = {}, {}
for i = 1, #all, 2 do
  if string.sub(all[i], 1, #prefix) == prefix then
    out[#out + 1] = all[i + 1]
    gone[#gone + 1] = all[i]
  end
end
if #gone > 0 then redis.call("HDEL", KEYS[1], unpack(gone)) end
return out
