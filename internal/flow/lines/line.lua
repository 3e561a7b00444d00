-- A library, not a script: the line that every kind of waiting shares (a
-- queue's, a paused key's, a destination's or a tenant's fairness line, a
-- parallelism key's, a cut key's). A line is a sorted set: member, a
-- request id; score, its place. A request keeps the place it first took
-- until it leaves the line, so one woken early, or twice, never loses its
-- turn. Every script of internal/flow has this library first (Library).

-- lineJoin puts id in line at place, or leaves it at the place it has,
-- and renews the line's time to live (ttl, ms).
local function lineJoin(line, id, place, ttl)
  redis.call("ZADD", line, "NX", place, id)
  redis.call("PEXPIRE", line, ttl)
end

-- linePlace is id's place in line, or nil when it is not in it.
local function linePlace(line, id)
  local place = redis.call("ZSCORE", line, id)
  if place then return place end
  return nil
end

-- lineLast is the place of the last in line, or nil for an empty line.
local function lineLast(line)
  local last = redis.call("ZRANGE", line, -1, -1, "WITHSCORES")
  return last[2]
end

-- lineSize is how many wait in line.
local function lineSize(line)
  return redis.call("ZCARD", line)
end

-- lineMove puts id in line at place, wherever it was, and renews the
-- line's time to live (ttl, ms).
local function lineMove(line, id, place, ttl)
  redis.call("ZADD", line, place, id)
  redis.call("PEXPIRE", line, ttl)
end

-- lineTake takes the first n of line out of it: {id, place, id, place, ...}.
local function lineTake(line, n)
  return redis.call("ZPOPMIN", line, n)
end

-- lineHead is the first n of line, left in it: {id, place, id, place, ...}.
local function lineHead(line, n)
  if n < 1 then return {} end
  return redis.call("ZRANGE", line, 0, n - 1, "WITHSCORES")
end

-- lineLeave takes id out of line.
local function lineLeave(line, id)
  redis.call("ZREM", line, id)
end
