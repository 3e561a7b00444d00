-- Adds or removes endpoints of a topic hash in one step, so concurrent
-- calls lose no endpoint. Fields: "createdAt", "updatedAt", "seq", and
-- "e:<url>" -> "<seq> <name>".
-- KEYS[1]: the topic hash
-- KEYS[2]: the tenant's topic index
-- ARGV[1]: "add" or "remove"
-- ARGV[2]: now (ms)
-- ARGV[3]: MaxTopicEndpoints
-- ARGV[4]: MaxTopics
-- ARGV[5]: the topic's name (its index member)
-- ARGV[6..]: url, name pairs (a remove matches a url, or a name when its
-- url is "")
-- Returns the endpoints left, "full", or "missing" (a remove from a topic
-- the tenant does not have: nothing to say it was emptied).
local add = ARGV[1] == "add"
local exists = redis.call("EXISTS", KEYS[1]) == 1
if add and not exists and redis.call("ZCARD", KEYS[2]) >= tonumber(ARGV[4]) then return "full" end
if not add and not exists then return "missing" end
local fields = redis.call("HGETALL", KEYS[1])
local have = {}
local n = 0
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 2) == "e:" then
    have[string.sub(fields[i], 3)] = fields[i + 1]
    n = n + 1
  end
end
if add then
  -- Refuse before any write: a script's writes are not undone.
  local grown, seen = n, {}
  for i = 6, #ARGV, 2 do
    if not have[ARGV[i]] and not seen[ARGV[i]] then
      seen[ARGV[i]] = true
      grown = grown + 1
    end
  end
  if grown > tonumber(ARGV[3]) then return "full" end
end
for i = 6, #ARGV, 2 do
  local url, name = ARGV[i], ARGV[i + 1]
  if add then
    if not have[url] then n = n + 1 end
    local seq = redis.call("HINCRBY", KEYS[1], "seq", 1)
    if have[url] then seq = string.match(have[url], "^(%d+)") end
    have[url] = seq .. " " .. name
    redis.call("HSET", KEYS[1], "e:" .. url, have[url])
  else
    for u, v in pairs(have) do
      if u == url or (url == "" and string.match(v, "^%d+ (.*)$") == name) then
        redis.call("HDEL", KEYS[1], "e:" .. u)
        have[u] = nil
        n = n - 1
      end
    end
  end
end
if n == 0 then
  redis.call("DEL", KEYS[1])
  redis.call("ZREM", KEYS[2], ARGV[5])
  return 0
end
redis.call("HSETNX", KEYS[1], "createdAt", ARGV[2])
redis.call("HSET", KEYS[1], "updatedAt", ARGV[2])
redis.call("ZADD", KEYS[2], 0, ARGV[5])
return n
