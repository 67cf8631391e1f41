-- wrk script: throttle_post.lua with a bearer token (TALLY_BENCH_TOKEN).
dofile("bench/lua/throttle_post.lua")
wrk.headers["Authorization"] = "Bearer " .. os.getenv("TALLY_BENCH_TOKEN")
