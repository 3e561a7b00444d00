-- Ends the requests of one batch of a tenant's finished entries, all older
-- than the tenant's retention (and the trim's slack): a request still
-- finished when its entry says is deleted, every key and every index
-- entry of it; one already gone (expired by a TTL an earlier version set)
-- loses its index entries; an entry whose request is no longer finished
-- then (redriven since, maybe finished again) is stale, and only it goes.
-- Removals are gathered per index, so a batch costs one HMGET a request
-- and a few commands in all besides.
-- KEYS[1]: the finished index
-- KEYS[2]: the all-requests index of earlier versions (legacy: no longer
--   written or read, kept drained here)
-- KEYS[3..5]: the completed, failed and canceled status indexes
-- KEYS[6]: the tenant's payload-expiry index
-- KEYS[7..]: per entry, in ARGV's order: the request hash, its attempts
--   list, its redrives list, its spec, its result, the failed-by-host index
--   of its host, then its lex-ordered index keys (host, labels, failure
--   class, status code; see indexEntries.keys), as many as ARGV says
-- ARGV[1]: the first entry's finished-index member; ARGV[2] its request
--   id; ARGV[3] its score (finish time, ms); ARGV[4] how many lex-ordered
--   index keys KEYS holds for it. ARGV[5..8] the next entry's, and so on.
-- Returns: {index entries removed, requests deleted}
local byKey, order = {}, {}
local function drop(key, id)
  local l = byKey[key]
  if not l then
    l = {}
    byKey[key] = l
    order[#order + 1] = key
  end
  l[#l + 1] = id
end
local statusIndex = {completed = KEYS[3], failed = KEYS[4], canceled = KEYS[5]}
local finished, del, deleted = {}, {}, 0
local k = 7
for i = 1, #ARGV, 4 do
  local id, at, n = ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local cur = redis.call("HMGET", KEYS[k], "status", "completedAt")
  finished[#finished + 1] = ARGV[i]
  local idx = cur[1] and statusIndex[cur[1]]
  if not cur[1] or (idx and cur[2] == at) then
    drop(KEYS[2], id)
    if cur[1] then
      drop(idx, id)
      if cur[1] == "failed" then drop(KEYS[k + 5], id) end
      drop(KEYS[6], id)
      for j = k, k + 4 do del[#del + 1] = KEYS[j] end
      deleted = deleted + 1
    else
      -- Gone: it expired in one of the terminal statuses.
      drop(KEYS[3], id)
      drop(KEYS[4], id)
      drop(KEYS[5], id)
      drop(KEYS[k + 5], id)
    end
    for j = k + 6, k + 5 + n do drop(KEYS[j], id) end
  end
  k = k + 6 + n
end
-- unpack is bounded by Lua's stack: large lists go in slices.
local function each(list, f)
  local removed = 0
  for a = 1, #list, 1000 do
    removed = removed + f(unpack(list, a, math.min(a + 999, #list)))
  end
  return removed
end
local removed = 0
for _, key in ipairs(order) do
  removed = removed + each(byKey[key], function(...) return redis.call("ZREM", key, ...) end)
end
removed = removed + each(finished, function(...) return redis.call("ZREM", KEYS[1], ...) end)
each(del, function(...) return redis.call("UNLINK", ...) end)
return {removed, deleted}
