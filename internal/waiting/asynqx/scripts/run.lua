-- Wakes one task: moves it to asynq's pending list now if it waits (retry
-- or scheduled); if it is active (on its way to waiting, or running),
-- leaves its woken mark, which the script that sees it land reads
-- (hold.lua, due.lua), so the wake is not lost. move_waiting.lua is
-- prepended.
-- KEYS[1]: asynq's pending list
-- KEYS[2]: the doorbell
-- KEYS[3]: the task's hash
-- KEYS[4]: asynq's retry set
-- KEYS[5]: asynq's scheduled set
-- KEYS[6]: the task's woken mark
-- ARGV[1]: task id
-- ARGV[2]: now (ns)
-- ARGV[3]: "1" to ring the doorbell after a move
-- ARGV[4]: now (ms)
-- ARGV[5]: how long the woken mark lasts (ms)
-- Returns: the task's state before, "" when it does not exist
local state = redis.call("HGET", KEYS[3], "state")
if state == "retry" then
  move(KEYS[3], KEYS[4], KEYS[1], ARGV[1], ARGV[2])
  redis.call("DEL", KEYS[6])
  ring(KEYS[2], ARGV[3])
elseif state == "scheduled" then
  move(KEYS[3], KEYS[5], KEYS[1], ARGV[1], ARGV[2])
  redis.call("DEL", KEYS[6])
  ring(KEYS[2], ARGV[3])
elseif state == "active" then
  woken(KEYS[6], tonumber(ARGV[4]), ARGV[5])
end
return state or ""
