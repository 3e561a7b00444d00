-- Takes back an entry whose message was then refused, so no delivery of
-- the run carries a step that was never published.
-- KEYS[1]: the run's hash
-- KEYS[2]: the run's log
-- ARGV[1]: the entry (JSON), as appended
-- Returns: how many entries went (0 or 1)
local n = redis.call("LREM", KEYS[2], -1, ARGV[1])
if n > 0 and redis.call("EXISTS", KEYS[1]) == 1 then
  redis.call("HINCRBY", KEYS[1], "bytes", -#ARGV[1])
end
return n
