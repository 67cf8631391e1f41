-- wrk script: POST /bits/{key}/setbit over 100 000 keys at a fixed offset, the
-- same work as `redis-benchmark -r 100000 SETBIT bits:__rand_int__ 12345 1`
-- (redis-benchmark pads __rand_int__ with zeros, which SETBIT refuses as an
-- offset, so the randomness goes in the key on both sides).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"offset":12345,"value":1}'
math.randomseed(44)
request = function()
  return wrk.format(nil, "/bits/bits:" .. math.random(0, 99999) .. "/setbit")
end
