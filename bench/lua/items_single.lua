-- wrk script: POST {"items":["u<random>"]}, one item per request.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
math.randomseed(11)
request = function()
  return wrk.format(nil, nil, nil, '{"items":["u' .. math.random(1, 1000000) .. '"]}')
end
