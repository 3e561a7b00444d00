-- Takes the next requests of a destination's fairness line for the slots a
-- worker has free, remembering their places (a promoted request that finds
-- no slot where it lands goes back to its place), and forgets the place
-- of a request whose attempt ended. Once the line is empty the places are
-- dropped too: a promoted request that must wait again then starts a new
-- line, and no place outlives the contention.
-- KEYS[1]: the destination's line (member: request id, score: its place, ms)
-- KEYS[2]: the promoted requests (field: request id, value: its place)
-- ARGV[1]: the request whose attempt ended, or ""
-- ARGV[2]: how many to take
-- ARGV[3]: how long the keys live untouched (ms)
-- Returns: {requests left in line, taken id...}
if ARGV[1] ~= "" then redis.call("HDEL", KEYS[2], ARGV[1]) end
local out = {"0"}
local n = tonumber(ARGV[2])
if n > 0 then
  local popped = redis.call("ZPOPMIN", KEYS[1], n)
  for i = 1, #popped, 2 do
    redis.call("HSET", KEYS[2], popped[i], popped[i + 1])
    out[#out + 1] = popped[i]
  end
  if #popped > 0 then redis.call("PEXPIRE", KEYS[2], ARGV[3]) end
end
local left = redis.call("ZCARD", KEYS[1])
if left == 0 then redis.call("DEL", KEYS[2]) end
out[1] = tostring(left)
return out
