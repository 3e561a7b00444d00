-- Shared by due.lua, hold.lua, run.lua and run_parked.lua (prepended to
-- each). A library, not a script: it has no KEYS, ARGV or Returns of its
-- own (those are its host's). It defines:
-- ring(bell, on): rings the doorbell list bell when on is "1" unless a
--   token waits there already.
-- move(task, from, pending, id, nowNs): moves task id (its hash task)
--   from asynq's set from (its retry or scheduled set) to the pending
--   list.
-- woken(mark, now, ttl): notes a wake of a task still active (on its way
--   to waiting, or running) in its woken mark, a string in the task's
--   slot whose value is when the task was first seen active (ms); keeps
--   the first time, and returns it.
local function ring(bell, on)
  if on == "1" and redis.call("LLEN", bell) == 0 then
    redis.call("RPUSH", bell, "1")
  end
end
local function move(task, from, pending, id, nowNs)
  redis.call("ZREM", from, id)
  redis.call("LPUSH", pending, id)
  redis.call("HSET", task, "state", "pending", "pending_since", nowNs)
end
local function woken(mark, now, ttl)
  local first = redis.call("GET", mark)
  if first then return tonumber(first) or now end
  redis.call("SET", mark, now, "PX", ttl)
  return now
end
