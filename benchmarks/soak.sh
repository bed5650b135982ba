#!/usr/bin/env bash
# benchmarks/soak.sh: does a long-running levee hold its memory? (issue 26)
#
# SCENARIO=mixed (default): one levee (64 MiB cache, --micro-cache 3s) in front of
# `levee origin` (5 ms pages of 15 KiB that start a PHP session), under an open-model
# mixed load for MINUTES (default 30), every client bounded in rate and time:
#   - hits over 10,000 URLs (public, max-age=60: refreshed every minute), 600 req/s,
#     half of the clients asking for gzip, half for nothing (identity made from storage);
#   - 200 short-lived pages (max-age=2) and 200 micro-cached ones (no Cache-Control),
#     150 req/s each: refreshed all the time;
#   - cold misses over 200,000 URLs (the cache fills and evicts), 60 req/s;
#   - passes with a session cookie, 80 req/s; POSTs (which invalidate), 20 req/s;
#   - clients that give up after 2 ms (disconnect mid-response), 20 req/s;
#   - every 30 s: a purge by URL, by prefix and by tag, and a SIGHUP reload.
# SCENARIO=refresh: the issue's reproduction: 50 pages of 15 KiB, public, max-age=60,
# a new Set-Cookie on every response, 300 req/s in random order, clients with and
# without Accept-Encoding; RSS after the first refresh against RSS at the end.
#
# Every 10 s: levee's RSS, open file descriptors, threads and its own counters
# (cache, other codings, sendfile copies, hit-for-pass, fills, learned cookies).
# Prints errors, RSS of the quarters, fd growth, and draws docs/soak.svg
# (RECORD=0: not there, not in BENCHMARKS.md).
# Usage: benchmarks/soak.sh            (MINUTES=30 by default; MINUTES=2 for a try)
# Env:   SCENARIO=mixed|refresh MINUTES LEVEE BUILD KEEP_WORK RECORD
# Needs: curl, python3. Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

SCENARIO=${SCENARIO:-mixed}
MINUTES=${MINUTES:-$([ "$SCENARIO" = refresh ] && echo 10 || echo 30)}
SECS=$((MINUTES * 60))

need_tools curl python3
levee_binary
open_report "soak-$SCENARIO"

ORIGIN_PORT=$(free_port)
LEVEE_PORT=$(free_port)
ADMIN_PORT=$(free_port)
start_origin origin "$ORIGIN_PORT" --delay 5ms --body-size 15000 $(origin_workers 0) \
    --cache-control "public, max-age=60"

cat >"$WORK/levee.toml" <<EOF
listen = ["127.0.0.1:$LEVEE_PORT"]
backend = "http://127.0.0.1:$ORIGIN_PORT"
[cache]
size = "64MiB"
$([ "$SCENARIO" = mixed ] && echo 'micro_cache = "3s"')
[admin]
listen = "127.0.0.1:$ADMIN_PORT"
EOF
start_bg levee "$LEVEE" serve --config "$WORK/levee.toml"
LEVEE_PID=$BG_PID
wait_port "$LEVEE_PORT" "$LEVEE_PID"
wait_port "$ADMIN_PORT" "$LEVEE_PID"
BASE="http://127.0.0.1:$LEVEE_PORT"

# ---- the load ---------------------------------------------------------------------------

urls() { # FILE COUNT FORMAT : one line per i < COUNT, FORMAT's {i} and {m} (= i % 100) filled
    python3 - "$@" <<'EOF'
import sys
f, n, fmt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(f, "w") as out:
    for i in range(n):
        out.write(fmt.format(i=i, m=i % 100) + "\n")
EOF
}

CLIENTS=()
# client NAME RATE ARGS... : one `levee bench` in the open model for the whole run.
client() {
    local name=$1 rate=$2
    shift 2
    start_bg "bench-$name" "$LEVEE" bench --rate "$rate" -c "$((rate / 5 + 16))" -d "${SECS}s" \
        --timeout 10s -q --json "$WORK/bench-$name.json" "$@"
    CLIENTS+=("$name")
}

if [ "$SCENARIO" = refresh ]; then
    urls "$WORK/pages.txt" 50 "$BASE/page/{i}"
    client identity 150 -f "$WORK/pages.txt" --random
    client gzip 150 -f "$WORK/pages.txt" --random -H 'Accept-Encoding: gzip, br'
else
    # Tagged by page number modulo 100, for purges by tag.
    urls "$WORK/hits.txt" 10000 "$BASE/h/{i}?tag=t{m}"
    urls "$WORK/short.txt" 200 "$BASE/s/{i}?cache-control=public,max-age=2"
    urls "$WORK/micro.txt" 200 "$BASE/m/{i}?cache-control=none"
    urls "$WORK/cold.txt" 200000 "$BASE/c/{i}"
    urls "$WORK/session.txt" 500 "$BASE/h/{i}"
    urls "$WORK/posts.txt" 200 "$BASE/h/{i}?tag=t{m} POST comment=soak{i}"
    urls "$WORK/gone.txt" 20000 "$BASE/g/{i}?cache-control=none"
    client hits-identity 300 -f "$WORK/hits.txt" --random
    client hits-gzip 300 -f "$WORK/hits.txt" --random -H 'Accept-Encoding: gzip, br'
    client short 150 -f "$WORK/short.txt" --random -H 'Accept-Encoding: gzip'
    client micro 150 -f "$WORK/micro.txt" --random
    client cold 60 -f "$WORK/cold.txt" --random
    client session 80 -f "$WORK/session.txt" --random --cookie PHPSESSID=soak-editor
    client posts 20 -f "$WORK/posts.txt" --random
    # Gives up long before the 5 ms page: disconnects mid-request (its timeouts are
    # the point, not errors of levee's).
    start_bg bench-disconnect "$LEVEE" bench --rate 20 -c 20 -d "${SECS}s" --timeout 2ms -q \
        --json "$WORK/bench-disconnect.json" -f "$WORK/gone.txt" --random
fi
log "soak: $SCENARIO for $MINUTES min, clients: ${CLIENTS[*]}"
# Written now: the commit and load average of the start.
report "# Soak: $SCENARIO, $MINUTES minutes ($(date '+%Y-%m-%d %H:%M'))" "" \
    "- command: \`SCENARIO=$SCENARIO MINUTES=$MINUTES benchmarks/soak.sh\`"
machine_info

# ---- sampling, purges and reloads -------------------------------------------------------

SAMPLES="$WORK/samples.csv"
echo "t,rss_kb,fds,threads,cache_objects,cache_bytes,transcoded_bytes,sendfile_bytes,hit_for_pass_urls,fills_registered,learned_session_cookies,requests" >"$SAMPLES"
sample() {
    local t=$1 m
    m=$(curl -s --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics")
    metric() { awk -v n="$1" '$1 == n {v = $2} END {print v + 0}' <<<"$m"; }
    requests=$(awk '$1 ~ /^levee_requests_total/ {s += $2} END {print s + 0}' <<<"$m")
    echo "$t,$(awk '/^VmRSS:/ {print $2}' "/proc/$LEVEE_PID/status"),$(ls "/proc/$LEVEE_PID/fd" | wc -l),$(awk '/^Threads:/ {print $2}' "/proc/$LEVEE_PID/status"),$(metric levee_cache_objects),$(metric levee_cache_bytes),$(metric levee_transcoded_bytes),$(metric levee_sendfile_bytes),$(metric levee_hit_for_pass_urls),$(metric levee_fills_registered),$(metric levee_learned_session_cookies),$requests" >>"$SAMPLES"
}
start=$(date +%s)
next_purge=30
while :; do
    t=$(($(date +%s) - start))
    [ "$t" -ge "$SECS" ] && break
    kill -0 "$LEVEE_PID" 2>/dev/null || die "levee exited during the soak; see $WORK/levee.log"
    sample "$t"
    if [ "$SCENARIO" = mixed ] && [ "$t" -ge "$next_purge" ]; then
        n=$((t / 30))
        curl -s -X POST "http://127.0.0.1:$ADMIN_PORT/purge?url=$BASE/h/$((n % 10000))%3Ftag%3Dt$((n % 100))" >/dev/null
        curl -s -X POST "http://127.0.0.1:$ADMIN_PORT/purge?prefix=$BASE/h/$((n % 10))" >/dev/null
        curl -s -X POST "http://127.0.0.1:$ADMIN_PORT/purge?tag=t$((n % 100))$([ $((n % 2)) = 0 ] && echo '&soft=1')" >/dev/null
        kill -HUP "$LEVEE_PID"
        next_purge=$((next_purge + 30))
    fi
    sleep 10
done
# The clients end on their own at SECS; give them their last seconds.
for _ in $(seq 30); do
    left=0
    for c in "${CLIENTS[@]}"; do [ -s "$WORK/bench-$c.json" ] || left=1; done
    [ "$left" = 0 ] && break
    sleep 1
done
sample "$(($(date +%s) - start))"

# ---- report -----------------------------------------------------------------------------

CHART="$REPO_DIR/docs/soak.svg"
[ "${RECORD:-1}" = 1 ] || CHART="$WORK/soak.svg"
[ "$SCENARIO" = mixed ] || CHART="${CHART%.svg}-refresh.svg"
python3 - "$SAMPLES" "$WORK" "$SCENARIO" "$CHART" "${CHART#"$REPO_DIR"/}" "${CLIENTS[@]}" <<'EOF' | tee -a "$OUT_FILE"
import csv, json, os, statistics, sys
samples, work, scenario, chart, chart_shown = sys.argv[1:6]
clients = sys.argv[6:]
rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(open(samples))]
n = len(rows)
q = max(1, n // 4)
quarters = [rows[i * q:(i + 1) * q] for i in range(3)] + [rows[3 * q:]]
med = lambda rs, k: statistics.median(r[k] for r in rs) if rs else 0
print("- load (open model, `levee bench --rate`):", ", ".join(clients),
      "+ disconnecting clients" if scenario == "mixed" else "")
print()
print("| client | requests | errors | timeouts | p99 ms |")
print("|---|---:|---:|---:|---:|")
errors = 0
for c in clients + (["disconnect"] if scenario == "mixed" else []):
    try:
        j = json.load(open(os.path.join(work, f"bench-{c}.json")))
    except Exception as e:
        print(f"| {c} | no report ({e}) | | | |")
        errors += 1
        continue
    step = j["steps"][0]
    total = step["requests"]
    errs = step["errors"]
    e = sum(errs.values())
    to = errs.get("timeout", 0)
    p99 = step["latency"]["p99_ms"]
    bad = errs.get("status_5xx", 0)
    if c != "disconnect":
        errors += e
    print(f"| {c} | {total} | {e} (5xx: {bad}) | {to} | {p99} |")
print()
mib = lambda kb: f"{kb / 1024:.1f}"
print(f"- samples: {n}, every 10 s")
print(f"- RSS MiB, median per quarter: {' / '.join(mib(med(qr, 'rss_kb')) for qr in quarters)}")
second, last = med(quarters[1], "rss_kb"), med(quarters[3], "rss_kb")
growth = (last - second) / second * 100 if second else 0
print(f"- RSS, last quarter against the second: {growth:+.1f}% (target within 5%)")
if scenario == "refresh":
    after = next((r for r in rows if r["t"] >= 70), rows[0])
    end = rows[-1]
    print(f"- RSS after the first refresh (t={after['t']:.0f}s): {mib(after['rss_kb'])} MiB, at the end: {mib(end['rss_kb'])} MiB, "
          f"difference {(end['rss_kb'] - after['rss_kb']) / 1024:+.2f} MiB (target within 1 MiB)")
print(f"- open files: first {rows[0]['fds']:.0f}, max {max(r['fds'] for r in rows):.0f}, last {rows[-1]['fds']:.0f}; "
      f"threads: first {rows[0]['threads']:.0f}, last {rows[-1]['threads']:.0f}")
for k in ["cache_objects", "cache_bytes", "transcoded_bytes", "sendfile_bytes", "hit_for_pass_urls",
          "fills_registered", "learned_session_cookies"]:
    print(f"- {k}: median per quarter {' / '.join(f'{med(qr, k):.0f}' for qr in quarters)}, max {max(r[k] for r in rows):.0f}")
print(f"- errors (all clients but the disconnecting one): {errors}")

# The chart: RSS and the cache's bytes over time.
W, H, M = 760, 300, 60
tmax = max(r["t"] for r in rows) or 1
ymax = max(max(r["rss_kb"] for r in rows) / 1024, max(r["cache_bytes"] for r in rows) / 2**20) * 1.15 or 1
x = lambda t: M + (W - 2 * M) * t / tmax
y = lambda v: H - M + -(H - 2 * M) * v / ymax
def line(key, scale, color):
    pts = " ".join(f"{x(r['t']):.1f},{y(r[key] / scale):.1f}" for r in rows)
    return f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{pts}"/>'
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="13">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{M}" y="24" font-size="15">levee soak ({scenario}): memory over {tmax / 60:.0f} minutes</text>',
       f'<line x1="{M}" y1="{H - M}" x2="{W - M}" y2="{H - M}" stroke="#333"/>',
       f'<line x1="{M}" y1="{M}" x2="{M}" y2="{H - M}" stroke="#333"/>']
for i in range(5):
    v = ymax * i / 4
    svg.append(f'<text x="{M - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    svg.append(f'<line x1="{M}" y1="{y(v):.1f}" x2="{W - M}" y2="{y(v):.1f}" stroke="#eee"/>')
for i in range(5):
    t = tmax * i / 4
    svg.append(f'<text x="{x(t):.1f}" y="{H - M + 18}" text-anchor="middle">{t / 60:.0f} min</text>')
svg.append(f'<text x="14" y="{H / 2}" transform="rotate(-90 14 {H / 2})" text-anchor="middle">MiB</text>')
svg.append(line("rss_kb", 1024, "#c0392b"))
svg.append(line("cache_bytes", 2**20, "#2980b9"))
svg.append(f'<text x="{W - M - 200}" y="{M - 8}" fill="#c0392b">levee RSS</text>')
svg.append(f'<text x="{W - M - 100}" y="{M - 8}" fill="#2980b9">cache bytes</text>')
svg.append("</svg>")
open(chart, "w").write("\n".join(svg))
print(f"\nChart: {chart_shown}")
EOF
cp "$SAMPLES" "$BENCH_DIR/out/soak-$SCENARIO-samples-$(date +%Y-%m-%d-%H%M).csv"
record_report
