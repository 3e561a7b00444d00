-- Shared by acquire.lua and par_next.lua (prepended to each): drops the
-- key's ended leases, and puts back at its place the request of a handed
-- slot that ended unused: it was never woken (the worker that handed it
-- died) or never came. A library, not a script: it defines handBack(slots,
-- wait, handed, now, ttl) for the script it is prepended to (after the
-- line library), and has no KEYS, ARGV or Returns of its own (those are
-- its host's).
local function handBack(slots, wait, handed, now, ttl)
  for _, id in ipairs(redis.call("ZRANGEBYSCORE", slots, "-inf", now)) do
    local place = redis.call("ZSCORE", handed, id)
    if place then
      lineJoin(wait, id, place, ttl)
      redis.call("ZREM", handed, id)
    end
  end
  redis.call("ZREMRANGEBYSCORE", slots, "-inf", now)
end
