#!/usr/bin/env bash
# benchmarks/http3.sh: HTTP/3 hits, levee against Caddy, and levee's HTTP/3 against its
# own HTTP/2, in one run.
#
# One directory holds a 1 KiB and a 100 KiB file. Caddy (Debian's 2.6, `protocols h1 h2
# h3`) serves it with file_server over HTTPS, HTTP/3 included; levee serves it from its
# cache (in front of a cleartext Caddy file_server on the same directory, each object
# warmed and checked to be a HIT over HTTP/3). Both terminate TLS with the same
# self-signed P-256 certificate (openssl).
# The client is `levee bench --h3 -k` (quinn and h3; Debian's h2load has no QUIC): on one
# connection (-c 1) and on many (-c CONNS), one request at a time on each, DURATION
# seconds, ROUNDS times with the servers alternated; medians. Besides req/s, each
# server's own CPU time is read from /proc: requests per server CPU-second.
# HTTP/2 for comparison: levee's h2 over TLS with h2load (-c the same, -m 1: one request
# at a time per connection, as the HTTP/3 client does). A different client, so that
# ratio says where levee's HTTP/3 stands, not a fine difference.
#
# Usage: benchmarks/http3.sh           (about 2 sizes * 2 loads * 3 servers * ROUNDS * DURATION s)
#        The table goes to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   ROUNDS=3 DURATION=10 CONNS=32
#        LEVEE=/path/to/levee (default: cargo build --release, then target/release/levee)
#        BUILD=0 (use target/release/levee as it is)  KEEP_WORK=1 (keep scratch files)
# Needs: caddy, h2load (nghttp2-client), openssl, curl, python3. Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-32}
SERVERS=(levee caddy)
need_tools caddy h2load openssl curl python3
levee_binary
open_report http3

self_signed_cert

ROOT="$WORK/files"
mkdir -p "$ROOT"
# Text of exactly 1 KiB and 100 KiB (python: a `head` closing a pipe fails under pipefail).
for n in 1 100; do
    python3 -c 'import base64, os, sys; n = int(sys.argv[1]) * 1024; sys.stdout.write(base64.b64encode(os.urandom(n)).decode()[:n])' "$n" >"$ROOT/${n}k.txt"
done

declare -A PORT PID
PORT[caddy]=$(free_port)
PORT[files]=$(free_port)
mkdir -p "$WORK/caddy"
cat >"$WORK/caddy/Caddyfile" <<CONF
{
    admin off
    auto_https off
    # The client names an IP address, so it sends no SNI; over QUIC Caddy then finds no
    # certificate unless told which name to assume.
    default_sni bench.test
    servers {
        protocols h1 h2 h3
    }
}
https://127.0.0.1:${PORT[caddy]} {
    tls $CERT $KEY
    root * $ROOT
    header Cache-Control "public, max-age=3600"
    file_server
}
http://127.0.0.1:${PORT[files]} {
    root * $ROOT
    header Cache-Control "public, max-age=3600"
    file_server
}
CONF
start_bg caddy env HOME="$WORK/caddy" XDG_DATA_HOME="$WORK/caddy" XDG_CONFIG_HOME="$WORK/caddy" \
    caddy run --config "$WORK/caddy/Caddyfile" --adapter caddyfile
PID[caddy]=$BG_PID
wait_port "${PORT[files]}" "${PID[caddy]}"
wait_port "${PORT[caddy]}" "${PID[caddy]}"

PORT[levee]=$(free_port)
PLAIN=$(free_port)
start_bg levee "$LEVEE" serve --listen "127.0.0.1:$PLAIN" --listen-tls "127.0.0.1:${PORT[levee]}" \
    --tls-cert "$CERT" --tls-key "$KEY" --backend "http://127.0.0.1:${PORT[files]}" --no-compression
PID[levee]=$BG_PID
wait_port "${PORT[levee]}" "${PID[levee]}"

HZ=$(getconf CLK_TCK)

# h3_run URL CONNS: "rps p99_ms errors" from levee bench --h3.
h3_run() {
    local out
    out=$("$LEVEE" bench "$1" --h3 -k -c "$2" -t 1 -d "${DURATION}s" -q --csv -) || die "levee bench --h3 failed on $1"
    python3 -c '
import csv, sys
row = next(csv.DictReader(sys.stdin))
print(round(float(row["rps"])), "%.1f" % float(row["p99_ms"]), row["errors"])' <<<"$out"
}

# h2_run URL CONNS: "rps 0 errors" from h2load over TLS (h2 by ALPN, one stream at a time).
h2_run() {
    local out
    out=$(h2load -t 1 -c "$2" -m 1 -D "$DURATION" "$1" 2>&1) || true
    python3 -c '
import re, sys
t = sys.stdin.read()
m = re.search(r"finished in [0-9.]+m?s, ([0-9.]+) req/s", t)
e = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored", t)
if not m or not e: sys.exit("h2load: no result\n" + t)
print(round(float(m.group(1))), 0, int(e.group(2)) + int(e.group(3)))' <<<"$out"
}

# Warm each object in levee and check that HTTP/3 gets it from the cache.
for f in 1k 100k; do
    for _ in 1 2; do
        "$LEVEE" bench "https://127.0.0.1:${PORT[levee]}/$f.txt" --h3 -k -c 1 -n 1 -q --csv - >/dev/null ||
            die "levee bench --h3 cannot fetch /$f.txt from levee"
    done
    got=$(curl -sk -o /dev/null -D - "https://127.0.0.1:${PORT[levee]}/$f.txt" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-cache" {print $2}')
    [ "$got" = HIT ] || die "/$f.txt is not a HIT in levee (X-Cache: ${got:-none})"
done
"$LEVEE" bench "https://127.0.0.1:${PORT[caddy]}/1k.txt" --h3 -k -c 1 -n 1 -q --csv - >/dev/null ||
    die "Caddy does not answer HTTP/3 on ${PORT[caddy]} (is it 2.6 with protocols h3?)"

declare -A RPS CPU
CASES=()
for f in 1k 100k; do
    for c in 1 "$CONNS"; do
        CASES+=("$f/$c")
    done
done
FRONTS=(levee caddy levee-h2)
for ((round = 1; round <= ROUNDS; round++)); do
    for case in "${CASES[@]}"; do
        f=${case%/*}
        c=${case#*/}
        n=${#FRONTS[@]}
        for ((k = 0; k < n; k++)); do
            front=${FRONTS[$(((k + round - 1) % n))]}
            server=${front%-h2}
            url="https://127.0.0.1:${PORT[$server]}/$f.txt"
            t0=$(cpu_ticks "${PID[$server]}")
            if [ "$front" = levee-h2 ]; then
                read -r rps _ err <<<"$(h2_run "$url" "$c")"
            else
                read -r rps _ err <<<"$(h3_run "$url" "$c")"
            fi
            t1=$(cpu_ticks "${PID[$server]}")
            cpu=$(awk -v r="$rps" -v d="$DURATION" -v t=$((t1 - t0)) -v hz="$HZ" 'BEGIN { s = t / hz; if (s > 0) printf "%.0f", r * d / s; else print 0 }')
            RPS[$front/$case]="${RPS[$front/$case]:-} $rps"
            CPU[$front/$case]="${CPU[$front/$case]:-} $cpu"
            log "round $round/$ROUNDS $case $front: $rps req/s, $cpu req per server CPU-s, errors $err"
            [ "${err:-0}" = 0 ] || log "  ($err errors)"
        done
    done
done

report "# HTTP/3 hits: levee vs Caddy, and levee's HTTP/2 ($(date -u '+%Y-%m-%d %H:%M UTC'))" ""
machine_info
report "- levee $("$LEVEE" --version | head -1), Caddy $(caddy version | cut -d' ' -f1), h2load $(h2load --version 2>&1 | head -1 | awk '{print $NF}')" \
    "- \`benchmarks/http3.sh\`: ROUNDS=$ROUNDS DURATION=${DURATION}s CONNS=$CONNS; client \`levee bench --h3 -k -t 1\` (HTTP/3) and \`h2load -t 1 -m 1\` (levee's HTTP/2 over TLS); medians" \
    "- levee: cache hits of the file (in front of a cleartext Caddy file_server); Caddy: file_server over HTTPS with \`protocols h1 h2 h3\`" \
    "" \
    "| object / connections | levee h3 req/s | Caddy h3 req/s | levee/Caddy | levee h3 req per CPU-s | Caddy h3 req per CPU-s | levee/Caddy per CPU-s | levee h2 req/s | levee h3/h2 |" \
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for case in "${CASES[@]}"; do
    # shellcheck disable=SC2086
    l=$(median ${RPS[levee/$case]}); c=$(median ${RPS[caddy/$case]}); h2=$(median ${RPS[levee-h2/$case]})
    # shellcheck disable=SC2086
    lc=$(median ${CPU[levee/$case]}); cc=$(median ${CPU[caddy/$case]})
    report "| ${case%/*} / ${case#*/} | $l | $c | $(ratio "$l" "$c") | $lc | $cc | $(ratio "$lc" "$cc") | $h2 | $(ratio "$l" "$h2") |"
done
report "" "Every run: $(for k in "${!RPS[@]}"; do printf '%s:%s; ' "$k" "${RPS[$k]}"; done)"
record_report
