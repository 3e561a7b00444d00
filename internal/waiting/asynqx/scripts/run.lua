-- Moves one waiting task (retry or scheduled) to asynq's pending list now.
-- move_waiting.lua is prepended.
-- KEYS[1]: asynq's pending list
-- KEYS[2]: the doorbell
-- ARGV[1]: task id
-- ARGV[2]: asynq's key prefix of the queue
-- ARGV[3]: now (ns)
-- ARGV[4]: "1" to ring the doorbell after a move
-- Returns: the task's state before, "" when it does not exist
local state = move(ARGV[2], KEYS[1], ARGV[1], ARGV[3])
if state == "retry" or state == "scheduled" then ring(KEYS[2], ARGV[4]) end
return state or ""
