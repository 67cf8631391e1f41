-- per_thread_seed.lua: gives each wrk thread its own sequence of random
-- keys, seeded base, base + 1, ... (with one seed, two threads would send
-- the same keys at the same moments).  A script calls the returned function
-- with its base seed; it defines wrk's setup() and init().
return function(base)
  local threads = 0
  function setup(thread)
    thread:set("seed", base + threads)
    threads = threads + 1
  end
  function init(args)
    math.randomseed(seed or base)
  end
end
