-- Erases a finished request's payload at once, keeping its metadata: the
-- body and headers of its spec, its result, and the response body of each
-- attempt. The DLQ shows the same records, so its entry is erased too.
-- Expunging twice changes nothing more. The request leaves its tenant's
-- payload-expiry index whatever the answer: erased, it has nothing left to
-- expire; gone, nothing to erase; unfinished (redriven since), it is
-- indexed again when it finishes.
-- KEYS[1]: request hash
-- KEYS[2]: attempts list
-- KEYS[3]: spec
-- KEYS[4]: result
-- KEYS[5]: the payload-expiry index of the request's tenant
-- ARGV[1]: now (ms)
-- ARGV[2]: actor
-- ARGV[3]: request id
-- Returns: {"ok"}; {"already"} when it was expunged before; {"missing"};
-- {"unfinished", status} for a pending or retrying request (nothing
-- written)
redis.call("ZREM", KEYS[5], ARGV[3])
local cur = redis.call("HMGET", KEYS[1], "status", "expunged")
local st = cur[1]
if not st then return {"missing"} end
if st ~= "completed" and st ~= "failed" and st ~= "canceled" then return {"unfinished", st} end
if cur[2] == "1" then return {"already"} end
local spec = redis.call("GET", KEYS[3])
if spec then
  local sp = cjson.decode(spec)
  sp["h"] = nil
  sp["b"] = nil
  -- A QStash message's callbacks' headers are its headers too.
  if type(sp["q"]) == "table" then
    sp["q"]["ch"] = nil
    sp["q"]["fh"] = nil
  end
  redis.call("SET", KEYS[3], cjson.encode(sp), "KEEPTTL")
end
redis.call("DEL", KEYS[4])
local n = redis.call("LLEN", KEYS[2])
for i = 0, n - 1 do
  local a = cjson.decode(redis.call("LINDEX", KEYS[2], i))
  if a["responseBody"] ~= nil or a["responseHeaders"] ~= nil then
    a["responseBody"] = nil
    a["responseHeaders"] = nil
    redis.call("LSET", KEYS[2], i, cjson.encode(a))
  end
end
redis.call("HDEL", KEYS[1], "hasResult", "resultTruncated", "result")
redis.call("HSET", KEYS[1], "expunged", "1", "expungedAt", ARGV[1], "expungedBy", ARGV[2])
return {"ok"}
