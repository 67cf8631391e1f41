-- wrk script: GET /throttle/{key} (the gateway form) over 100 000 keys.
-- each wrk thread its own sequence of keys (seed 43, 44, ...): with
-- one seed, two threads would send the same keys at the same moments
local threads = 0
function setup(thread)
  thread:set("seed", 43 + threads)
  threads = threads + 1
end
function init(args)
  math.randomseed(seed or 43)
end
request = function()
  local k = math.random(1, 100000)
  return wrk.format("GET", "/throttle/user:" .. k .. "?max_burst=15&count_per_period=30&period=60")
end
