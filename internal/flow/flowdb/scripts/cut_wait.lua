-- Admits a request of a key that adaptive backpressure has cut, or puts it
-- in the key's line. A waiter gets its turn once, from the line (cut_next),
-- kept in Redis so that whichever worker fetches its task starts it.
-- A newcomer while the line is empty may take the turn the worker offers
-- (its own rate, within its horizon); while anyone waits, it joins the
-- line, so waiters start in arrival order.
-- KEYS[1]: the key's line (member: request id, score: its place, ms)
-- KEYS[2]: places of requests taken from the line (field: id, value: place)
-- KEYS[3]: turns given and not yet taken (field: request id, value: ms)
-- ARGV[1]: request id
-- ARGV[2]: now (ms)
-- ARGV[3]: how early a turn may be taken (ms): the timer hands tasks over early
-- ARGV[4]: how late a turn may be taken (ms); later, it is lost
-- ARGV[5]: the turn offered (ms), or -1 for none within the horizon
-- ARGV[6]: how long the keys live untouched (ms)
-- Returns: {"turn", turn ms} (its turn: start now); {"wait", turn ms} (its turn,
-- later); {"start"} (the offer, now); {"offer", ms} (the offer, later); or
-- {"line", places ahead of it}
local now = tonumber(ARGV[2])
local given = redis.call("HGET", KEYS[3], ARGV[1]) or ""
local mine = tonumber(given)
if mine then
  if mine > now + tonumber(ARGV[3]) then return {"wait", given} end
  redis.call("HDEL", KEYS[3], ARGV[1])
  if now - mine <= tonumber(ARGV[4]) then
    redis.call("HDEL", KEYS[2], ARGV[1])
    return {"turn", given}
  end
  -- lost (back too late): waits again below, at its old place
end
local offer = tonumber(ARGV[5])
if offer >= 0 and lineSize(KEYS[1]) == 0 then
  redis.call("HDEL", KEYS[2], ARGV[1])
  if offer <= now then return {"start"} end
  redis.call("HSET", KEYS[3], ARGV[1], ARGV[5])
  redis.call("PEXPIRE", KEYS[3], ARGV[6])
  return {"offer", ARGV[5]}
end
local place = redis.call("HGET", KEYS[2], ARGV[1]) or ARGV[2]
redis.call("HDEL", KEYS[2], ARGV[1])
lineJoin(KEYS[1], ARGV[1], place, ARGV[6])
return {"line", tostring(redis.call("ZRANK", KEYS[1], ARGV[1]))}
