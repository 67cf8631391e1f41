-- wrk script: POST {"items":[...]} with BATCH random items per request (to
-- the URL's path: /uv/{key} or /bloom/{key}).  64 bodies are built up front
-- so that the load generator spends its time sending, not formatting.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local batch = tonumber(os.getenv("BATCH") or "1000")
local bodies = {}
math.randomseed(7)
for b = 1, 64 do
  local items = {}
  for i = 1, batch do
    items[i] = '"u' .. math.random(1, 1000000) .. '"'
  end
  bodies[b] = '{"items":[' .. table.concat(items, ",") .. ']}'
end
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, bodies[n % 64 + 1])
end
