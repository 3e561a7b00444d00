-- Puts a request in a fairness line (a worker had no fair slot for it).
-- Tenants take turns in one line: a newcomer's place is one after the
-- later of the last place taken from the line and the last place given to
-- its tenant, so a tenant that floods the line queues behind its own
-- requests, not ahead of another tenant's (start-time fair queueing), and
-- a tenant's requests keep their arrival order. A request promoted from
-- the line that found no slot where it landed goes back to the place it
-- had (and is no longer handed over); one already in line keeps its place.
-- KEYS[1]: the line (member: request id, score: its place)
-- KEYS[2]: the promoted requests (field: request id, value: its place)
-- KEYS[3]: the handed-over requests (member: request id, score: when, ms)
-- KEYS[4]: the places given (field: tenant, value: the last place given to
--          it; field ":taken": the last place taken from the line)
-- ARGV[1]: request id
-- ARGV[2]: its tenant
-- ARGV[3]: how long the keys live untouched (ms)
-- Returns: the number of requests in line
local function str(n) return string.format("%.0f", n) end
local place = redis.call("HGET", KEYS[2], ARGV[1])
if not place and not linePlace(KEYS[1], ARGV[1]) then
  local taken = tonumber(redis.call("HGET", KEYS[4], ":taken") or "")
  if not taken then
    -- A new line, or one made before places were given: after its last.
    taken = tonumber(lineLast(KEYS[1]) or "0")
    redis.call("HSET", KEYS[4], ":taken", str(taken))
  end
  place = math.max(taken, tonumber(redis.call("HGET", KEYS[4], ARGV[2]) or "0")) + 1
  redis.call("HSET", KEYS[4], ARGV[2], str(place))
  redis.call("PEXPIRE", KEYS[4], ARGV[3])
  place = str(place)
end
redis.call("HDEL", KEYS[2], ARGV[1])
redis.call("ZREM", KEYS[3], ARGV[1])
if place then
  lineJoin(KEYS[1], ARGV[1], place, ARGV[3])
else
  redis.call("PEXPIRE", KEYS[1], ARGV[3])
end
return lineSize(KEYS[1])
