#!/usr/bin/env bash
# benchmarks/tls.sh: HTTPS cache hits through levee and nginx proxy_cache, in one run.
#
# Both servers terminate TLS with the same self-signed P-256 certificate (made here with
# openssl) in front of one `levee origin` (Cache-Control: public, max-age=3600, no
# cookie). For a 1 KiB and a 100 KiB object, warmed and checked to be a HIT over HTTPS,
# h2load (one thread) measures three cases:
#   h2       HTTP/2 by ALPN, -c CONNS -m STREAMS -D DURATION (kept-alive connections)
#   h1       HTTP/1.1 by ALPN (--h1), -c CONNS -m 1 -D DURATION (kept-alive connections,
#            no pipelining)
#   h1-new   a new TLS connection (full handshake) for every request: h2load cannot close
#            a connection after each request, so it runs in batches of `--h1 -c CONNS
#            -n CONNS` (every client opens one connection, makes one request, and is done)
#            until DURATION seconds have passed; req/s = all requests / the sum of
#            h2load's own "finished in" times (h2load's start-up is not counted).
#            h2load does not resume TLS sessions, so every connection is a full handshake.
#   new      `openssl s_time -new`: one connection after another, a full TLS 1.3 handshake
#            and one HTTP/1.0 GET each (a monitoring probe, a visitor's first page).
#   resumed  `openssl s_time -reuse`: the same, each connection resuming the first one's
#            session (a returning visitor): the ticket path.
# For every case the servers' own CPU time is read from /proc (all their threads and
# processes): requests per CPU-second is what a handshake costs the server, which the
# req/s of a one-thread client on this 2-core machine cannot show once the client is the
# slower side (it is, for new connections: both servers wait for it).
# ROUNDS times with the servers alternated (the first one rotates every round); medians.
#
# Usage: benchmarks/tls.sh               (from anywhere; about 2*3*2*ROUNDS*DURATION s + start-up)
#        The table goes to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   ROUNDS=3 DURATION=10 CONNS=32 STREAMS=10
#        LEVEE=/path/to/levee (default: cargo build --release, then target/release/levee)
#        BUILD=0 (use target/release/levee as it is)  KEEP_WORK=1 (keep scratch files)
# Needs: h2load (nghttp2-client), nginx-light (Debian), openssl, curl, python3.
#        Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-32}
STREAMS=${STREAMS:-10}
SERVERS=(levee nginx)
CASES=(h2 h1 h1-new new resumed)

if ! command -v h2load >/dev/null 2>&1; then
    echo "missing: h2load; install with: apt-get install -y nghttp2-client" >&2
    exit 2
fi
need_tools nginx openssl curl python3
levee_binary
open_report tls

# ---- certificate ------------------------------------------------------------------------

self_signed_cert

# ---- servers ----------------------------------------------------------------------------

# start_nginx_tls NAME TLS_PORT BACKEND_PORT: lib.sh's start_nginx settings (proxy_cache on
# disk, 2 workers, access log off, keepalive_requests 1000000) on an `ssl http2` listener,
# TLS 1.3 only. Sets NGINX_PID, NGINX_DIR.
start_nginx_tls() {
    local name=$1 port=$2 backend=$3 user_line="" nginx_bin
    NGINX_DIR="$WORK/$name"
    mkdir -p "$NGINX_DIR"
    [ "$(id -u)" = 0 ] && user_line="user root;"
    cat >"$NGINX_DIR/nginx.conf" <<EOF
$user_line
worker_processes 2;
pid $NGINX_DIR/nginx.pid;
error_log $NGINX_DIR/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    keepalive_requests 1000000;
    keepalive_timeout 65s;
    $(nginx_temp_paths "$NGINX_DIR")
    proxy_cache_path $NGINX_DIR/cache levels=1:2 keys_zone=bench:64m max_size=1g inactive=1h use_temp_path=off;
    upstream origin { server 127.0.0.1:$backend; keepalive 64; }
    server {
        listen 127.0.0.1:$port ssl http2;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        ssl_protocols TLSv1.3;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            add_header X-Cache-Status \$upstream_cache_status always;
        }
    }
}
EOF
    nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
    start_bg "$name" "$nginx_bin" -e stderr -p "$NGINX_DIR" -c "$NGINX_DIR/nginx.conf" -g 'daemon off;'
    NGINX_PID=$BG_PID
    wait_port "$port" "$NGINX_PID"
}

# start_all LABEL BODY_SIZE: one origin, levee (HTTP and HTTPS listeners) and nginx.
# Sets PORT[server] (the HTTPS port), PID[server], ORIGIN_PORT.
declare -A PORT PID
start_all() {
    local label=$1 size=$2 http_port
    ORIGIN_PORT=$(free_port)
    # shellcheck disable=SC2046
    start_origin "origin-$label" "$ORIGIN_PORT" --delay 0ms --no-session $(origin_workers 0) \
        --cache-control "public, max-age=3600" --body-size "$size"
    PID[origin]=$ORIGIN_PID
    http_port=$(free_port)
    PORT[levee]=$(free_port)
    start_levee "levee-$label" "$http_port" "$ORIGIN_PORT" --cache-size 1GiB \
        --listen-tls "127.0.0.1:${PORT[levee]}" --tls-cert "$CERT" --tls-key "$KEY"
    PID[levee]=$LEVEE_PID
    wait_port "${PORT[levee]}" "$LEVEE_PID"
    PORT[nginx]=$(free_port)
    start_nginx_tls "nginx-$label" "${PORT[nginx]}" "$ORIGIN_PORT"
    PID[nginx]=$NGINX_PID
}
stop_all() {
    local s
    for s in "${SERVERS[@]}" origin; do stop_pid "${PID[$s]}"; done
}

# https_check SERVER URL HTTPVER: "<cache header> <http version> <bytes>" of one request.
https_check() {
    local h=X-Cache out
    [ "$1" = nginx ] && h=X-Cache-Status
    out=$(curl -s --max-time 10 --cacert "$CERT" "$3" -o /dev/null -D - -w 'VER %{http_version} %{size_download}\n' "$2" | tr -d '\r')
    printf '%s %s %s\n' \
        "$(awk -v h="$(tr 'A-Z' 'a-z' <<<"$h")" -F': ' 'tolower($1) == h {print $2; exit}' <<<"$out")" \
        "$(awk '$1 == "VER" {print $2, $3}' <<<"$out")"
}

# ---- measuring ----------------------------------------------------------------------------

# h2load_parse FILE: "requests_succeeded failed_or_errored non2xx secs rps" from h2load output.
h2load_parse() {
    awk '
        /^finished in/ {
            s = $3; sub(/,$/, "", s); f = 1
            if (s ~ /us$/) { sub(/us$/, "", s); f = 1e-6 } else if (s ~ /ms$/) { sub(/ms$/, "", s); f = 1e-3 } else sub(/s$/, "", s)
            secs = s * f; rps = $4 }
        /^requests:/ { ok = $8; bad = $10 + $12 + $14 }
        /^status codes:/ { non2 = $5 + $7 + $9 }
        END { printf "%d %d %d %s %s\n", ok, bad, non2, secs, rps }' "$1"
}

# s_time_rate URL MODE: connections per second of `openssl s_time -MODE` for DURATION.
s_time_rate() {
    local hostport path out
    hostport=${1#https://}
    path=/${hostport#*/}
    hostport=${hostport%%/*}
    out=$(timeout $((DURATION + 30)) openssl s_time -connect "$hostport" -"$2" -time "$DURATION" \
        -www "$path" -tls1_3 -CAfile "$CERT" 2>&1 || true)
    awk '/connections in [0-9.]+ real seconds/ {n = $1; t = $4} END {printf "%.0f %d\n", (t > 0 ? n / t : 0), (n > 0 ? 0 : 1)}' <<<"$out"
}

# run_case CASE URL: one measurement; prints "rps errors".
run_case() {
    local c=$1 url=$2 out="$WORK/h2load.out" line ok bad non2 secs rps
    case $c in
        h2 | h1)
            # --h1 with -m > 1 would pipeline: one request at a time per connection instead.
            local proto=(-m "$STREAMS")
            [ "$c" = h1 ] && proto=(--h1 -m 1)
            timeout $((DURATION + 60)) h2load "${proto[@]}" -t 1 -c "$CONNS" \
                -D "$DURATION" --warm-up-time 1 "$url" >"$out" 2>&1 || true
            grep -q '^finished in' "$out" || { cat "$out" >&2; die "h2load produced no result for $url ($c)"; }
            read -r ok bad non2 secs rps <<<"$(h2load_parse "$out")"
            printf '%.0f %d\n' "$rps" $((bad + non2))
            ;;
        h1-new)
            local end=$((SECONDS + DURATION)) tot_ok=0 tot_err=0 tot_secs=0
            while [ "$SECONDS" -lt "$end" ]; do
                timeout 60 h2load --h1 -t 1 -c "$CONNS" -n "$CONNS" "$url" >"$out" 2>&1 || true
                grep -q '^finished in' "$out" || { cat "$out" >&2; die "h2load produced no result for $url ($c)"; }
                read -r ok bad non2 secs rps <<<"$(h2load_parse "$out")"
                tot_ok=$((tot_ok + ok))
                tot_err=$((tot_err + bad + non2))
                tot_secs=$(awk -v a="$tot_secs" -v b="$secs" 'BEGIN {print a + b}')
            done
            awk -v n="$tot_ok" -v s="$tot_secs" -v e="$tot_err" 'BEGIN {printf "%.0f %d\n", (s > 0 ? n / s : 0), e}'
            ;;
        new) s_time_rate "$url" new ;;
        resumed) s_time_rate "$url" reuse ;;
    esac
}

declare -A RES_RPS RES_RUNS RES_ERR RES_ORIGIN RES_CPU CHECKS
TLS_INFO=""
hit_phase() {
    local label=$1 size=$2 s r k c url a e before after res
    log "hits over TLS, $label object: starting origin, levee, nginx"
    start_all "$label" "$size"
    for s in "${SERVERS[@]}"; do
        url="https://127.0.0.1:${PORT[$s]}/hit-$label"
        https_check "$s" "$url" --http1.1 >/dev/null
        for v in --http2 --http1.1; do
            res=$(https_check "$s" "$url" "$v")
            read -r h ver bytes <<<"$res"
            [ "${h:0:3}" = HIT ] || die "$s does not answer $url from cache over $v (cache header: '$h')"
            [ "${bytes:-0}" -ge "$size" ] || die "$s answered $url with $bytes bytes, fewer than $size"
            log "  $s $v: HTTP/$ver, $h, $bytes bytes"
            CHECKS[$label,$s]+="HTTP/$ver $h $bytes B; "
        done
        # What h2load negotiates (protocol, cipher, group), once per server.
        if [ "$label" = 1KiB ]; then
            h2load -n 1 -c 1 "$url" 2>&1 | sed -n 's/^\(TLS Protocol\|Cipher\|Server Temp Key\|Application protocol\): *//p' |
                paste -sd' ' | sed "s/^/$s: /" >>"$WORK/tls-info"
        fi
    done
    before=$(origin_requests "$ORIGIN_PORT")
    local -A rps err cpu
    for ((r = 0; r < ROUNDS; r++)); do
        for c in "${CASES[@]}"; do
            for ((k = 0; k < ${#SERVERS[@]}; k++)); do
                s=${SERVERS[(r + k) % ${#SERVERS[@]}]}
                local t0 t1 w0 w1
                t0=$(cpu_ticks "${PID[$s]}")
                w0=$(date +%s.%N)
                read -r a e <<<"$(run_case "$c" "https://127.0.0.1:${PORT[$s]}/hit-$label")"
                w1=$(date +%s.%N)
                t1=$(cpu_ticks "${PID[$s]}")
                # Requests per server CPU-second: rate x wall time / CPU seconds used.
                cpu[$c,$s]+="$(awk -v a="$a" -v w="$(awk -v x="$w0" -v y="$w1" 'BEGIN {print y - x}')" \
                    -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.0f", (t > 0 ? a * w * hz / t : 0)}') "
                rps[$c,$s]+="$a "
                err[$c,$s]=$((${err[$c,$s]:-0} + e))
                log "  round $((r + 1))/$ROUNDS $label $c $s: $a req/s, errors $e"
            done
        done
    done
    after=$(origin_requests "$ORIGIN_PORT")
    for c in "${CASES[@]}"; do
        for s in "${SERVERS[@]}"; do
            RES_RPS[$label,$c,$s]=$(median ${rps[$c,$s]})
            RES_RUNS[$label,$c,$s]="${rps[$c,$s]% }"
            RES_ERR[$label,$c,$s]=${err[$c,$s]}
            RES_CPU[$label,$c,$s]=$(median ${cpu[$c,$s]})
        done
    done
    RES_ORIGIN[$label]=$((after - before))
    stop_all
}

hit_phase 1KiB 1024
hit_phase 100KiB 102400

# ---- report -------------------------------------------------------------------------------

commit=$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$( (git -C "$REPO_DIR" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null || true) | wc -l)

report "# HTTPS cache hits: levee vs nginx ($(date '+%Y-%m-%d %H:%M'))" ""
report "- machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), Linux $(uname -r)" \
    "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared; other jobs may compile)" \
    "- levee: $LEVEE_SRC, commit $commit$([ "$dirty" -gt 0 ] && echo " + $dirty uncommitted file(s) in crates/ or Cargo files" || true)" \
    "- $( (nginx -v 2>&1 || /usr/sbin/nginx -v 2>&1) | sed 's/nginx version: //') ($( (nginx -V 2>&1 || /usr/sbin/nginx -V 2>&1) | sed -n 's/^built with //p' | head -1)), $(h2load --version 2>&1 | head -1), $(openssl version | awk '{print $1, $2}')"
while read -r line; do report "- negotiated by h2load, $line"; done <"$WORK/tls-info"
report "- method: both servers at once on 127.0.0.1 in front of one \`levee origin\` (Cache-Control: public," \
    "  max-age=3600), same self-signed P-256 certificate. levee: \`levee serve --cache-size 1GiB --listen-tls\`." \
    "  nginx: proxy_cache on disk, \`listen ssl http2\`, ssl_protocols TLSv1.3, worker_processes 2," \
    "  access_log off, keepalive_requests 1000000. h2load -t 1 (one CPU for the client, one for the server)." \
    "- cases: h2 = \`h2load -c $CONNS -m $STREAMS -D ${DURATION}s --warm-up-time 1s\` (HTTP/2 by ALPN); h1 = the same" \
    "  with \`--h1 -m 1\` (HTTP/1.1 kept alive, no pipelining); h1-new = a new TLS connection per" \
    "  request: batches of \`h2load --h1 -c $CONNS -n $CONNS\` for ${DURATION}s, req/s = requests / sum of h2load's" \
    "  times (full TLS 1.3 handshakes, no session resumption); new / resumed = \`openssl s_time -new / -reuse" \
    "  -tls1_3 -time ${DURATION}\`, one connection at a time, one GET each (resumed: the first session's ticket)." \
    "- per server CPU-second: requests x wall time / the server's CPU time in that run (/proc, all its threads" \
    "  and processes): the cost of a request to the server, whichever side (client or server) bounds req/s." \
    "- $ROUNDS runs per server and case, servers alternated (first one rotated each round); medians." ""
report "| object | case | levee req/s | nginx req/s | levee/nginx | levee per CPU-s | nginx per CPU-s | levee/nginx per CPU-s | levee runs | nginx runs | errors (levee/nginx) |" \
    "|---|---|---:|---:|---:|---:|---:|---:|---|---|---|"
for label in 1KiB 100KiB; do
    for c in "${CASES[@]}"; do
        report "| $label | $c | ${RES_RPS[$label,$c,levee]} | ${RES_RPS[$label,$c,nginx]} | $(ratio "${RES_RPS[$label,$c,levee]}" "${RES_RPS[$label,$c,nginx]}") | ${RES_CPU[$label,$c,levee]} | ${RES_CPU[$label,$c,nginx]} | $(ratio "${RES_CPU[$label,$c,levee]}" "${RES_CPU[$label,$c,nginx]}") | ${RES_RUNS[$label,$c,levee]} | ${RES_RUNS[$label,$c,nginx]} | ${RES_ERR[$label,$c,levee]}/${RES_ERR[$label,$c,nginx]} |"
    done
done
report ""
for label in 1KiB 100KiB; do
    report "- $label: checks before measuring: levee ${CHECKS[$label,levee]}nginx ${CHECKS[$label,nginx]}origin requests during the measured runs: ${RES_ORIGIN[$label]} (0 = every measured request was a hit)."
done
report ""
log "report written to $OUT_FILE"
record_report
