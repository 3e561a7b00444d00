-- Puts a retry of a cut key straight in the key's line, at its due time:
-- it is given a turn at or after it (cut_next), and costs no return
-- through asynq just to join the line.
-- KEYS[1]: the key's line (member: request id, score: its place, ms)
-- ARGV[1]: request id
-- ARGV[2]: its due time (ms)
-- ARGV[3]: how long the line lives untouched (ms)
-- Returns: how many wait ahead of it
lineMove(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
return redis.call("ZRANK", KEYS[1], ARGV[1])
