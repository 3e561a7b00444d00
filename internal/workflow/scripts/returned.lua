-- Marks a running run's result returned to the run that invoked it (once:
-- a later end returns nothing). A run that has ended is left alone.
-- KEYS[1]: the run's hash
-- Returns: 1 when marked, 0 when the run is not running
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
redis.call("HSET", KEYS[1], "returned", "1")
return 1
