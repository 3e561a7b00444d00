-- Takes a request out of its endpoint's line (it ends without waiting
-- further).
-- KEYS[1]: the endpoint's line (member: request id, score: its place, ms)
-- ARGV[1]: request id
-- Returns 1.
lineLeave(KEYS[1], ARGV[1])
return 1
