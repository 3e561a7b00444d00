-- Wakes one task: moves it to asynq's pending list now if it waits (retry
-- or scheduled); if it is active (on its way to waiting, or running),
-- leaves its woken mark (a field of its hash), which the script that sees
-- it land reads (hold.lua, due.lua), so the wake is not lost.
-- move_waiting.lua is prepended.
-- KEYS[1]: asynq's pending list
-- KEYS[2]: the doorbell
-- KEYS[3]: the task's hash
-- KEYS[4]: asynq's retry set
-- KEYS[5]: asynq's scheduled set
-- ARGV[1]: task id
-- ARGV[2]: now (ns)
-- ARGV[3]: "1" to ring the doorbell after a move
-- ARGV[4]: now (ms)
-- ARGV[5]: how long a woken mark is in force (ms)
-- Returns: the task's state before, "" when it does not exist
local cur = redis.call("HMGET", KEYS[3], "state", "retryd_woken")
local state, mark = cur[1], cur[2]
if state == "retry" or state == "scheduled" then
  move(KEYS[3], state == "retry" and KEYS[4] or KEYS[5], KEYS[1], ARGV[1], ARGV[2])
  if mark then redis.call("HDEL", KEYS[3], "retryd_woken") end
  ring(KEYS[2], ARGV[3])
elseif state == "active" then
  woken(KEYS[3], mark, tonumber(ARGV[4]), ARGV[5])
end
return state or ""
