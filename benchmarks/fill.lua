-- benchmarks/fill.lua: wrk script used by hits.sh to store many distinct objects.
-- Env: FILL_N (objects), FILL_PREFIX (path prefix), FILL_MARKER (file written when
-- the N-th response arrives, so the caller can stop wrk, which otherwise runs for -d).
-- Walks /obj/1 .. /obj/N once (then repeats /obj/1 until the last answers arrive) and
-- counts responses, cache hits (X-Cache or X-Cache-Status starting with HIT) and non-200s.
N = tonumber(os.getenv("FILL_N") or "100000")
prefix = os.getenv("FILL_PREFIX") or "/obj/"
marker = os.getenv("FILL_MARKER")
i = 0
responses = 0
hits = 0
bad = 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function request()
  i = i + 1
  if i > N then return wrk.format("GET", prefix .. "1") end
  return wrk.format("GET", prefix .. i)
end
function response(status, headers, body)
  responses = responses + 1
  if status ~= 200 then bad = bad + 1 end
  local v = headers["x-cache"] or headers["X-Cache"] or headers["X-Cache-Status"] or headers["x-cache-status"]
  if v and string.sub(v, 1, 3) == "HIT" then hits = hits + 1 end
  if responses == N then
    if marker then local f = io.open(marker, "w"); if f then f:write("done\n"); f:close() end end
    wrk.thread:stop()
  end
end
function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    io.write(string.format("FILL responses=%d hits=%d bad=%d secs=%.2f\n",
      t:get("responses"), t:get("hits"), t:get("bad"), summary.duration / 1e6))
  end
end
