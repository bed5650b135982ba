#!/usr/bin/env bash
# Compares `levee bench` with wrk (and oha, when available) on one target in one run:
# Debian nginx serving a 1 KiB static file on a loopback port, worker_processes 1,
# access_log off. Each tool runs ROUNDS times, alternating, with the same threads,
# connections and duration; the script prints medians of requests/s and p50 latency
# and the levee/wrk ratio. The order of the tools rotates each round.
#
# Usage: benchmarks/bench-vs-wrk.sh            (from the repository root)
# Env:   ROUNDS=5 THREADS=2 CONNS=64 DURATION=10
#        OHA=1  try `cargo install oha` when oha is not on PATH (slow; optional)
# Needs: nginx (Debian nginx-light), wrk, cargo. Targets 127.0.0.1 only.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
DURATION=${DURATION:-10}

cd "$(dirname "$0")/.."
for tool in nginx wrk cargo; do
    if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
        echo "bench-vs-wrk: '$tool' is not installed (apt-get install -y nginx-light wrk)" >&2
        exit 2
    fi
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

echo "== building levee (release)"
cargo build --release -p levee >&2
TARGET_DIR=${CARGO_TARGET_DIR:-target}
LEVEE="$TARGET_DIR/release/levee"

OHA_BIN=$(command -v oha || true)
if [ -z "$OHA_BIN" ] && [ "${OHA:-0}" = 1 ]; then
    echo "== installing oha from crates.io (optional)"
    if cargo install oha >/dev/null 2>&1; then
        OHA_BIN=$(command -v oha || echo "$HOME/.cargo/bin/oha")
    else
        echo "   oha did not install; continuing without it"
    fi
fi

WORK=$(mktemp -d /tmp/levee-bench-vs-wrk.XXXXXX)
NGINX_PID=""
cleanup() {
    if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
        kill "$NGINX_PID" 2>/dev/null || true
        wait "$NGINX_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# A free loopback port: bind to port 0 and read back what the kernel chose.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 18080)

mkdir -p "$WORK/www" "$WORK/tmp"
# nginx workers drop root privileges: they must be able to read the files.
chmod 755 "$WORK" "$WORK/www"
head -c 1024 /dev/zero | tr '\0' 'x' >"$WORK/www/1k.html"
cat >"$WORK/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $WORK/tmp;
    proxy_temp_path $WORK/tmp;
    fastcgi_temp_path $WORK/tmp;
    uwsgi_temp_path $WORK/tmp;
    scgi_temp_path $WORK/tmp;
    server {
        listen 127.0.0.1:$PORT;
        root $WORK/www;
    }
}
EOF
"$NGINX" -p "$WORK" -c "$WORK/nginx.conf" &
NGINX_PID=$!
URL="http://127.0.0.1:$PORT/1k.html"
for _ in $(seq 50); do
    if curl -fsS -o /dev/null "$URL" 2>/dev/null; then break; fi
    sleep 0.1
done
if ! curl -fsS -o /dev/null "$URL"; then
    echo "bench-vs-wrk: nginx did not come up on port $PORT; see $WORK/error.log" >&2
    tail -n 5 "$WORK/error.log" >&2 || true
    exit 1
fi

# Latency value with unit (wrk prints 1.23ms, 812.00us, 1.01s) -> milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) n = n / 1000
        else if (v ~ /ms$/) n = n
        else if (v ~ /s$/) n = n * 1000
        printf "%.3f", n
    }'
}

run_wrk() {
    local out
    out=$(wrk -t "$THREADS" -c "$CONNS" -d "${DURATION}s" --latency "$URL")
    local rps p50
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2; exit}' <<<"$out")
    echo "$rps $(to_ms "$p50")"
}

run_levee() {
    local out
    out=$("$LEVEE" bench "$URL" -t "$THREADS" -c "$CONNS" -d "${DURATION}s" -q --csv -)
    # CSV columns: ... rps is 11th, p50_ms is 17th.
    awk -F, 'NR == 2 {printf "%s %s\n", $11, $17}' <<<"$out"
}

run_oha() {
    local out
    out=$("$OHA_BIN" -c "$CONNS" -z "${DURATION}s" --no-tui --output-format json "$URL" 2>/dev/null ||
        "$OHA_BIN" -c "$CONNS" -z "${DURATION}s" --no-tui -j "$URL")
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["summary"]["requestsPerSec"], d["latencyPercentiles"]["p50"]*1000)' <<<"$out"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

TOOLS="wrk levee"
if [ -n "$OHA_BIN" ]; then TOOLS="$TOOLS oha"; else echo "== oha not available: skipped (OHA=1 to try cargo install oha)"; fi

echo "== target: nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), 1 KiB static file, worker_processes 1, on $URL"
echo "== each tool: -t $THREADS -c $CONNS -d ${DURATION}s, $ROUNDS rounds alternating; $(nproc) cores"
declare -A RPS P50
read -r -a TOOL_LIST <<<"$TOOLS"
for round in $(seq "$ROUNDS"); do
    # The first tool rotates each round, so none always runs on a machine warmed (or
    # heated) by another.
    for k in "${!TOOL_LIST[@]}"; do
        tool=${TOOL_LIST[(k + round) % ${#TOOL_LIST[@]}]}
        res=$("run_$tool")
        read -r rps p50 <<<"$res"
        printf "round %d  %-6s %12.1f req/s   p50 %8.3f ms\n" "$round" "$tool" "$rps" "$p50"
        RPS[$tool]+="$rps "
        P50[$tool]+="$p50 "
    done
done

echo
printf "%-8s %16s %14s\n" tool "median req/s" "median p50 ms"
for tool in $TOOLS; do
    mr=$(tr ' ' '\n' <<<"${RPS[$tool]}" | grep . | median)
    mp=$(tr ' ' '\n' <<<"${P50[$tool]}" | grep . | median)
    printf "%-8s %16.1f %14.3f\n" "$tool" "$mr" "$mp"
    eval "MED_RPS_$tool=$mr"
    eval "MED_P50_$tool=$mp"
done
awk -v l="$MED_RPS_levee" -v w="$MED_RPS_wrk" -v lp="$MED_P50_levee" -v wp="$MED_P50_wrk" \
    'BEGIN { printf "\nlevee/wrk: req/s ratio %.3f, p50 ratio %.3f\n", l / w, lp / wp }'
