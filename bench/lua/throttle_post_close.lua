-- wrk script: POST /throttle as throttle_post.lua, a new connection for each
-- request (Connection: close), to measure connection (and TLS handshake) cost.
dofile("bench/lua/throttle_post.lua")
wrk.headers["Connection"] = "close"
