-- wrk script: POST /ts/{key} with 1000 samples a request, the way a collector
-- ships a batch.  64 series round-robin, each with its own clock moving 1 s
-- per batch (1000 samples 1 ms apart), so requests for one series arrive in
-- order; values change slowly (a 0.1 step every 100 samples).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local nkeys = 64
local parts = {}
for i = 0, 999 do
  parts[#parts + 1] = string.format("[B%03d,%.1f]", i, 20 + math.floor(i / 100) / 10)
end
local template = '{"samples":[' .. table.concat(parts, ",") .. ']}'
local clock = {}
local n = 0
request = function()
  n = n + 1
  local k = n % nkeys
  clock[k] = (clock[k] or 1700000000) + 1
  local body = template:gsub("B", tostring(clock[k]))
  return wrk.format(nil, "/ts/ingest" .. k, nil, body)
end
