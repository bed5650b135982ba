#!/usr/bin/env bash
# benchmarks/scale.sh: levee at scale (issue 23): a million objects in memory, large hits,
# several nodes sharing one Redis.
#
# Sections (the first argument; default all):
#   memory  For each size in HEADER_BYTES (100 300 600: the origin's header fields, from
#           a site's per-page ETag and Last-Modified to its shared security policies),
#           fresh servers, filled one at a time with OBJECTS (1,000,000) distinct
#           1 KiB objects (/o/1../o/N, wrk + fill.lua, CONNS connections): levee as it
#           runs by default (stores text gzip-compressed), levee --no-compression (stores
#           bodies as sent, as Varnish does) and Varnish -s malloc. The count is checked
#           (levee_cache_objects from levee's /metrics, Varnish's MAIN.n_object). Then
#           RSS, the overhead per object = (RSS - RSS after warm-up - N x 1024) / N. Then,
#           with every server still holding its objects (about 8 GiB of RAM for the five),
#           hits: random over all N URLs against one hot URL (the same wrk script, with
#           one URL), ROUNDS rounds of DURATION s each, the servers alternated round by
#           round; medians and their ratio.
#   large   100 KiB hits, levee vs nginx proxy_cache (as hits.sh), ROUNDS runs alternated.
#   nodes   1, 2 and 3 levee nodes sharing one redis-server (--cache-redis) against as
#           many independent nodes, on a Zipf list of REQUESTS requests over URLS URLs
#           (exponent ZIPF_S, fixed seed), sent round-robin: request i goes to node
#           i mod n, one wrk per node. Hit ratio (X-Cache), req/s, backend requests
#           (`levee origin`'s counter). Skipped when the levee binary has no --cache-redis.
#
# Usage: benchmarks/scale.sh [memory|large|nodes|all]   (memory about 15 minutes,
#        large 3, nodes 5). The table goes to stdout, benchmarks/out/ and the end of
#        BENCHMARKS.md (RECORD=0: not there).
# Env:   OBJECTS=1000000 HEADER_BYTES="100 300 600" ROUNDS=5 DURATION=10 CONNS=64 SETTLE=12 FILL_LIMIT=900
#        URLS=100000 REQUESTS=300000 ZIPF_S=1.0 MEM_SERVERS="levee levee-raw varnish"
#        LEVEE=/path/to/levee, BUILD=0, KEEP_WORK=1: as hits.sh. BASELINE=/path/to/older/levee:
#        large also measures that binary, alternated with the others, as levee-base; memory
#        measures it when MEM_SERVERS names levee-base (as levee) or levee-base-raw.
# Needs: wrk, varnish, nginx-light, redis-server (Debian; installed with apt-get when
#        missing and run as root), curl, python3. Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

SECTION=${1:-all}
case $SECTION in
    memory | large | nodes | all) ;;
    *) echo "usage: $0 [memory|large|nodes|all]" >&2; exit 2 ;;
esac
OBJECTS=${OBJECTS:-1000000}
# memory: one pass per size of the origin's header fields (levee origin --header-bytes;
# 0: its minimal fields, about 136 bytes).
HEADER_BYTES=${HEADER_BYTES:-100 300 600}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
SETTLE=${SETTLE:-12}
FILL_LIMIT=${FILL_LIMIT:-900}
URLS=${URLS:-100000}
REQUESTS=${REQUESTS:-300000}
ZIPF_S=${ZIPF_S:-1.0}
read -r -a MEM_SERVERS <<<"${MEM_SERVERS:-levee levee-raw varnish}"

# Debian packages for the tools a section needs, installed when missing (as root).
ensure_tools() {
    local t pkgs=()
    for t in "$@"; do
        command -v "$t" >/dev/null 2>&1 || [ -x "/usr/sbin/$t" ] && continue
        case $t in
            varnishd | varnishstat) pkgs+=(varnish) ;;
            nginx) pkgs+=(nginx-light) ;;
            redis-server | redis-cli) pkgs+=(redis-server) ;;
            *) pkgs+=("$t") ;;
        esac
    done
    if [ ${#pkgs[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "installing ${pkgs[*]} with apt-get"
        apt-get install -y "${pkgs[@]}" >&2 || { apt-get update >&2 && apt-get install -y "${pkgs[@]}" >&2; } || true
    fi
    need_tools "$@"
}

tools=(wrk curl python3)
case $SECTION in
    memory) tools+=(varnishd varnishstat) ;;
    large) tools+=(nginx) ;;
    nodes) tools+=(redis-server) ;;
    all) tools+=(varnishd varnishstat nginx redis-server) ;;
esac
ensure_tools "${tools[@]}"
levee_binary
open_report "scale-$SECTION"

want() { [ "$SECTION" = all ] || [ "$SECTION" = "$1" ]; }

# random.lua: GET /o/<random 1..RAND_N> (RAND_N=1: always /o/1), fixed seed, with
# Accept-Encoding: gzip as browsers send it (levee by default stores text compressed:
# without it every random hit would measure a gzip decode, not the store); prints
# report.lua's RESULT line. The hot and the random run pay the same Lua per request.
cat >"$WORK/random.lua" <<'EOF'
local n = tonumber(os.getenv("RAND_N") or "1")
local prefix = os.getenv("RAND_PREFIX") or "/o/"
local headers = { ["Accept-Encoding"] = "gzip" }
math.randomseed(42)
function request()
  return wrk.format("GET", prefix .. math.random(1, n), headers)
end
EOF
cat "$WORK/report.lua" >>"$WORK/random.lua"

report "# Scale: $SECTION ($(date '+%Y-%m-%d %H:%M'))" ""
machine_info
report ""

# ---- memory: a million 1 KiB objects ------------------------------------------------------

# fill_objects NAME PORT: /o/1../o/OBJECTS once; prints "responses hits bad secs".
fill_objects() {
    local marker="$WORK/fill-$1.done" wp out
    rm -f "$marker"
    FILL_N=$OBJECTS FILL_PREFIX=/o/ FILL_MARKER=$marker wrk -t 1 -c "$CONNS" -d "${FILL_LIMIT}s" \
        --timeout 10s -s "$BENCH_DIR/fill.lua" "http://127.0.0.1:$2/" >"$WORK/fill-$1.out" 2>&1 &
    wp=$!
    while [ ! -e "$marker" ] && kill -0 "$wp" 2>/dev/null; do sleep 0.5; done
    kill -INT "$wp" 2>/dev/null || true
    wait "$wp" || true
    out=$(grep '^FILL' "$WORK/fill-$1.out") || { cat "$WORK/fill-$1.out" >&2; die "fill of $1 failed"; }
    sed 's/FILL responses=\([0-9]*\) hits=\([0-9]*\) bad=\([0-9]*\) secs=\([0-9.]*\)/\1 \2 \3 \4/' <<<"$out"
}

memory_section() {
    local hb=$1 s port admin pid origin o0 o1 res n h bad secs count r line a e hflags=() hwire
    local -A before after fillinfo counted rnd hot rndruns hotruns misses ports pids
    origin=$(free_port)
    [ "$hb" -gt 0 ] && hflags=(--header-bytes "$hb")
    # shellcheck disable=SC2046
    start_origin origin-mem "$origin" --delay 0ms --no-session $(origin_workers 0) \
        --cache-control "public, max-age=3600" --body-size 1024 "${hflags[@]}"
    local origin_pid=$ORIGIN_PID
    # The header section as the origin sends it (fields and their CRLFs, no status line).
    hwire=$(curl -s -D - -o /dev/null "http://127.0.0.1:$origin/o/1" | tr -d '\r' | sed 1d | awk 'NF {t += length($0) + 2} END {print t}')
    log "memory: origin header fields of $hwire bytes"
    for s in "${MEM_SERVERS[@]}"; do
        port=$(free_port)
        case $s in
            levee | levee-raw | levee-base | levee-base-raw)
                admin=$(free_port)
                local extra=() bin=$LEVEE
                case $s in *-raw) extra=(--no-compression) ;; esac
                if [[ $s == levee-base* ]]; then
                    [ -x "${BASELINE:-}" ] || die "$s needs BASELINE=/path/to/older/levee"
                    # One copy for levee-base and levee-base-raw (a running one is busy).
                    [ -x "$WORK/levee-base" ] || cp "$BASELINE" "$WORK/levee-base"
                    bin=$WORK/levee-base
                fi
                LEVEE=$bin start_levee "$s" "$port" "$origin" --cache-size 4GiB --admin-listen "127.0.0.1:$admin" "${extra[@]}"
                pid=$LEVEE_PID ;;
            varnish)
                xcache_vcl "$WORK/scale.vcl" "$origin"
                start_varnish varnish-mem "$port" "$WORK/scale.vcl" malloc,4G
                pid=$VARNISH_PID ;;
            *) die "unknown server $s (MEM_SERVERS: levee levee-raw varnish, and levee-base levee-base-raw with BASELINE)" ;;
        esac
        log "memory, $s: warm-up, then $OBJECTS objects"
        run_wrk "http://127.0.0.1:$port/warm" 3 "$CONNS" >/dev/null
        sleep 1
        before[$s]=$(rss_kb "$pid")
        o0=$(origin_requests "$origin")
        res=$(fill_objects "$s" "$port")
        read -r n h bad secs <<<"$res"
        o1=$(origin_requests "$origin")
        case $s in
            varnish) count="n_object $(varnish_stat "$VARNISH_DIR" MAIN.n_object), n_lru_nuked $(varnish_stat "$VARNISH_DIR" MAIN.n_lru_nuked)" ;;
            *) count="levee_cache_objects $(levee_metric "$admin" levee_cache_objects), evictions $(levee_metric "$admin" levee_cache_evictions_total)" ;;
        esac
        fillinfo[$s]="$secs s, $((o1 - o0)) origin requests, $bad errors"
        counted[$s]=$count
        sleep "$SETTLE"
        after[$s]=$(rss_kb "$pid")
        log "  $s: RSS $(mib "${before[$s]}") -> $(mib "${after[$s]}") MiB; fill ${fillinfo[$s]}; $count"
        ports[$s]=$port
        pids[$s]=$pid
        misses[$s]=0
    done
    # Hits, once every server holds its objects (each keeps them: RSS was measured
    # above): random over every object and one hot object, the servers' runs
    # alternated round by round, so that a slower minute of this shared machine falls on
    # all of them alike.
    local nservers=${#MEM_SERVERS[@]} k
    for ((r = 0; r < ROUNDS; r++)); do
        for ((k = 0; k < nservers; k++)); do
            s=${MEM_SERVERS[(r + k) % nservers]}
            for kind in random hot; do
                if [ "$kind" = random ]; then export RAND_N=$OBJECTS; else export RAND_N=1; fi
                o0=$(origin_requests "$origin")
                line=$(run_wrk "http://127.0.0.1:${ports[$s]}/" "$DURATION" "$CONNS" "$WORK/random.lua")
                misses[$s]=$((misses[$s] + $(origin_requests "$origin") - o0))
                read -r a _ _ _ e <<<"$line"
                if [ "$kind" = random ]; then rndruns[$s]+="$a "; else hotruns[$s]+="$a "; fi
                log "  round $((r + 1))/$ROUNDS $s $kind: $a req/s, errors $e"
            done
        done
    done
    for s in "${MEM_SERVERS[@]}"; do
        rnd[$s]=$(median ${rndruns[$s]})
        hot[$s]=$(median ${hotruns[$s]})
        stop_pid "${pids[$s]}"
    done
    stop_pid "$origin_pid"

    report "**Memory and hits with $OBJECTS objects of 1 KiB, $hwire bytes of header fields**" "" \
        "- origin: \`levee origin --body-size 1024 ${hflags[*]}\`: $hwire bytes of header fields per response" \
        "  (per object: ETag, Last-Modified, Content-Length; the same on every object: the rest)." \
        "- method: servers filled one at a time in front of \`levee origin --body-size 1024\` (bodies of" \
        "  1,023 to about 1,030 bytes, \`Cache-Control: public, max-age=3600\`); 3 s of hits on one URL," \
        "  RSS (VmRSS summed over the server's processes); /o/1../o/$OBJECTS once (wrk -t 1 -c $CONNS," \
        "  fill.lua); the server's own count; RSS again ${SETTLE} s later." \
        "- overhead per object = (RSS after the fill - RSS after warm-up - $OBJECTS x 1024 B) / $OBJECTS." \
        "  levee (default) stores these text bodies gzip-compressed (about a third of their size):" \
        "  its overhead by this formula is not comparable; levee --no-compression stores them as" \
        "  sent, as Varnish does." \
        "- hits: wrk -t 1 -c $CONNS -d ${DURATION}s with one Lua script picking /o/<random 1..N>" \
        "  (with \`Accept-Encoding: gzip\`, as browsers send it; Varnish and levee --no-compression" \
        "  answer with the 1 KiB body as stored, levee by default with its stored gzip body)," \
        "  N = $OBJECTS (random) or 1 (hot), $ROUNDS runs of each, the servers alternated round by" \
        "  round (all of them holding their objects); medians." \
        "  levee: \`--cache-size 4GiB\`; Varnish: \`-s malloc,4G\`, built-in VCL." ""
    report "| server | RSS after warm-up (MiB) | RSS with $OBJECTS objects (MiB) | overhead per object (B) | fill | count | random hits req/s | hot hit req/s | random/hot | origin requests during hits |" \
        "|---|---:|---:|---:|---|---|---:|---:|---:|---:|"
    for s in "${MEM_SERVERS[@]}"; do
        local ov
        ov=$(awk -v a="${after[$s]}" -v b="${before[$s]}" -v n="$OBJECTS" 'BEGIN {printf "%.0f", ((a - b) * 1024 - n * 1024) / n}')
        report "| $s | $(mib "${before[$s]}") | $(mib "${after[$s]}") | $ov | ${fillinfo[$s]} | ${counted[$s]} | ${rnd[$s]} | ${hot[$s]} | $(ratio "${rnd[$s]}" "${hot[$s]}") | ${misses[$s]} |"
    done
    report "" "- random hits, each run: $(for s in "${MEM_SERVERS[@]}"; do printf '%s: %s; ' "$s" "${rndruns[$s]% }"; done)" \
        "- hot hit, each run: $(for s in "${MEM_SERVERS[@]}"; do printf '%s: %s; ' "$s" "${hotruns[$s]% }"; done)"
    if [ -n "${after[levee-raw]:-}" ] && [ -n "${after[varnish]:-}" ]; then
        report "- levee --no-compression / Varnish RSS = $(ratio "${after[levee-raw]}" "${after[varnish]}")."
    fi
    if [ -n "${BASELINE:-}" ]; then
        report "- levee-base: $BASELINE ($("$BASELINE" --version 2>/dev/null))."
        for s in levee levee-raw; do
            if [ -n "${rnd[$s]:-}" ] && [ -n "${rnd[levee-base${s#levee}]:-}" ]; then
                report "- $s / levee-base${s#levee}: RSS $(ratio "${after[$s]}" "${after[levee-base${s#levee}]}"), random hits $(ratio "${rnd[$s]}" "${rnd[levee-base${s#levee}]}")."
            fi
        done
    fi
    report ""
}

# ---- large: 100 KiB hits, levee vs nginx -----------------------------------------------------

large_section() {
    local origin lport nport r k s line a b e url h
    local -A port rps p99 err
    origin=$(free_port)
    # shellcheck disable=SC2046
    start_origin origin-large "$origin" --delay 0ms --no-session $(origin_workers 0) \
        --cache-control "public, max-age=3600" --body-size 102400
    local origin_pid=$ORIGIN_PID
    port[levee]=$(free_port)
    start_levee levee-large "${port[levee]}" "$origin" --cache-size 1GiB
    local levee_pid=$LEVEE_PID
    port[nginx]=$(free_port)
    start_nginx nginx-large "${port[nginx]}" "$origin"
    local servers=(levee nginx) base_pid=""
    if [ -n "${BASELINE:-}" ]; then
        [ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable levee"
        cp "$BASELINE" "$WORK/levee-base"
        port[levee-base]=$(free_port)
        LEVEE="$WORK/levee-base" start_levee levee-base-large "${port[levee-base]}" "$origin" --cache-size 1GiB
        base_pid=$LEVEE_PID
        servers+=(levee-base)
    fi
    local nservers=${#servers[@]}
    for s in "${servers[@]}"; do
        url="http://127.0.0.1:${port[$s]}/large"
        curl -s -o /dev/null "$url"
        if [ "$s" = nginx ]; then h=$(header_of "$url" X-Cache-Status); else h=$(header_of "$url" X-Cache); fi
        [ "${h:0:3}" = HIT ] || die "$s does not answer $url from cache ('$h')"
    done
    local o0
    o0=$(origin_requests "$origin")
    for ((r = 0; r < ROUNDS; r++)); do
        for ((k = 0; k < nservers; k++)); do
            s=${servers[(r + k) % nservers]}
            line=$(run_wrk "http://127.0.0.1:${port[$s]}/large" "$DURATION" "$CONNS")
            read -r a b _ _ e <<<"$line"
            rps[$s]+="$a "
            p99[$s]+="$b "
            err[$s]=$((${err[$s]:-0} + e))
            log "  large round $((r + 1))/$ROUNDS $s: $a req/s, p99 $b ms, errors $e"
        done
    done
    local misses=$(($(origin_requests "$origin") - o0))
    stop_pid "$NGINX_PID"
    stop_pid "$levee_pid"
    [ -n "$base_pid" ] && stop_pid "$base_pid"
    stop_pid "$origin_pid"
    report "**100 KiB hits: levee vs nginx**" "" \
        "- wrk -t 1 -c $CONNS -d ${DURATION}s, $ROUNDS runs per server, alternated; medians. levee" \
        "  \`--cache-size 1GiB\` (defaults); nginx proxy_cache as hits.sh (on disk, 2 workers, sendfile)." ""
    report "| server | req/s (median) | p99 ms (median) | req/s of each run | errors |" "|---|---:|---:|---|---:|"
    for s in "${servers[@]}"; do
        report "| $s | $(median ${rps[$s]}) | $(median ${p99[$s]}) | ${rps[$s]% } | ${err[$s]} |"
    done
    report "" "- levee/nginx req/s = $(ratio "$(median ${rps[levee]})" "$(median ${rps[nginx]})"); origin requests during the runs: $misses."
    if [ -n "$base_pid" ]; then
        report "- levee/levee-base req/s = $(ratio "$(median ${rps[levee]})" "$(median ${rps[levee-base]})"); levee-base: $("$WORK/levee-base" --version 2>/dev/null | head -1)."
    fi
    report ""
}

# ---- nodes: levee nodes sharing Redis vs independent ------------------------------------------

# zipf.lua: walks the URL list in ZIPF_FILE from line ZIPF_START (1-based) in steps of
# ZIPF_STEP (this node's share of a round-robin), counts responses and X-Cache hits, and
# writes ZIPF_MARKER when its share is answered. Every node is asked for one Host, as a
# load balancer in front of a cluster does (the Host is part of the cache key: with each
# node's own address nothing could be shared).
cat >"$WORK/zipf.lua" <<'EOF'
local file = os.getenv("ZIPF_FILE")
local headers = { Host = "site.test" }
local start = tonumber(os.getenv("ZIPF_START") or "1")
local step = tonumber(os.getenv("ZIPF_STEP") or "1")
local marker = os.getenv("ZIPF_MARKER")
urls = {}
for line in io.lines(file) do urls[#urls + 1] = line end
mine = {}
for i = start, #urls, step do mine[#mine + 1] = urls[i] end
i = 0
responses = 0
hits = 0
bad = 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function request()
  i = i + 1
  if i > #mine then return wrk.format("GET", mine[1], headers) end
  return wrk.format("GET", mine[i], headers)
end
function response(status, headers, body)
  responses = responses + 1
  if responses > #mine then return end
  if status ~= 200 then bad = bad + 1 end
  local v = headers["x-cache"] or headers["X-Cache"]
  if v and string.sub(v, 1, 3) == "HIT" then hits = hits + 1 end
  if responses == #mine then
    if marker then local f = io.open(marker, "w"); if f then f:write("done\n"); f:close() end end
    wrk.thread:stop()
  end
end
function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    io.write(string.format("ZIPF responses=%d hits=%d bad=%d secs=%.3f\n",
      math.min(t:get("responses"), #mine), t:get("hits"), t:get("bad"), summary.duration / 1e6))
  end
end
EOF

nodes_section() {
    if ! "$LEVEE" serve --help 2>/dev/null | grep -q -- --cache-redis; then
        log "nodes: this levee has no --cache-redis; section skipped"
        report "**Nodes sharing Redis**" "" "- skipped: the levee binary under test has no \`--cache-redis\` yet." ""
        return 0
    fi
    python3 - "$URLS" "$REQUESTS" "$ZIPF_S" >"$WORK/zipf.txt" <<'EOF'
import bisect, random, sys
urls, requests, s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
rng = random.Random(23)
cum, t = [], 0.0
for k in range(1, urls + 1):
    t += 1.0 / k ** s
    cum.append(t)
out = sys.stdout
for _ in range(requests):
    out.write("/z/%d\n" % (bisect.bisect_left(cum, rng.random() * t) + 1))
EOF
    local distinct
    distinct=$(sort -u "$WORK/zipf.txt" | wc -l)
    report "**Nodes sharing Redis vs independent nodes**" "" \
        "- $REQUESTS requests over $URLS URLs, Zipf exponent $ZIPF_S (seed 23; $distinct distinct URLs requested)," \
        "  request i sent to node i mod n, one wrk -t 1 -c $((CONNS / 3 > 0 ? CONNS / 3 : 1)) per node, all at once, from" \
        "  cold caches, every request with \`Host: site.test\`; \`levee origin --body-size 1024\`" \
        "  (\`public, max-age=3600\`) behind all nodes." \
        "  shared: every node \`--cache-redis redis://127.0.0.1:PORT\` on one redis-server (no persistence);" \
        "  independent: the same nodes without it. Backend requests: the origin's own counter." ""
    report "| nodes | mode | hit ratio | req/s | backend requests | errors |" "|---:|---|---:|---:|---:|---:|"
    local nodes mode i origin redis_port redis_pid o0 secs t0 t1 c=$((CONNS / 3 > 0 ? CONNS / 3 : 1))
    for nodes in 1 2 3; do
        for mode in independent shared; do
            origin=$(free_port)
            # shellcheck disable=SC2046
            start_origin "origin-$nodes-$mode" "$origin" --delay 0ms --no-session $(origin_workers 0) \
                --cache-control "public, max-age=3600" --body-size 1024
            local origin_pid=$ORIGIN_PID pids=() ports=() extra=()
            redis_pid=""
            if [ "$mode" = shared ]; then
                redis_port=$(free_port)
                start_bg "redis-$nodes" redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no
                redis_pid=$BG_PID
                wait_port "$redis_port" "$redis_pid"
                extra=(--cache-redis "redis://127.0.0.1:$redis_port")
            fi
            for ((i = 0; i < nodes; i++)); do
                ports+=("$(free_port)")
                start_levee "node$i-$nodes-$mode" "${ports[i]}" "$origin" --cache-size 1GiB "${extra[@]}"
                pids+=("$LEVEE_PID")
            done
            o0=$(origin_requests "$origin")
            t0=$(date +%s.%N)
            local wps=()
            for ((i = 0; i < nodes; i++)); do
                rm -f "$WORK/zipf-$i.done"
                ZIPF_FILE="$WORK/zipf.txt" ZIPF_START=$((i + 1)) ZIPF_STEP=$nodes ZIPF_MARKER="$WORK/zipf-$i.done" \
                    wrk -t 1 -c "$c" -d 300s --timeout 10s -s "$WORK/zipf.lua" "http://127.0.0.1:${ports[i]}/" \
                    >"$WORK/zipf-$i.out" 2>&1 &
                wps+=($!)
            done
            for ((i = 0; i < nodes; i++)); do
                while [ ! -e "$WORK/zipf-$i.done" ] && kill -0 "${wps[i]}" 2>/dev/null; do sleep 0.2; done
            done
            t1=$(date +%s.%N)
            for ((i = 0; i < nodes; i++)); do kill -INT "${wps[i]}" 2>/dev/null || true; wait "${wps[i]}" || true; done
            local backend=$(($(origin_requests "$origin") - o0)) sum
            sum=$(cat "$WORK"/zipf-*.out | awk '/^ZIPF/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
                END { printf "%d %d %d", v["responses"], v["hits"], v["bad"] }')
            rm -f "$WORK"/zipf-*.out
            local resp hits bad
            read -r resp hits bad <<<"$sum"
            secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')
            report "| $nodes | $mode | $(ratio "$hits" "$resp") | $(awk -v n="$resp" -v s="$secs" 'BEGIN {printf "%.0f", n / s}') | $backend | $bad |"
            log "  nodes $nodes $mode: $resp responses, $hits hits, $backend backend requests, ${secs}s"
            for ((i = 0; i < nodes; i++)); do stop_pid "${pids[i]}"; done
            [ -n "$redis_pid" ] && stop_pid "$redis_pid"
            stop_pid "$origin_pid"
        done
    done
    report ""
}

if want memory; then
    for hb in $HEADER_BYTES; do memory_section "$hb"; done
fi
want large && large_section
want nodes && nodes_section
log "report written to $OUT_FILE"
record_report
