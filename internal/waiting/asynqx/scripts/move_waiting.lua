-- Shared by due.lua, run.lua and run_parked.lua (prepended to each).
-- A library, not a script: it defines ring(bell, on), which rings the
-- doorbell list bell when on is "1" unless a token waits there already,
-- and move(prefix, pending, id, nowNs), which moves task id (its hash at
-- prefix .. "t:" .. id, asynq's sets under prefix) from retry or
-- scheduled to the pending list and answers its state before the move. It
-- has no KEYS, ARGV or Returns of its own (those are its host's).
local function ring(bell, on)
  if on == "1" and redis.call("LLEN", bell) == 0 then
    redis.call("RPUSH", bell, "1")
  end
end
local function move(prefix, pending, id, nowNs)
  local task = prefix .. "t:" .. id
  local state = redis.call("HGET", task, "state")
  if state == "retry" or state == "scheduled" then
    redis.call("ZREM", prefix .. state, id)
    redis.call("LPUSH", pending, id)
    redis.call("HSET", task, "state", "pending", "pending_since", nowNs)
  end
  return state
end
