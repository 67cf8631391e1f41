-- wrk script: GET /throttle/{key} (the gateway form) over 100 000 keys.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "per_thread_seed.lua")(43)
request = function()
  local k = math.random(1, 100000)
  return wrk.format("GET", "/throttle/user:" .. k .. "?max_burst=15&count_per_period=30&period=60")
end
