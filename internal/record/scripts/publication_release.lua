-- Gives back an idempotency key's claim by a publication, if it still
-- holds it.
-- KEYS[1]: the claim (its value is "id bodyhash", or "id")
-- ARGV[1]: the publication's id
-- Returns 1 when it deleted the claim, 0 when another holds it.
local v = redis.call("GET", KEYS[1])
if v and (v == ARGV[1] or string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. " ") then return redis.call("DEL", KEYS[1]) end
return 0
