-- Takes the next requests of a fairness line (the lowest places: tenants
-- take turns, see fair_wait) for the slots a worker has free, remembering
-- their places (a promoted request that finds no slot where it lands goes
-- back to its place) and when they were handed over, and forgets a request
-- whose attempt ended. It also returns the handed-over requests not heard
-- of since stale: their worker may have died before waking them, and the
-- caller looks at them (they are not returned again for the stale age).
-- Once the line is empty and nothing handed over is pending, the places
-- (and those given to tenants) are dropped too: a promoted request that
-- must wait again then starts a new line, and no place outlives the
-- contention.
-- KEYS[1]: the line (member: request id, score: its place)
-- KEYS[2]: the promoted requests (field: request id, value: its place)
-- KEYS[3]: the handed-over requests (member: request id, score: when, ms)
-- KEYS[4]: the places given (field ":taken": the last place taken from the
--          line, which this keeps; fields by tenant: see fair_wait)
-- ARGV[1]: the request whose attempt ended, or ""
-- ARGV[2]: how many to take
-- ARGV[3]: how long the keys live untouched (ms)
-- ARGV[4]: now (ms)
-- ARGV[5]: the stale age (ms)
-- ARGV[6]: at most this many stale ones
-- Returns: {requests left in line, handed over still pending, stale count,
-- stale id..., taken id...}
if ARGV[1] ~= "" then
  redis.call("HDEL", KEYS[2], ARGV[1])
  redis.call("ZREM", KEYS[3], ARGV[1])
end
local now = tonumber(ARGV[4])
local stale = redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", now - tonumber(ARGV[5]), "LIMIT", 0, tonumber(ARGV[6]))
for _, id in ipairs(stale) do redis.call("ZADD", KEYS[3], now, id) end
local taken = {}
local n = tonumber(ARGV[2])
if n > 0 then
  local popped = lineTake(KEYS[1], n)
  if #popped > 0 then
    local last = tonumber(popped[#popped])
    if last > (tonumber(redis.call("HGET", KEYS[4], ":taken") or "") or -1) then
      redis.call("HSET", KEYS[4], ":taken", popped[#popped])
    end
  end
  for i = 1, #popped, 2 do
    redis.call("HSET", KEYS[2], popped[i], popped[i + 1])
    redis.call("ZADD", KEYS[3], now, popped[i])
    taken[#taken + 1] = popped[i]
  end
  if #popped > 0 then
    redis.call("PEXPIRE", KEYS[2], ARGV[3])
    redis.call("PEXPIRE", KEYS[3], ARGV[3])
  end
end
local left = lineSize(KEYS[1])
local handed = redis.call("ZCARD", KEYS[3])
if left == 0 and handed == 0 then redis.call("DEL", KEYS[2], KEYS[4]) end
local out = {tostring(left), tostring(handed), tostring(#stale)}
for _, id in ipairs(stale) do out[#out + 1] = id end
for _, id in ipairs(taken) do out[#out + 1] = id end
return out
