-- wrk script: POST /throttle over 100 000 keys (redis-cell's README limit).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "per_thread_seed.lua")(42)
request = function()
  local k = math.random(1, 100000)
  return wrk.format(nil, nil, nil,
    '{"key":"user:' .. k .. '","max_burst":15,"count_per_period":30,"period":60}')
end
