-- wrk script: batched requests to /cms, /topk and /tdigest (bench/suite_35).
-- FREQ_KIND: cms_add | cms_count (POST) | cms_count_get | topk_add | topk_query | tdigest_add |
--            tdigest_quantile
-- FREQ_BATCH: items (or values, or quantiles) per request; FREQ_KEY: the key.
-- Items are "user:<n>" over 100 000 names, Zipf-like (n = floor(100000^u)),
-- values log-normal-like; 64 different bodies are prepared up front and cycled
-- so that Lua costs nothing per request.
local kind = os.getenv("FREQ_KIND") or "cms_add"
local batch = tonumber(os.getenv("FREQ_BATCH") or "1000")
local key = os.getenv("FREQ_KEY") or "bench"
math.randomseed(35)

local function item() return '"user:' .. math.floor(100000 ^ math.random()) .. '"' end

local reqs = {}
for b = 1, 64 do
  local parts = {}
  if kind == "cms_add" or kind == "cms_count" or kind == "topk_add" or kind == "topk_query" then
    for i = 1, batch do parts[i] = item() end
    local body = '{"items":[' .. table.concat(parts, ",") .. ']}'
    local path = ({cms_add = "/cms/" .. key, cms_count = "/cms/" .. key .. "/count",
                   topk_add = "/topk/" .. key, topk_query = "/topk/" .. key .. "/query"})[kind]
    reqs[b] = wrk.format("POST", path, {["Content-Type"] = "application/json"}, body)
  elseif kind == "cms_count_get" then
    for i = 1, batch do parts[i] = "item=user:" .. math.floor(100000 ^ math.random()) end
    reqs[b] = wrk.format("GET", "/cms/" .. key .. "/count?" .. table.concat(parts, "&"))
  elseif kind == "tdigest_add" then
    for i = 1, batch do parts[i] = string.format("%.6g", math.exp(4 * (math.random() + math.random() - 1))) end
    reqs[b] = wrk.format("POST", "/tdigest/" .. key, {["Content-Type"] = "application/json"},
                         '{"values":[' .. table.concat(parts, ",") .. ']}')
  elseif kind == "tdigest_quantile" then
    for i = 1, batch do parts[i] = "q=" .. string.format("%.4f", math.random()) end
    reqs[b] = wrk.format("GET", "/tdigest/" .. key .. "/quantile?" .. table.concat(parts, "&"))
  end
end

local n = 0
request = function()
  n = n + 1
  return reqs[(n % 64) + 1]
end
