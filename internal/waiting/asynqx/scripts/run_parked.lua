-- Moves one task to asynq's pending list now if it sleeps in asynq's
-- scheduled set: where a parked request sleeps (hold.lua), and never a
-- retry's backoff. move_waiting.lua is prepended.
-- KEYS[1]: asynq's pending list
-- KEYS[2]: the doorbell
-- KEYS[3]: the task's hash
-- KEYS[4]: asynq's scheduled set
-- ARGV[1]: task id
-- ARGV[2]: now (ns)
-- ARGV[3]: "1" to ring the doorbell after a move
-- Returns: 1 if it moved the task, else 0
if redis.call("HGET", KEYS[3], "state") ~= "scheduled" then return 0 end
move(KEYS[3], KEYS[4], KEYS[1], ARGV[1], ARGV[2])
ring(KEYS[2], ARGV[3])
return 1
