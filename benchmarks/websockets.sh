#!/usr/bin/env bash
# benchmarks/websockets.sh: WebSockets through levee, nginx (with its documented
# WebSocket lines) and Caddy 2.6 (reverse_proxy), against the same echo server, in one run.
#
# The echo server and the load client are crates/levee-test/examples/ws_bench.rs
# (tokio-tungstenite): a fast echo, so that the front is what is measured.
#   rtt:    CONNS WebSockets, each one 64-byte message at a time, waiting for its echo
#           (round trips per second);
#   stream: CONNS WebSockets, each with 64 messages of 64 bytes in flight (messages
#           echoed per second).
# ROUNDS rounds, the fronts alternated (the first rotates every round); medians, and the
# ratios levee/nginx and levee/Caddy. "direct" (no front) is the ceiling.
#
# Usage: benchmarks/websockets.sh     (about 4 minutes)
# Env:   ROUNDS=5 DURATION=5 CONNS=32  LEVEE=/path BUILD=0  RECORD=0 (not in BENCHMARKS.md)
# Needs: nginx (nginx-light), caddy (Debian's 2.6), python3. 127.0.0.1 only.

source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
CONNS=${CONNS:-32}
FRONTS=(levee nginx caddy direct)

need_tools nginx caddy python3
levee_binary
if [ "${BUILD:-1}" = 1 ]; then
    log "building the benchmark's client and echo server"
    (cd "$REPO_DIR" && cargo build --release -p levee-test --example ws_bench >&2)
fi
WS_BENCH="${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/examples/ws_bench"
[ -x "$WS_BENCH" ] || die "no $WS_BENCH (cargo build --release -p levee-test --example ws_bench)"
cp "$WS_BENCH" "$WORK/ws_bench"
open_report websockets

ECHO_PORT=$(free_port)
start_bg echo "$WORK/ws_bench" server "$ECHO_PORT"
wait_port "$ECHO_PORT" "$BG_PID"

declare -A PORT
PORT[direct]=$ECHO_PORT

PORT[levee]=$(free_port)
start_bg levee "$LEVEE" serve --listen "127.0.0.1:${PORT[levee]}" --backend "http://127.0.0.1:$ECHO_PORT"
wait_port "${PORT[levee]}" "$BG_PID"

PORT[nginx]=$(free_port)
mkdir -p "$WORK/nginx"
cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    upstream echo { server 127.0.0.1:$ECHO_PORT; keepalive 64; }
    server {
        listen 127.0.0.1:${PORT[nginx]};
        location / {
            proxy_pass http://echo;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_read_timeout 1h;
        }
    }
}
CONF
start_bg nginx nginx -c "$WORK/nginx/nginx.conf" -g 'daemon off;'
wait_port "${PORT[nginx]}" "$BG_PID"

PORT[caddy]=$(free_port)
mkdir -p "$WORK/caddy"
cat >"$WORK/caddy/Caddyfile" <<CONF
{
    admin off
    auto_https off
}
http://127.0.0.1:${PORT[caddy]} {
    reverse_proxy 127.0.0.1:$ECHO_PORT
}
CONF
start_bg caddy env HOME="$WORK/caddy" XDG_DATA_HOME="$WORK/caddy" XDG_CONFIG_HOME="$WORK/caddy" \
    caddy run --config "$WORK/caddy/Caddyfile" --adapter caddyfile
wait_port "${PORT[caddy]}" "$BG_PID"

declare -A RTT STREAM
for ((round = 1; round <= ROUNDS; round++)); do
    n=${#FRONTS[@]}
    for ((k = 0; k < n; k++)); do
        front=${FRONTS[$(((k + round - 1) % n))]}
        url="ws://127.0.0.1:${PORT[$front]}/bench"
        r=$("$WORK/ws_bench" rtt "$url" "$CONNS" "$DURATION")
        s=$("$WORK/ws_bench" stream "$url" "$CONNS" "$DURATION")
        RTT[$front]="${RTT[$front]:-} $r"
        STREAM[$front]="${STREAM[$front]:-} $s"
        log "round $round/$ROUNDS $front: $r round trips/s, $s messages/s"
    done
done

report "# WebSockets: levee, nginx, Caddy ($(date -u '+%Y-%m-%d %H:%M UTC'))" "" \
    "levee $("$LEVEE" --version | head -1), nginx $(nginx -v 2>&1 | sed 's/.*\///'), Caddy $(caddy version | cut -d' ' -f1);" \
    "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), the client and the echo server on the same machine." \
    "\`benchmarks/websockets.sh\`: ROUNDS=$ROUNDS DURATION=${DURATION}s CONNS=$CONNS, medians; 64-byte binary messages." \
    "" \
    "| front | round trips/s (1 in flight per WebSocket) | messages/s (64 in flight) |" \
    "|---|---:|---:|"
declare -A MR MS
for front in "${FRONTS[@]}"; do
    # shellcheck disable=SC2086
    MR[$front]=$(median ${RTT[$front]})
    # shellcheck disable=SC2086
    MS[$front]=$(median ${STREAM[$front]})
    report "| $front | ${MR[$front]} | ${MS[$front]} |"
done
report "" \
    "levee/nginx: round trips $(ratio "${MR[levee]}" "${MR[nginx]}")x, messages $(ratio "${MS[levee]}" "${MS[nginx]}")x;" \
    "levee/Caddy: round trips $(ratio "${MR[levee]}" "${MR[caddy]}")x, messages $(ratio "${MS[levee]}" "${MS[caddy]}")x."
record_report
