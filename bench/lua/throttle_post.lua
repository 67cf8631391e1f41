-- wrk script: POST /throttle over 100 000 keys (redis-cell's README limit).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
-- each wrk thread its own sequence of keys (seed 42, 43, ...): with
-- one seed, two threads would send the same keys at the same moments
local threads = 0
function setup(thread)
  thread:set("seed", 42 + threads)
  threads = threads + 1
end
function init(args)
  math.randomseed(seed or 42)
end
request = function()
  local k = math.random(1, 100000)
  return wrk.format(nil, nil, nil,
    '{"key":"user:' .. k .. '","max_burst":15,"count_per_period":30,"period":60}')
end
