-- tally-slot.lua: the cluster slot of a key, for HAProxy (tallyd --haproxy-lua).
-- The configuration `tallyd --haproxy-config` prints loads it (lua-load) and
-- calls the converter lua.tally_slot: Redis Cluster's hash tag rule (the text
-- between the first '{' and the first '}' after it, when not empty, else the
-- whole key), CRC-16/XMODEM of it, mod 16384 -- what tallyd computes.
local T = {}
for i = 0, 255 do
  local c = i << 8
  for _ = 1, 8 do
    if c & 0x8000 ~= 0 then c = ((c << 1) ~ 0x1021) & 0xffff else c = (c << 1) & 0xffff end
  end
  T[i] = c
end
local byte, find = string.byte, string.find
core.register_converters("tally_slot", function(key)
  local lo, hi = 1, #key
  local open = find(key, "{", 1, true)
  if open then
    local close = find(key, "}", open + 1, true)
    if close and close > open + 1 then lo, hi = open + 1, close - 1 end
  end
  local crc = 0
  for i = lo, hi do
    crc = ((crc << 8) & 0xffff) ~ T[((crc >> 8) ~ byte(key, i)) & 0xff]
  end
  return crc & 0x3fff
end)
