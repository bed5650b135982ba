#!/usr/bin/env bash
# benchmarks/hits.sh: cache hits through levee, Varnish and nginx proxy_cache, in one run.
#
# 1. Hit throughput and p99 latency for a 1 KiB and a 100 KiB object: each server in
#    front of `levee origin` (Cache-Control: public, max-age=3600, no cookie), the object
#    warmed and checked to be a HIT, then wrk -t 1 -c 64 -d 10s, ROUNDS times with the
#    servers alternated (the first server rotates every round); medians are reported.
#    nginx-static is nginx serving the same bytes as a file (sendfile, open_file_cache):
#    no cache, no origin, the fastest way there is to serve them.
# 2. Memory: fresh servers, 100,000 distinct 1 KiB objects stored in each (wrk + fill.lua,
#    then a second pass that must be all hits), RSS (VmRSS, summed over each server's
#    processes) after a warm-up and after the fill.
#
# Usage: benchmarks/hits.sh              (from anywhere; about 8 minutes)
#        The table goes to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   ROUNDS=5 DURATION=10 CONNS=64 OBJECTS=100000 MEMORY=1 (0: hits only)
#        LEVEE=/path/to/levee (default: cargo build --release, then target/release/levee)
#        BUILD=0 (use target/release/levee as it is)  KEEP_WORK=1 (keep scratch files)
#        BASELINE=/path/to/older/levee: also measure that binary's hits, alternated with the
#        others, as "levee-base" (a before/after run of a change in one table)
# Needs: wrk, varnish, nginx-light (Debian), curl, python3. Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
OBJECTS=${OBJECTS:-100000}
# nginx-static: nginx serving the object as a file itself (no cache in between): what a
# large hit should at least match.
SERVERS=(levee varnish nginx nginx-static)
# Memory is also measured with compression off: Varnish and nginx store what the origin
# sent, levee by default stores text compressed.
MEM_SERVERS=(levee levee-raw varnish nginx)

need_tools wrk varnishd varnishstat nginx curl python3
levee_binary
if [ -n "${BASELINE:-}" ]; then
    [ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable levee"
    cp "$BASELINE" "$WORK/levee-base"
    SERVERS+=(levee-base)
fi
open_report hits

# start_all LABEL BODY_SIZE: one origin and the three caches in front of it.
# Sets PORT[server], PID[server], ORIGIN_PORT, and VARNISH_DIR / NGINX_DIR.
declare -A PORT PID
start_all() {
    local label=$1 size=$2
    ORIGIN_PORT=$(free_port)
    # shellcheck disable=SC2046
    start_origin "origin-$label" "$ORIGIN_PORT" --delay 0ms --no-session $(origin_workers 0) \
        --cache-control "public, max-age=3600" --body-size "$size"
    PID[origin]=$ORIGIN_PID
    PORT[levee]=$(free_port)
    start_levee "levee-$label" "${PORT[levee]}" "$ORIGIN_PORT" --cache-size 1GiB
    PID[levee]=$LEVEE_PID
    PORT[levee-raw]=$(free_port)
    start_levee "levee-raw-$label" "${PORT[levee-raw]}" "$ORIGIN_PORT" --cache-size 1GiB --no-compression
    PID[levee-raw]=$LEVEE_PID
    if [ -n "${BASELINE:-}" ]; then
        PORT[levee-base]=$(free_port)
        LEVEE="$WORK/levee-base" start_levee "levee-base-$label" "${PORT[levee-base]}" "$ORIGIN_PORT" --cache-size 1GiB
        PID[levee-base]=$LEVEE_PID
    fi
    PORT[varnish]=$(free_port)
    xcache_vcl "$WORK/hits-$label.vcl" "$ORIGIN_PORT"
    start_varnish "varnish-$label" "${PORT[varnish]}" "$WORK/hits-$label.vcl" malloc,1G
    PID[varnish]=$VARNISH_PID
    # The object's very bytes, as a file (started before nginx: NGINX_DIR is nginx's).
    mkdir -p "$WORK/static-$label"
    curl -sf -o "$WORK/static-$label/hit-$label" "http://127.0.0.1:$ORIGIN_PORT/hit-$label" ||
        die "cannot fetch /hit-$label from the origin"
    PORT[nginx-static]=$(free_port)
    start_nginx_static "nginx-static-$label" "${PORT[nginx-static]}" "$WORK/static-$label"
    PID[nginx-static]=$NGINX_PID
    PORT[nginx]=$(free_port)
    start_nginx "nginx-$label" "${PORT[nginx]}" "$ORIGIN_PORT"
    PID[nginx]=$NGINX_PID
}
stop_all() {
    local s
    for s in "${MEM_SERVERS[@]}" nginx-static origin; do stop_pid "${PID[$s]}"; done
    if [ -n "${PID[levee-base]:-}" ]; then stop_pid "${PID[levee-base]}"; unset 'PID[levee-base]'; fi
}

cache_header() { # cache_header SERVER URL: the server's hit/miss header
    case $1 in
        nginx) header_of "$2" X-Cache-Status ;;
        *) header_of "$2" X-Cache ;;
    esac
}

# ---- 1. hit throughput ------------------------------------------------------------------

declare -A RES_RPS RES_P99 RES_RUNS RES_ERR
hit_phase() {
    local label=$1 size=$2 s r k url h bytes line before after
    log "hits, $label object: starting origin, levee, varnish, nginx"
    start_all "$label" "$size"
    for s in "${SERVERS[@]}"; do
        url="http://127.0.0.1:${PORT[$s]}/hit-$label"
        curl -s -o /dev/null "$url"
        bytes=$(curl -s -o /dev/null -w '%{size_download}' "$url")
        if [ "$s" = nginx-static ]; then
            h="file"
            [ "$bytes" -ge "$size" ] || die "nginx-static sends $bytes bytes for $url"
        else
            h=$(cache_header "$s" "$url")
            [ "${h:0:3}" = HIT ] || die "$s does not answer $url from cache (cache header: '$h')"
        fi
        log "  $s: second request is a $h, $bytes bytes"
    done
    before=$(origin_requests "$ORIGIN_PORT")
    local -A rps p99 err
    for ((r = 0; r < ROUNDS; r++)); do
        for ((k = 0; k < ${#SERVERS[@]}; k++)); do
            s=${SERVERS[(r + k) % ${#SERVERS[@]}]}
            line=$(run_wrk "http://127.0.0.1:${PORT[$s]}/hit-$label" "$DURATION" "$CONNS")
            read -r a b _ _ e <<<"$line"
            rps[$s]+="$a "
            p99[$s]+="$b "
            err[$s]=$((${err[$s]:-0} + e))
            log "  round $((r + 1))/$ROUNDS $s: $a req/s, p99 $b ms, errors $e"
        done
    done
    after=$(origin_requests "$ORIGIN_PORT")
    for s in "${SERVERS[@]}"; do
        RES_RPS[$label,$s]=$(median ${rps[$s]})
        RES_P99[$label,$s]=$(median ${p99[$s]})
        RES_RUNS[$label,$s]="${rps[$s]% }"
        RES_ERR[$label,$s]=${err[$s]}
    done
    RES_ORIGIN[$label]=$((after - before))
    stop_all
}

declare -A RES_ORIGIN
hit_phase 1KiB 1024
hit_phase 100KiB 102400

# ---- 2. memory for OBJECTS cached 1 KiB objects -------------------------------------

# fill SERVER PORT: request /obj/1../obj/OBJECTS once; prints "responses hits bad secs".
fill() {
    local port=$2 marker="$WORK/fill-$1.done" wp out
    rm -f "$marker"
    FILL_N=$OBJECTS FILL_MARKER=$marker wrk -t 1 -c "$CONNS" -d 300s --timeout 10s \
        -s "$BENCH_DIR/fill.lua" "http://127.0.0.1:$port/" >"$WORK/fill-$1.out" 2>&1 &
    wp=$!
    while [ ! -e "$marker" ] && kill -0 "$wp" 2>/dev/null; do sleep 0.2; done
    kill -INT "$wp" 2>/dev/null || true
    wait "$wp" || true
    out=$(grep '^FILL' "$WORK/fill-$1.out") || { cat "$WORK/fill-$1.out" >&2; die "fill of $1 failed"; }
    sed 's/FILL responses=\([0-9]*\) hits=\([0-9]*\) bad=\([0-9]*\) secs=\([0-9.]*\)/\1 \2 \3 \4/' <<<"$out"
}

declare -A MEM_BEFORE MEM_AFTER MEM_FILL MEM_CHECK
if [ "${MEMORY:-1}" = 1 ]; then
log "memory: fresh servers, $OBJECTS distinct 1 KiB objects each"
start_all mem 1024
for s in "${MEM_SERVERS[@]}"; do
    port=${PORT[$s]}
    # Warm-up: one object, hit by 64 connections for 3 s (threads, buffers, pools).
    run_wrk "http://127.0.0.1:$port/warm" 3 "$CONNS" >/dev/null
    sleep 1
    MEM_BEFORE[$s]=$(rss_kb "${PID[$s]}")
    o0=$(origin_requests "$ORIGIN_PORT")
    res=$(fill "$s" "$port")
    read -r n h bad secs <<<"$res"
    o1=$(origin_requests "$ORIGIN_PORT")
    MEM_FILL[$s]="$secs s, $((o1 - o0)) origin requests, $bad errors"
    # Second pass: every object must now be a hit (none evicted or left out).
    res=$(fill "$s" "$port")
    read -r n2 h2 bad2 _ <<<"$res"
    o2=$(origin_requests "$ORIGIN_PORT")
    check="second pass: $((n2 - h2)) misses, $((o2 - o1)) origin requests, $bad2 errors"
    case $s in
        varnish) check+="; MAIN.n_object $(varnish_stat "$VARNISH_DIR" MAIN.n_object), n_lru_nuked $(varnish_stat "$VARNISH_DIR" MAIN.n_lru_nuked)" ;;
        nginx) check+="; $(find "$NGINX_DIR/cache" -type f | wc -l) files, $(du -sm "$NGINX_DIR/cache" | cut -f1) MB on disk" ;;
        levee*) check+="; /obj/1: X-Cache $(header_of "http://127.0.0.1:$port/obj/1" X-Cache)" ;;
    esac
    MEM_CHECK[$s]=$check
    # Freed memory goes back to the kernel late (levee's jemalloc after ~10 s): let every
    # server settle the same time before reading its RSS.
    sleep "${SETTLE:-12}"
    MEM_AFTER[$s]=$(rss_kb "${PID[$s]}")
    log "  $s: RSS $(mib "${MEM_BEFORE[$s]}") -> $(mib "${MEM_AFTER[$s]}") MiB; fill ${MEM_FILL[$s]}; $check"
done
VARNISH_PROCS=$(( $(descendants "${PID[varnish]}" | wc -l) + 1 ))
NGINX_PROCS=$(( $(descendants "${PID[nginx]}" | wc -l) + 1 ))
stop_all
fi

# ---- report -------------------------------------------------------------------------------


report "# Cache hits: levee vs Varnish vs nginx ($(date '+%Y-%m-%d %H:%M'))" ""
machine_info
report "- method: wrk -t 1 -c $CONNS -d ${DURATION}s per run, $ROUNDS runs per server and size, servers" \
    "  alternated (levee, varnish, nginx, then rotated by one each round); medians. All three run" \
    "  at once on 127.0.0.1 in front of one \`levee origin\` (Cache-Control: public, max-age=3600)." \
    "- levee: \`levee serve --cache-size 1GiB\` (defaults: one worker thread per CPU). Varnish: -s malloc,1G," \
    "  default thread pools, built-in VCL + X-Cache header. nginx: proxy_cache on disk, worker_processes 2," \
    "  sendfile on, tcp_nopush off, access_log off, keepalive_requests 1000000." \
    "- The machine is noisy (2 CPUs shared with other jobs; wrk itself takes one): compare medians," \
    "  not single runs." ""
report "| object | server | req/s (median) | p99 ms (median) | req/s of each run | errors |" \
    "|---|---|---:|---:|---|---:|"
for label in 1KiB 100KiB; do
    for s in "${SERVERS[@]}"; do
        report "| $label | $s | ${RES_RPS[$label,$s]} | ${RES_P99[$label,$s]} | ${RES_RUNS[$label,$s]} | ${RES_ERR[$label,$s]} |"
    done
done
report ""
for label in 1KiB 100KiB; do
    report "- $label: levee/Varnish req/s = $(ratio "${RES_RPS[$label,levee]}" "${RES_RPS[$label,varnish]}"), levee/nginx = $(ratio "${RES_RPS[$label,levee]}" "${RES_RPS[$label,nginx]}"), levee/nginx static file = $(ratio "${RES_RPS[$label,levee]}" "${RES_RPS[$label,nginx-static]}"); origin requests during the measured runs: ${RES_ORIGIN[$label]} (0 = every measured request was a hit)."
    if [ -n "${BASELINE:-}" ]; then
        report "- $label: levee/levee-base req/s = $(ratio "${RES_RPS[$label,levee]}" "${RES_RPS[$label,levee-base]}") (levee-base: $BASELINE)."
    fi
done
if [ "${MEMORY:-1}" = 1 ]; then
report "" "## Memory to hold $OBJECTS cached 1 KiB objects" "" \
    "RSS = VmRSS from /proc/PID/status summed over the server's processes (Varnish: manager +" \
    "child, $VARNISH_PROCS processes; nginx: master + workers + cache manager/loader, $NGINX_PROCS processes)," \
    "after a 3 s warm-up on one URL, and again ${SETTLE:-12} s after storing /obj/1../obj/$OBJECTS and reading them back." \
    "levee-raw is levee with --no-compression (stores the 1 KiB bodies as sent, as Varnish does); levee by" \
    "default stores text gzip-compressed and keeps uncompressed copies for clients like wrk in a bounded" \
    "side cache (32 MiB)." ""
report "| server | RSS after warm-up (MiB) | RSS with $OBJECTS objects (MiB) | growth (MiB) | fill | check |" \
    "|---|---:|---:|---:|---|---|"
for s in "${MEM_SERVERS[@]}"; do
    report "| $s | $(mib "${MEM_BEFORE[$s]}") | $(mib "${MEM_AFTER[$s]}") | $(mib $((MEM_AFTER[$s] - MEM_BEFORE[$s]))) | ${MEM_FILL[$s]} | ${MEM_CHECK[$s]} |"
done
report "" "- levee/Varnish RSS with $OBJECTS objects = $(ratio "${MEM_AFTER[levee]}" "${MEM_AFTER[varnish]}"); with compression off $(ratio "${MEM_AFTER[levee-raw]}" "${MEM_AFTER[varnish]}")." \
    "- nginx keeps cached bodies in files on disk (the kernel's page cache holds them, outside" \
    "  nginx's RSS), and only keys in shared memory: its RSS is not comparable with levee's or Varnish's." ""
fi
log "report written to $OUT_FILE"
record_report
