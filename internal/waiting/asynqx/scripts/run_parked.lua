-- Moves one task to asynq's pending list now if it sleeps in asynq's
-- scheduled set: where a parked request sleeps (hold.lua), and never a
-- retry's backoff. move_waiting.lua is prepended.
-- KEYS[1]: asynq's pending list
-- KEYS[2]: the doorbell
-- ARGV[1]: task id
-- ARGV[2]: asynq's key prefix of the queue
-- ARGV[3]: now (ns)
-- ARGV[4]: "1" to ring the doorbell after a move
-- Returns: 1 if it moved the task, else 0
if redis.call("HGET", ARGV[2] .. "t:" .. ARGV[1], "state") ~= "scheduled" then return 0 end
move(ARGV[2], KEYS[1], ARGV[1], ARGV[3])
ring(KEYS[2], ARGV[4])
return 1
