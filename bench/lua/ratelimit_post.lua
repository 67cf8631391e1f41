-- wrk script: POST /throttle over 100 000 keys; the algorithm and its
-- parameters come from $RL_PARAMS (JSON members), GCRA by default; keys are
-- $RL_PREFIX<n>.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local params = os.getenv("RL_PARAMS") or '"max_burst":15,"count_per_period":30,"period":60'
local prefix = os.getenv("RL_PREFIX") or "user:"   -- one key space per algorithm (a key keeps its algorithm)
math.randomseed(42)
request = function()
  local k = math.random(1, 100000)
  return wrk.format(nil, nil, nil, '{"key":"' .. prefix .. k .. '",' .. params .. '}')
end
