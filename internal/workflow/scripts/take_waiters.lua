-- Takes the waiters of an event: all of them, or one run's, so that one
-- notify reaches each waiter once.
-- KEYS[1]: the event's waiters (a hash: run id -> waiter JSON)
-- ARGV[1]: the run id, or "" for every run
-- Returns: the waiters taken (JSON), none when nobody waits
if ARGV[1] ~= "" then
  local w = redis.call("HGET", KEYS[1], ARGV[1])
  if not w then return {} end
  redis.call("HDEL", KEYS[1], ARGV[1])
  return {w}
end
local all = redis.call("HVALS", KEYS[1])
redis.call("DEL", KEYS[1])
return all
