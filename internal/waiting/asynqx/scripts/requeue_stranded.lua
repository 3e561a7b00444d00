-- Moves an active task whose lease is gone or silent (its worker missed
-- heartbeats: asynqx.Silent) back to asynq's pending list. asynq's
-- recoverer does the same for an expired lease a minute or more later,
-- and never for an active task without a lease entry (asynq issues #1051,
-- #1144); crash recovery within the sweep interval is retryd's promise, so
-- the sweeper does it.
-- KEYS[1]: asynq's active list
-- KEYS[2]: asynq's lease set
-- KEYS[3]: asynq's pending list
-- KEYS[4]: the task hash
-- ARGV[1]: task id
-- ARGV[2]: the lease end below which its worker is silent (Unix s)
-- Returns: 1 when moved, 0 when the task is not stranded (anymore)
if redis.call("HGET", KEYS[4], "state") ~= "active" then return 0 end
local lease = redis.call("ZSCORE", KEYS[2], ARGV[1])
if lease and tonumber(lease) >= tonumber(ARGV[2]) then return 0 end
redis.call("LREM", KEYS[1], 0, ARGV[1])
redis.call("ZREM", KEYS[2], ARGV[1])
redis.call("RPUSH", KEYS[3], ARGV[1])
redis.call("HSET", KEYS[4], "state", "pending")
return 1
