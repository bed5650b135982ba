#!/usr/bin/env bash
# benchmarks/seeds.sh: the seed documents' experiment (../shared/seeds), reproduced.
#
# An origin (`levee origin`) that takes 20 ms per page and sets Set-Cookie: PHPSESSID on
# every response, hit by 64 concurrent clients (wrk -t 1 -c 64), directly and through
# levee, in two cases:
#   (a) MoniWiki's patch: Cache-Control: public, s-maxage=3, max-age=0; levee with defaults.
#   (b) XE: Cache-Control: public, must-revalidate, post-check=0, pre-check=0;
#       levee with --micro-cache 3s.
# For reference, Varnish with a hand-written VCL that drops the PHPSESSID Set-Cookie for
# anonymous requests (and in (b) sets a 3 s TTL). Servers alternate, ROUNDS runs each,
# medians reported.
#
# Usage: benchmarks/seeds.sh             (from anywhere; about 4.5 minutes)
#        The table goes to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   ROUNDS=5 DURATION=8 CONNS=64 DELAY=20ms WORKERS=5 (pages the origin renders at
#        once, like php-fpm's pm.max_children; 0 = unlimited)
#        LEVEE=/path/to/levee (default: cargo build --release, then target/release/levee)
#        BUILD=0 (use target/release/levee as it is)  KEEP_WORK=1 (keep scratch files)
# Needs: wrk, varnish (Debian), curl, python3. Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-8}
CONNS=${CONNS:-64}
DELAY=${DELAY:-20ms}
WORKERS=${WORKERS:-5}
SERVERS=(direct levee varnish)

need_tools wrk varnishd varnishstat curl python3
levee_binary
open_report seeds

# write_vcl FILE BACKEND_PORT EXTRA: the hand-written cookie rules of the seed's Varnish setup.
write_vcl() {
    cat >"$1" <<EOF
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$2"; }
sub vcl_recv {
    # A request with a session cookie is a logged-in user: never cached.
    if (req.http.Cookie ~ "(^|;\\s*)PHPSESSID=") { return (pass); }
    # Anonymous: other cookies (analytics, ...) must not prevent caching.
    unset req.http.Cookie;
}
sub vcl_backend_response {
    # An anonymous request whose response only starts a session: drop the cookie, cache.
    if (!bereq.http.Cookie && beresp.http.Set-Cookie ~ "^PHPSESSID=") {
        unset beresp.http.Set-Cookie;
        $3
    }
}
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; }
}
EOF
}

declare -A PORT PID RES_RPS RES_P99 RES_RATIO RES_ORIG RES_ERR RES_CHECK
declare -A CASE_DESC=(
    [a]="(a) origin: public, s-maxage=3, max-age=0; levee: defaults"
    [b]="(b) origin: public, must-revalidate, post-check=0, pre-check=0; levee: --micro-cache 3s"
)

# check SERVER URL: what an anonymous client sees on its second request, and what a
# client with a session cookie gets.
check() {
    local s=$1 url=$2 hdrs cache cookie sess
    curl -s -o /dev/null "$url"
    hdrs=$(curl -s -o /dev/null -D - "$url" | tr -d '\r')
    cache=$(awk -F': ' 'tolower($1) == "x-cache" {print $2}' <<<"$hdrs")
    cookie=$(grep -qi '^set-cookie: PHPSESSID' <<<"$hdrs" && echo "Set-Cookie: PHPSESSID" || echo "no Set-Cookie")
    sess=$(curl -s -H 'Cookie: PHPSESSID=bench-user' "$url" | grep -q 'logged in as session bench-user' &&
        echo "session cookie reaches the origin" || echo "SESSION COOKIE GOT A CACHED PAGE")
    if [ "$s" = direct ]; then echo "$cookie"; else echo "2nd anonymous request: ${cache:-no X-Cache}, $cookie; $sess"; fi
}

run_case() {
    local c=$1 cc=$2 vcl_extra=$3 s r k line a b e o0 o1
    shift 3
    log "case ($c): starting origin ($DELAY per page, PHPSESSID on every response), levee, varnish"
    PORT[direct]=$(free_port)
    # shellcheck disable=SC2046
    start_origin "origin-$c" "${PORT[direct]}" --delay "$DELAY" $(origin_workers "$WORKERS") --cache-control "$cc"
    PID[direct]=$ORIGIN_PID
    PORT[levee]=$(free_port)
    start_levee "levee-$c" "${PORT[levee]}" "${PORT[direct]}" "$@"
    PID[levee]=$LEVEE_PID
    PORT[varnish]=$(free_port)
    write_vcl "$WORK/seeds-$c.vcl" "${PORT[direct]}" "$vcl_extra"
    start_varnish "varnish-$c" "${PORT[varnish]}" "$WORK/seeds-$c.vcl" malloc,256M
    PID[varnish]=$VARNISH_PID
    for s in "${SERVERS[@]}"; do
        RES_CHECK[$c,$s]=$(check "$s" "http://127.0.0.1:${PORT[$s]}/page-$c")
        log "  $s: ${RES_CHECK[$c,$s]}"
    done
    local -A rps p99 orig err
    for ((r = 0; r < ROUNDS; r++)); do
        for ((k = 0; k < ${#SERVERS[@]}; k++)); do
            s=${SERVERS[(r + k) % ${#SERVERS[@]}]}
            o0=$(origin_requests "${PORT[direct]}")
            line=$(run_wrk "http://127.0.0.1:${PORT[$s]}/page-$c" "$DURATION" "$CONNS")
            o1=$(origin_requests "${PORT[direct]}")
            read -r a b _ _ e <<<"$line"
            rps[$s]+="$a "
            p99[$s]+="$b "
            orig[$s]+="$((o1 - o0)) "
            err[$s]=$((${err[$s]:-0} + e))
            log "  round $((r + 1))/$ROUNDS $s: $a req/s, p99 $b ms, $((o1 - o0)) origin requests, errors $e"
        done
    done
    for s in "${SERVERS[@]}"; do
        RES_RPS[$c,$s]=$(median ${rps[$s]})
        RES_P99[$c,$s]=$(median ${p99[$s]})
        RES_ORIG[$c,$s]=$(median ${orig[$s]})
        RES_ERR[$c,$s]=${err[$s]}
    done
    for s in "${SERVERS[@]}"; do
        RES_RATIO[$c,$s]=$(awk -v a="${RES_RPS[$c,$s]}" -v b="${RES_RPS[$c,direct]}" 'BEGIN {printf "%.1f", a / b}')
    done
    for s in origin varnish levee; do
        if [ "$s" = origin ]; then stop_pid "${PID[direct]}"; else stop_pid "${PID[$s]}"; fi
    done
}

run_case a "public, s-maxage=3, max-age=0" ""
run_case b "public, must-revalidate, post-check=0, pre-check=0" "set beresp.ttl = 3s;" --micro-cache 3s

if [ -n "$(origin_workers "$WORKERS")" ] && [ "$WORKERS" != 0 ]; then
    par=$((WORKERS < CONNS ? WORKERS : CONNS))
    ORIGIN_NOTE="- origin: \`levee origin --delay $DELAY --workers $WORKERS\`: $WORKERS pages rendered at once (like php-fpm's pm.max_children), each sleeping $DELAY without using CPU, so direct is bounded by $par / $DELAY = $(awk -v c="$par" -v d="${DELAY%ms}" 'BEGIN {printf "%d", c * 1000 / d}') req/s; the other clients queue."
else
    ORIGIN_NOTE="- origin: \`levee origin --delay $DELAY\`: sleeps $DELAY per page without using CPU and serves all requests at once, so direct is bounded by $CONNS clients / $DELAY = $(awk -v c="$CONNS" -v d="${DELAY%ms}" 'BEGIN {printf "%d", c * 1000 / d}') req/s."
fi
report "# The seeds' experiment: 64 clients, 20 ms origin with PHPSESSID on every page ($(date '+%Y-%m-%d %H:%M'))" ""
machine_info
report "- method: wrk -t 1 -c $CONNS -d ${DURATION}s per run on one URL, $ROUNDS runs per server, servers alternated" \
    "  (direct, levee, varnish, then rotated by one each round); medians. \"origin req/run\" counts" \
    "  the requests the origin received during one run (its /__origin/stats)." \
    "$ORIGIN_NOTE" \
    "- varnish: -s malloc,256M, VCL: pass requests with PHPSESSID, drop other request cookies, drop" \
    "  Set-Cookie: PHPSESSID from responses to anonymous requests (and in (b) set beresp.ttl = 3s);" \
    "  Varnish's default grace (10 s) otherwise." \
    "- The machine is noisy (2 CPUs shared with other jobs; wrk itself takes one): compare medians." ""
report "| case | server | req/s (median) | p99 ms (median) | x direct | origin req/run (median) | errors |" \
    "|---|---|---:|---:|---:|---:|---:|"
for c in a b; do
    for s in "${SERVERS[@]}"; do
        report "| ($c) | $s | ${RES_RPS[$c,$s]} | ${RES_P99[$c,$s]} | ${RES_RATIO[$c,$s]} | ${RES_ORIG[$c,$s]} | ${RES_ERR[$c,$s]} |"
    done
done
report "" "Cases and checks made before measuring:" ""
for c in a b; do
    report "- ${CASE_DESC[$c]}"
    for s in "${SERVERS[@]}"; do report "  - $s: ${RES_CHECK[$c,$s]}"; done
done
report "" "- levee / direct: (a) ${RES_RATIO[a,levee]}x, (b) ${RES_RATIO[b,levee]}x; Varnish / direct: (a) ${RES_RATIO[a,varnish]}x, (b) ${RES_RATIO[b,varnish]}x." ""
log "report written to $OUT_FILE"
record_report
