-- wrk script: POST /throttle as throttle_post.lua, a new connection for each
-- request (Connection: close), to measure connection (and TLS handshake) cost.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Connection"] = "close"
math.randomseed(42)
request = function()
  local k = math.random(1, 100000)
  return wrk.format(nil, nil, nil,
    '{"key":"user:' .. k .. '","max_burst":15,"count_per_period":30,"period":60}')
end
