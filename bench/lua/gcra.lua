-- gcra.lua - redis-cell's CL.THROTTLE as a Redis Lua script: the reference
-- tally's /throttle is compared with (EVALSHA, same semantics, same answer).
-- KEYS[1] = key; ARGV = max_burst, count_per_period, period (s), quantity
local burst = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local q = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]                 -- microseconds
local T = period * 1000000 / count
local limit = burst + 1
local tau = T * limit
local tat = now
local v = redis.call('GET', KEYS[1])
if v then tat = tonumber(v) end
local base = tat
if now > base then base = now end
local new_tat = base + T * q
local allow_at = new_tat - tau
local limited, retry, ttl = 0, -1, 0
if now < allow_at then
  limited = 1
  if T * q <= tau then retry = allow_at - now end
  ttl = tat - now
else
  ttl = new_tat - now
  if q > 0 then redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil(ttl / 1000)) end
end
local nxt = tau - ttl
local remaining = 0
if nxt > -T then remaining = math.floor(nxt / T) end
if retry >= 0 then retry = math.ceil(retry / 1000000) end
return {limited, limit, remaining, retry, math.ceil(ttl / 1000000)}
