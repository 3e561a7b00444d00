-- Reserves a place for a new request among its owner's unfinished ones.
-- KEYS[1]: the owner's set of unfinished request ids ({retryd}:owner:<owner>)
-- ARGV[1]: the request id
-- ARGV[2]: the submission time in ms (the member's score: oldest pruned first)
-- ARGV[3]: the limit
-- ARGV[4]: the set's time to live in ms (an idle owner's set goes away)
-- Returns: 1 reserved, 0 the owner is at the limit (nothing written)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
