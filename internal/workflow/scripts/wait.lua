-- Adds a waiter to an event, within the most one event may have, and
-- keeps the event as long as its longest waiter.
-- KEYS[1]: the event's waiters (a hash: run id, newline, timeout message
--   id -> waiter JSON)
-- ARGV[1]: the waiter's field
-- ARGV[2]: the waiter (JSON)
-- ARGV[3]: how long to keep the event at least (ms)
-- ARGV[4]: the most waiters an event may have
-- Returns: 1, or 0 when the event has the most waiters already
if redis.call("HLEN", KEYS[1]) >= tonumber(ARGV[4]) and redis.call("HEXISTS", KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
if redis.call("PTTL", KEYS[1]) < tonumber(ARGV[3]) then redis.call("PEXPIRE", KEYS[1], ARGV[3]) end
return 1
