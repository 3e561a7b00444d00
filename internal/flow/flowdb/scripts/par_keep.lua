-- Keeps the places of requests in a key's parallelism line: those of a
-- closed endpoint's line, before they are woken together (ep_take.lua).
-- Their slots then go to them in place order, however the woken race: a
-- free slot goes to a newcomer only while the line is empty (acquire.lua).
-- KEYS[1]: the key's waiting line
-- ARGV[1]: how long the line lives untouched (ms)
-- ARGV[2], ARGV[3], ...: request id, its place (ms), ...
-- Returns the line's size.
for i = 2, #ARGV - 1, 2 do
  lineJoin(KEYS[1], ARGV[i], ARGV[i + 1], ARGV[1])
end
return lineSize(KEYS[1])
