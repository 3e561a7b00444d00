-- Shared by due.lua, hold.lua, run.lua and run_parked.lua (prepended to
-- each). A library, not a script: it has no KEYS, ARGV or Returns of its
-- own (those are its host's). It defines:
-- ring(bell, on): rings the doorbell list bell when on is "1" unless a
--   token waits there already.
-- move(task, from, pending, id, nowNs): moves task id (its hash task)
--   from asynq's set from (its retry or scheduled set) to the pending
--   list.
-- wokenAt(mark, now, ttl): when the task was first seen active (on its
--   way to waiting, or running) by a wake still in force, from its woken
--   mark (the value of its hash's field "retryd_woken", ms, or false);
--   nil when none is, or it lapsed (older than ttl ms).
-- woken(task, mark, now, ttl): notes a wake of a task still active in
--   its hash's woken mark, keeping the first time in force, and returns
--   that time.
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
local function wokenAt(mark, now, ttl)
  local at = tonumber(mark)
  if at and now - at < tonumber(ttl) then return at end
  return nil
end
local function woken(task, mark, now, ttl)
  local at = wokenAt(mark, now, ttl)
  if at then return at end
  redis.call("HSET", task, "retryd_woken", now)
  return now
end
