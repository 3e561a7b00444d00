-- Rings the doorbell: pushes a token unless one is waiting already, so the
-- list holds at most one and a burst of rings wakes one worker.
-- KEYS[1]: the doorbell list
-- Returns: 0
if redis.call("LLEN", KEYS[1]) == 0 then redis.call("RPUSH", KEYS[1], "1") end
return 0
