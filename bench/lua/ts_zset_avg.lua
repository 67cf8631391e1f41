-- ts_zset_avg.lua - the reference for GET /ts/{key}/range?agg=avg: the same
-- time series kept the way the seed lecture shows (a sorted set, score = the
-- timestamp in ms, member = "timestamp:value", unique per sample), bucketed
-- and averaged inside Redis so only the result crosses the network.
-- KEYS[1] = zset; ARGV = from, to, bucket_ms.  Returns {{bucket_start, avg}, ...}.
local b = tonumber(ARGV[3])
local r = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[2], 'WITHSCORES')
local out = {}
local cur, sum, n = nil, 0, 0
for i = 1, #r, 2 do
  local ts = tonumber(r[i + 1])
  local v = tonumber(string.match(r[i], ':(.*)$'))
  local s = ts - (ts % b)
  if s ~= cur then
    if cur then out[#out + 1] = { cur, tostring(sum / n) } end
    cur, sum, n = s, 0, 0
  end
  sum = sum + v
  n = n + 1
end
if cur then out[#out + 1] = { cur, tostring(sum / n) } end
return out
