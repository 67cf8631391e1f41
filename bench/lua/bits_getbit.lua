-- wrk script: GET /bits/{key}/getbit over 100 000 keys (after bits_setbit.lua),
-- as `redis-benchmark -r 100000 GETBIT bits:__rand_int__ 12345`.
math.randomseed(45)
request = function()
  return wrk.format("GET", "/bits/bits:" .. math.random(0, 99999) .. "/getbit?offset=12345")
end
