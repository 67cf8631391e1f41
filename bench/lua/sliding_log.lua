-- sliding_log.lua - the seeds' sliding-window limiter (Redis 深度历险: a zset of
-- action timestamps per key) as one Lua script, the reference tally's
-- sliding_log is compared with: ZADD now, ZREMRANGEBYSCORE 0 now-period,
-- ZCARD, EXPIRE period; allowed when the count is within max_count.
-- KEYS[1] = key; ARGV = period (ms), max_count
local period = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)     -- ms
redis.call('ZADD', KEYS[1], now, t[1] .. t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - period)
local n = redis.call('ZCARD', KEYS[1])
redis.call('EXPIRE', KEYS[1], math.ceil(period / 1000) + 1)
if n <= max then return {0, max, max - n} end
return {1, max, 0}
