-- Counts one failed authentication of a client in a fixed window.
-- KEYS[1]: the client's failure counter ({retryd}:authfail:<ip>)
-- ARGV[1]: the window in milliseconds
-- Returns: {failures in this window, milliseconds left of the window}
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return {n, redis.call('PTTL', KEYS[1])}
