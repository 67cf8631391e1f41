-- wrk script: reserve then settle (docs/rate-limiting.md) over 100 000 keys
-- with redis-cell's README limit: each connection alternates POST /throttle
-- with "reserve": true and POST /throttle/{key}/settle of the id it answered.
-- Run it with one connection per thread (-c equal to -t): a connection's
-- requests and answers then alternate, so the answer read is the last
-- reservation's.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "per_thread_seed.lua")(42)
local params = '"max_burst":15,"count_per_period":30,"period":60'
local key, id
request = function()
  if id then
    local body = '{"reservation":"' .. id .. '","actual":1}'
    id = nil
    return wrk.format(nil, "/throttle/" .. key .. "/settle", nil, body)
  end
  key = "rsv:" .. math.random(1, 100000)
  return wrk.format(nil, "/throttle", nil, '{"key":"' .. key .. '",' .. params .. ',"quantity":1,"reserve":true}')
end
response = function(status, headers, body)
  id = body:match('"reservation":"(%d+)"')
end
