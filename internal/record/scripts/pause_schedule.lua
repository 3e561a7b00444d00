-- Pauses or resumes a schedule.
-- KEYS[1]: schedule hash
-- KEYS[2]: due set
-- ARGV[1]: schedule id
-- ARGV[2]: "1" to pause, "0" to resume
-- ARGV[3]: the next fire time (ms) when resuming
-- Returns: 0 when the schedule does not exist, else 1
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
redis.call("HSET", KEYS[1], "paused", ARGV[2])
if ARGV[2] == "1" then
  redis.call("ZREM", KEYS[2], ARGV[1])
else
  redis.call("HSET", KEYS[1], "nextFireAt", ARGV[3])
  redis.call("ZADD", KEYS[2], ARGV[3], ARGV[1])
end
return 1
