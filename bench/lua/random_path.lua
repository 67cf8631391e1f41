-- wrk script: GET $PATH_PREFIX<n> over 100 000 paths (keys for {path} policies).
local prefix = os.getenv("PATH_PREFIX") or "/"
math.randomseed(44)
request = function()
  return wrk.format("GET", prefix .. math.random(1, 100000))
end
