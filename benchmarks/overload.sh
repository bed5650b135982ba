#!/usr/bin/env bash
# benchmarks/overload.sh: past the knee (the seeds' chapter 5, figure 5.8). A PHP page that
# takes about 20 ms on php-fpm with PHP_WORKERS workers (capacity ~ PHP_WORKERS / 20 ms),
# loaded far beyond what it can serve:
#   - closed model: `levee bench --sweep` from 1 client to 10x the knee (PHP_WORKERS);
#   - open model: `levee bench --rate` at 2x, 5x and 10x the capacity;
# through
#   - levee (`--backend fastcgi+unix:SOCK --root ROOT`, everything default: the backend
#     limit is php-fpm's pm.max_children, read from its configuration), uncached;
#   - the same levee with a 3 s micro-cache (`--micro-cache 3s`): one URL, as a front page;
#   - nginx with fastcgi_pass to the same php-fpm, uncached (the usual setup), and with
#     the usual 3 s micro-caching recipe (fastcgi_cache, cache lock, stale while updating).
# Goodput = 2xx responses per second. The sweep's goodput and p99 of 2xx responses go to a chart
# (docs/overload.svg, RECORD=0: not there).
#
# Usage: benchmarks/overload.sh   (about 7 minutes)
#        The table goes to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   STEP=5 (seconds per sweep step) RATE_SECS=10 PHP_WORKERS=4 PAGE_MS=20
#        QUEUE_TIMEOUT=2s (levee's backend_queue_timeout here), OPEN_CONN_SECS=4, LEVEE, BUILD, KEEP_WORK
# Needs: php8.2-fpm, nginx-light, curl, python3. Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

STEP=${STEP:-5}
RATE_SECS=${RATE_SECS:-10}
PHP_WORKERS=${PHP_WORKERS:-4}
PAGE_MS=${PAGE_MS:-20}
QUEUE_TIMEOUT=${QUEUE_TIMEOUT:-2s}
# Open model: connections = rate x this. levee bench paces each connection (one request
# every connections/rate s, latency counted from when it was due), so with too few, a
# connection still waiting for its last answer sends its next one late, and the client's
# own lag would count as the server's latency.
OPEN_CONN_SECS=${OPEN_CONN_SECS:-4}

need_tools nginx curl python3
levee_binary
open_report overload

# ---- the page and php-fpm ---------------------------------------------------------------

ROOT="$WORK/www"
mkdir -p "$ROOT"
# Busy for PAGE_MS of CPU-free time (a database wait), like a typical CMS page.
cat >"$ROOT/page.php" <<EOF
<?php
usleep($((PAGE_MS * 1000)));
echo "<!doctype html><title>page</title><p>rendered at ", microtime(true), "\n";
EOF
php_fpm_conf overload "$PHP_WORKERS"
cat >"$WORK/levee.toml" <<EOF
[limits]
backend_queue_timeout = "$QUEUE_TIMEOUT"
EOF
NGINX_DIR="$WORK/nginx"
mkdir -p "$NGINX_DIR"
nginx_user=""
[ "$(id -u)" = 0 ] && nginx_user="user root;"

# up SERVER: a fresh php-fpm and SERVER in front of it (on PORT). Every run starts clean:
# work a server left in php-fpm's backlog (nginx's, past the knee) would slow the next.
up() {
    start_php_fpm
    PORT=$(free_port)
    case $1 in
    levee | levee-micro)
        local extra=()
        [ "$1" = levee-micro ] && extra=(--micro-cache 3s)
        start_bg "$1" "$LEVEE" serve --config "$WORK/levee.toml" --listen "127.0.0.1:$PORT" \
            --backend "fastcgi+unix:$SOCK" --root "$ROOT" "${extra[@]}"
        ;;
    nginx | nginx-micro)
        # nginx-micro: the usual micro-caching recipe (one fill at a time, stale while
        # it updates), the same 3 s as levee-micro.
        local cache_path="" cache=""
        if [ "$1" = nginx-micro ]; then
            cache_path="fastcgi_cache_path $NGINX_DIR/cache levels=1:2 keys_zone=micro:10m max_size=100m inactive=60s use_temp_path=off;"
            cache="fastcgi_cache micro; fastcgi_cache_key \$scheme\$request_method\$host\$request_uri; fastcgi_cache_valid 200 3s; fastcgi_cache_lock on; fastcgi_cache_use_stale updating error timeout; fastcgi_cache_background_update on;"
        fi
        cat >"$NGINX_DIR/nginx.conf" <<EOF
$nginx_user
worker_processes 2;
pid $NGINX_DIR/nginx.pid;
error_log $NGINX_DIR/error.log warn;
worker_rlimit_nofile 19000;
events { worker_connections 9000; }
http {
    access_log off;
    keepalive_requests 1000000;
    $(nginx_temp_paths "$NGINX_DIR")
    $cache_path
    server {
        listen 127.0.0.1:$PORT backlog=4096;
        root $ROOT;
        location ~ \.php\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_pass unix:$SOCK;
            $cache
        }
    }
}
EOF
        start_bg nginx "$(command -v nginx || echo /usr/sbin/nginx)" -e stderr -p "$NGINX_DIR" \
            -c "$NGINX_DIR/nginx.conf" -g 'daemon off;'
        ;;
    esac
    SERVER_PID=$BG_PID
    wait_port "$PORT" "$SERVER_PID"
    curl -sf "http://127.0.0.1:$PORT/page.php" | grep -q "rendered at" || die "$1: /page.php did not run PHP"
}

down() {
    stop_pid "$SERVER_PID"
    stop_pid "$PHP_PID"
    rm -f "$SOCK"
}

SERVERS=(levee levee-micro nginx nginx-micro)
for s in "${SERVERS[@]}"; do up "$s"; down; done
LIMIT_LINE=$(grep -h "backend limit" "$WORK/levee.log" | head -1 | sed 's/^levee: //; s|/[^ )]*/php-fpm.conf|FPM_CONF|')
log "all four serve the page"

CAPACITY=$((PHP_WORKERS * 1000 / PAGE_MS))
KNEE=$PHP_WORKERS
SWEEP="1,2,$KNEE,$((KNEE * 2)),$((KNEE * 4)),$((KNEE * 6)),$((KNEE * 8)),$((KNEE * 10))"
report "# Overload: goodput past the knee, levee vs nginx in front of php-fpm ($(date '+%Y-%m-%d %H:%M'))" ""
machine_info
report "- php-fpm: pm = static, $PHP_WORKERS workers on a Unix socket, started afresh for every run; page.php sleeps $PAGE_MS ms: capacity about $CAPACITY req/s" \
    "- levee: \`levee serve --backend fastcgi+unix:SOCK --root ROOT\` with backend_queue_timeout = $QUEUE_TIMEOUT, everything else default; levee-micro adds \`--micro-cache 3s\`" \
    "- levee said: ${LIMIT_LINE:-?}" \
    "- nginx: worker_processes 2, fastcgi_pass unix:SOCK (Debian's fastcgi_params), no cache; nginx-micro adds fastcgi_cache with fastcgi_cache_valid 200 3s, fastcgi_cache_lock on, fastcgi_cache_use_stale updating, fastcgi_cache_background_update on" \
    "- closed model: \`levee bench URL --sweep $SWEEP -d ${STEP}s\` (1 s warm-up per step); open model: \`levee bench URL --rate R -c R*${OPEN_CONN_SECS} -d ${RATE_SECS}s --timeout 10s\` (each connection sends one request every ${OPEN_CONN_SECS} s: enough connections that a request is never late for want of one, while levee holds requests up to its queue timeout)" \
    "- goodput = 2xx responses per second; errors = everything else (503 shed by levee, timeouts, resets)" \
    ""

# ---- closed model: the sweep ------------------------------------------------------------

for s in "${SERVERS[@]}"; do
    log "sweep $s: $SWEEP clients, ${STEP} s each"
    up "$s"
    "$LEVEE" bench "http://127.0.0.1:$PORT/page.php" --sweep "$SWEEP" -d "${STEP}s" \
        --timeout 10s -q --label "$s" --json "$WORK/sweep-$s.json" --html "$WORK/sweep-$s.html" ||
        die "levee bench failed against $s"
    down
done

# ---- open model: fixed rates ------------------------------------------------------------

for mult in 2 5 10; do
    rate=$((CAPACITY * mult))
    for s in "${SERVERS[@]}"; do
        log "rate $s: $rate req/s (${mult}x capacity) for ${RATE_SECS} s"
        up "$s"
        "$LEVEE" bench "http://127.0.0.1:$PORT/page.php" --rate "$rate" -c "$((rate * OPEN_CONN_SECS))" \
            -d "${RATE_SECS}s" --timeout 10s -q --label "$s" --json "$WORK/rate-$s-$mult.json" ||
            die "levee bench --rate failed against $s"
        down
    done
done

# ---- the tables and the chart ------------------------------------------------------------

CHART="$REPO_DIR/docs/overload.svg"
[ "${RECORD:-1}" = 1 ] || CHART="$WORK/overload.svg"
python3 - "$WORK" "$CHART" "$CAPACITY" "$QUEUE_TIMEOUT" "${SERVERS[@]}" <<'PY' | tee -a "$OUT_FILE"
import json, sys
work, chart, capacity, queue_timeout, servers = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]

def good(step):
    return step["status"]["s2xx"] / step["elapsed_s"] if step["elapsed_s"] else 0.0

def errors(step):
    return sum(step["errors"].values())

def served_p99(step):
    # p99 of the 2xx responses alone: the fast 503s of shedding would pull it down.
    return step.get("latency_2xx", step["latency"])["p99_ms"]

def cell(st):
    return f"{good(st):,.0f} / {served_p99(st):,.0f} / {st['latency']['p99_ms']:,.0f} / {errors(st)}"

sweeps = {s: json.load(open(f"{work}/sweep-{s}.json"))["steps"] for s in servers}
levels = [st["concurrency"] for st in sweeps[servers[0]]]
print("Closed model (clients = concurrent connections): goodput req/s / p99 of 2xx ms / p99 of all ms / errors")
print()
print("| clients | " + " | ".join(servers) + " |")
print("|---:|" + "---:|" * len(servers))
for i, c in enumerate(levels):
    cells = []
    for s in servers:
        cells.append(cell(sweeps[s][i]))
    print(f"| {c} | " + " | ".join(cells) + " |")
print()
for s in servers:
    g = [good(st) for st in sweeps[s]]
    peak = max(g)
    print(f"- {s}: peak goodput {peak:,.0f} req/s; at {levels[-1]} clients {g[-1]:,.0f} = {100 * g[-1] / peak:.0f}% of the peak")
print()
print(f"Open model (requests at a fixed rate; capacity about {capacity} req/s): goodput req/s / p99 of 2xx ms / p99 of all ms / errors")
print()
print("| offered | " + " | ".join(servers) + " |")
print("|---:|" + "---:|" * len(servers))
worst = {s: max(served_p99(st) for st in sweeps[s]) for s in servers}
for mult in (2, 5, 10):
    cells = []
    for s in servers:
        st = json.load(open(f"{work}/rate-{s}-{mult}.json"))["steps"][0]
        worst[s] = max(worst.get(s, 0), served_p99(st))
        cells.append(cell(st))
    print(f"| {capacity * mult:,} req/s ({mult}x) | " + " | ".join(cells) + " |")
print()
for s in servers:
    print(f"- {s}: the slowest p99 of 2xx responses in any run: {worst[s]:,.0f} ms (levee's queue timeout: {queue_timeout})")
late = {s: [json.load(open(f"{work}/rate-{s}-{m}.json"))["steps"][0].get("late_sends", 0) for m in (2, 5, 10)] for s in servers}
print("- client check, requests sent late for want of a free connection at 2x/5x/10x (0: the latencies are the server's): "
      + "; ".join(f"{s} {'/'.join(map(str, v))}" for s, v in late.items()))
print()

# The chart: goodput (left) and p99 (right) against clients, one line per server.
W, H, M = 880, 330, 56
colors = {"levee": "#1f77b4", "levee-micro": "#2ca02c", "nginx": "#d62728", "nginx-micro": "#ff7f0e"}
def panel(x0, title, values, log=False):
    import math
    pw = W / 2 - M - 10
    ph = H - 2 * M
    vmax = max(max(v) for v in values.values()) or 1
    if log:
        vmin = max(min(min(x for x in v if x > 0) for v in values.values()), 0.1)
        f = lambda v: (math.log10(max(v, vmin)) - math.log10(vmin)) / max(math.log10(vmax) - math.log10(vmin), 1e-9)
    else:
        f = lambda v: v / vmax
    out = [f'<text x="{x0 + pw / 2}" y="{M - 22}" text-anchor="middle" font-weight="bold">{title}</text>',
           f'<rect x="{x0}" y="{M}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
    n = len(levels)
    xs = [x0 + pw * i / (n - 1) for i in range(n)]
    for x, c in zip(xs, levels):
        out.append(f'<text x="{x:.1f}" y="{M + ph + 16}" text-anchor="middle" font-size="11">{c}</text>')
    out.append(f'<text x="{x0 + pw / 2}" y="{M + ph + 34}" text-anchor="middle" font-size="12">concurrent clients</text>')
    for frac in (0, 0.5, 1):
        y = M + ph - ph * frac
        if log:
            import math
            label = 10 ** (math.log10(vmin) + frac * (math.log10(vmax) - math.log10(vmin)))
        else:
            label = vmax * frac
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{label:,.0f}</text>')
    for s, v in values.items():
        pts = " ".join(f"{x:.1f},{M + ph - ph * f(y):.1f}" for x, y in zip(xs, v))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colors.get(s, "#555")}" stroke-width="2.5"/>')
    return out

svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="13">',
       f'<rect width="{W}" height="{H}" fill="white"/>']
svg += panel(M + 10, "goodput (2xx req/s, log scale)", {s: [good(st) for st in sweeps[s]] for s in servers}, log=True)
svg += panel(W / 2 + M, "p99 of 2xx responses (ms, log scale)", {s: [served_p99(st) for st in sweeps[s]] for s in servers}, log=True)
for i, s in enumerate(servers):
    x = M + 10 + i * 150
    svg.append(f'<rect x="{x}" y="{H - 16}" width="14" height="4" fill="{colors.get(s, "#555")}"/>')
    svg.append(f'<text x="{x + 20}" y="{H - 10}" font-size="12">{s}</text>')
svg.append("</svg>")
open(chart, "w").write("\n".join(svg) + "\n")
print(f"Chart: {chart.split('/')[-2] + '/' + chart.split('/')[-1]}")
PY

record_report
