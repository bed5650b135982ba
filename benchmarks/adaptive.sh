#!/usr/bin/env bash
# benchmarks/adaptive.sh: the adaptive backend limit against an HTTP backend that slows.
#
# The backend is `levee origin --workers 4 --delay 20ms` (4 pages at once, more queue inside
# it, as in php-fpm's backlog): capacity about 200 req/s. `levee bench --rate RATE` offers
# a steady load below that; PHASE seconds in, the backend slows to SLOW_MS per page
# (capacity 4000 / SLOW_MS req/s, far below the load), and PHASE seconds later it is quick
# again. Through
#   - levee with `backend_max_concurrency = "auto"` (the default; an HTTP backend's size is
#     unknown, so the limit follows its latency);
#   - the same levee with `backend_max_concurrency = 1000` (no real limit: every request
#     goes to the backend at once and waits in its queue, as with most proxies).
# Both with backend_queue_timeout = QUEUE_TIMEOUT. Every 0.25 s the script samples levee's
# limit and the requests inside the backend; the time series goes to a chart
# (docs/adaptive.svg, RECORD=0: not there).
#
# Usage: benchmarks/adaptive.sh   (about 2 minutes)
#        The table goes to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   RATE=150 PHASE=10 SLOW_MS=80 QUEUE_TIMEOUT=2s, LEVEE, BUILD, KEEP_WORK (see lib.sh)
# Needs: curl, python3. Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

RATE=${RATE:-150}
PHASE=${PHASE:-10}
SLOW_MS=${SLOW_MS:-80}
QUEUE_TIMEOUT=${QUEUE_TIMEOUT:-2s}

need_tools curl python3
levee_binary
open_report adaptive

SERVERS=(auto unlimited)
cat >"$WORK/auto.toml" <<EOF
[limits]
backend_queue_timeout = "$QUEUE_TIMEOUT"
EOF
cat >"$WORK/unlimited.toml" <<EOF
[limits]
backend_queue_timeout = "$QUEUE_TIMEOUT"
backend_max_concurrency = 1000
EOF

report "# Adaptive backend limit: an HTTP backend that slows mid-run ($(date '+%Y-%m-%d %H:%M'))" ""
machine_info
report "- backend: \`levee origin --workers 4 --delay 20ms --no-session --cache-control no-store\` (capacity about 200 req/s); from ${PHASE} s to $((2 * PHASE)) s each page takes ${SLOW_MS} ms (capacity about $((4000 / SLOW_MS)) req/s), then 20 ms again" \
    "- load: \`levee bench URL --rate $RATE -c 1000 -d $((3 * PHASE))s --timeout 10s\` (open model: requests keep arriving whatever the answers)" \
    "- levee: \`levee serve --backend http://ORIGIN\` with backend_queue_timeout = $QUEUE_TIMEOUT; auto: backend_max_concurrency = \"auto\" (the default), unlimited: = 1000" \
    "- goodput = 2xx responses per second; errors = everything else (503 shed by levee, client timeouts)" \
    ""

for s in "${SERVERS[@]}"; do
    log "$s: $RATE req/s for $((3 * PHASE)) s, the backend slows from ${PHASE} s to $((2 * PHASE)) s"
    oport=$(free_port)
    start_origin origin "$oport" --workers 4 --delay 20ms --no-session --cache-control no-store
    port=$(free_port)
    admin=$(free_port)
    start_levee "levee-$s" "$port" "$oport" --config "$WORK/$s.toml" --admin-listen "127.0.0.1:$admin"
    pid=$LEVEE_PID
    curl -sf -o /dev/null "http://127.0.0.1:$port/page" || die "$s: levee does not serve the origin's page"
    "$LEVEE" bench "http://127.0.0.1:$port/page" --rate "$RATE" -c 1000 -d "$((3 * PHASE))s" \
        --timeout 10s -q --label "$s" --json "$WORK/run-$s.json" &
    bench=$!
    # Sample until the bench ends: seconds since start, levee's limit, slots in use,
    # requests queued in levee, requests inside the backend.
    start=$(date +%s.%N)
    phase=0
    : >"$WORK/samples-$s.tsv"
    while kill -0 "$bench" 2>/dev/null; do
        t=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {printf "%.2f", a - b}')
        if [ "$phase" = 0 ] && awk -v t="$t" -v p="$PHASE" 'BEGIN {exit !(t >= p)}'; then
            curl -sf -o /dev/null "http://127.0.0.1:$oport/__origin/delay?ms=$SLOW_MS"
            phase=1
        elif [ "$phase" = 1 ] && awk -v t="$t" -v p="$PHASE" 'BEGIN {exit !(t >= 2 * p)}'; then
            curl -sf -o /dev/null "http://127.0.0.1:$oport/__origin/delay?ms=20"
            phase=2
        fi
        m=$(curl -s "http://127.0.0.1:$admin/metrics")
        inside=$(curl -s "http://127.0.0.1:$oport/__origin/stats" | sed -n 's/.*"in_flight":\([0-9]*\).*/\1/p')
        awk -v t="$t" -v inside="${inside:-0}" '
            $1 == "levee_backend_limit" {l = $2} $1 == "levee_backend_in_use" {u = $2}
            $1 == "levee_backend_waiting" {w = $2}
            END {print t "\t" l + 0 "\t" u + 0 "\t" w + 0 "\t" inside}' <<<"$m" >>"$WORK/samples-$s.tsv"
        sleep 0.25
    done
    wait "$bench" || die "levee bench failed against levee-$s"
    stop_pid "$pid"
    stop_pid "$ORIGIN_PID"
done

CHART="$REPO_DIR/docs/adaptive.svg"
[ "${RECORD:-1}" = 1 ] || CHART="$WORK/adaptive.svg"
python3 - "$WORK" "$CHART" "$PHASE" "$QUEUE_TIMEOUT" "${SERVERS[@]}" <<'PY' | tee -a "$OUT_FILE"
import json, sys
work, chart, phase, queue_timeout, servers = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5:]

runs = {s: json.load(open(f"{work}/run-{s}.json"))["steps"][0] for s in servers}
samples = {s: [list(map(float, l.split("\t"))) for l in open(f"{work}/samples-{s}.tsv") if l.strip()] for s in servers}

def during(s, col, lo, hi):
    v = [r[col] for r in samples[s] if lo <= r[0] < hi]
    return (sum(v) / len(v), max(v)) if v else (0.0, 0.0)

print("| backend_max_concurrency | goodput req/s | 2xx | p50 of 2xx ms | p99 of 2xx ms | slowest 2xx ms | 503 | client timeouts | limit while slow (mean) | inside the backend while slow (mean / max) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in servers:
    st = runs[s]
    ok = st["status"]["s2xx"]
    l = st.get("latency_2xx", st["latency"])
    lim, _ = during(s, 1, phase + 2, 2 * phase)
    ins, ins_max = during(s, 4, phase + 2, 2 * phase)
    print(f"| {s} | {ok / st['elapsed_s']:,.0f} | {ok:,} | {l['p50_ms']:,.0f} | {l['p99_ms']:,.0f} | {l['max_ms']:,.0f} | "
          f"{st['status']['s5xx']:,} | {st['errors']['timeout']:,} | {lim:,.1f} | {ins:,.1f} / {ins_max:,.0f} |")
print()
print(f"(\"while slow\": from {phase + 2:.0f} s to {2 * phase:.0f} s, once the limit had 2 s to react; levee's queue timeout {queue_timeout})")
print()
print("- client check, requests sent late for want of a free connection (0: the latencies are the server's): "
      + "; ".join(f"{s} {runs[s].get('late_sends', 0)}" for s in servers))
print()

# The chart: requests inside the backend (left) and levee's limit (right) over time.
W, H, M = 880, 330, 56
colors = {"auto": "#1f77b4", "unlimited": "#d62728"}
def panel(x0, title, col, which):
    pw, ph = W / 2 - M - 10, H - 2 * M
    tmax = max(r[0] for s in which for r in samples[s]) or 1
    vmax = max(max(r[col] for r in samples[s]) for s in which) or 1
    out = [f'<text x="{x0 + pw / 2}" y="{M - 22}" text-anchor="middle" font-weight="bold">{title}</text>',
           f'<rect x="{x0}" y="{M}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
           f'<rect x="{x0 + pw * phase / tmax:.1f}" y="{M}" width="{pw * phase / tmax:.1f}" height="{ph}" fill="#f3e6c8"/>',
           f'<text x="{x0 + pw * 1.5 * phase / tmax:.1f}" y="{M + 14}" text-anchor="middle" font-size="11">backend slow</text>']
    for frac in (0, 0.5, 1):
        y = M + ph - ph * frac
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{vmax * frac:,.0f}</text>')
        out.append(f'<text x="{x0 + pw * frac:.1f}" y="{M + ph + 16}" text-anchor="middle" font-size="11">{tmax * frac:.0f} s</text>')
    for s in which:
        pts = " ".join(f"{x0 + pw * r[0] / tmax:.1f},{M + ph - ph * r[col] / vmax:.1f}" for r in samples[s])
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colors.get(s, "#555")}" stroke-width="2"/>')
    return out

svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="13">',
       f'<rect width="{W}" height="{H}" fill="white"/>']
svg += panel(M + 10, "requests inside the backend", 4, servers)
svg += panel(W / 2 + M, "levee's backend limit (auto)", 1, ["auto"])
for i, s in enumerate(servers):
    x = M + 10 + i * 320
    svg.append(f'<rect x="{x}" y="{H - 16}" width="14" height="4" fill="{colors.get(s, "#555")}"/>')
    svg.append(f'<text x="{x + 20}" y="{H - 10}" font-size="12">backend_max_concurrency = {s}</text>')
svg.append("</svg>")
open(chart, "w").write("\n".join(svg) + "\n")
print(f"Chart: {chart.split('/')[-2] + '/' + chart.split('/')[-1]}")
PY

record_report
