-- wrk script: concurrency lease acquire + release pairs on one key.  Every
-- answer to an acquire queues its lease (X-Tally-Lease); the next request
-- releases the oldest queued lease, or acquires when none is queued, so the
-- run is one release per granted acquire.  The limit is far above the
-- connections in flight: every acquire is granted.  $LEASE_KEY names the key.
local key = os.getenv("LEASE_KEY") or "bench-lease"
local acquire_body = '{"limit":100000,"ttl_ms":5000}'
local queue, head, tail = {}, 1, 0

request = function()
  if head <= tail then
    local id = queue[head]
    queue[head] = nil
    head = head + 1
    return wrk.format("DELETE", "/lease/" .. key .. "/" .. id, {}, nil)
  end
  return wrk.format("POST", "/lease/" .. key, { ["Content-Type"] = "application/json" }, acquire_body)
end

response = function(status, headers, body)
  local id = headers["X-Tally-Lease"]
  if id then
    tail = tail + 1
    queue[tail] = id
  end
end
