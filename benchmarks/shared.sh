#!/usr/bin/env bash
# benchmarks/shared.sh: the shared cache tier through Redis, three ways, each with 3 levee
# nodes (`levee serve --cache-redis ...`, an admin listener each) in front of one
# `levee origin` (Cache-Control: public, max-age=3600, no session, unlimited workers,
# 5 ms per page, 4 KiB pages):
#   single:   one redis-server (`--cache-redis redis://127.0.0.1:PORT/0`);
#   sentinel: a primary, a replica (--replicaof) and three sentinels (`redis-server
#             sentinel.conf --sentinel`, `sentinel monitor mymaster 127.0.0.1 PRIMARY 2`,
#             down-after 1000 ms, failover-timeout 5000 ms); levee gets
#             `--cache-redis redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster`;
#   cluster:  a Redis Cluster of 6 redis-server (3 primaries, 3 replicas: `redis-cli
#             --cluster create ... --cluster-replicas 1`, cluster-node-timeout 1000 ms);
#             levee gets `--cache-redis redis://127.0.0.1:P` once for each primary.
# Every redis-server runs with --save '' --appendonly no --bind 127.0.0.1 --protected-mode no.
# Every node must show `levee_redis_up 1` in its /metrics before anything is measured.
# Three phases per way, each one wrk (-t 1 -c CONNS -d DURATION) per node loaded, all at
# once, every request with `Host: shared.test` (one site: the nodes share its keys) and
# `Accept-Encoding: gzip` (as browsers send it; levee stores these pages gzipped):
#   misses:    all 3 nodes, every request a URL never seen before (/m/<tag>-<n>-<random>):
#              what a fill costs through Redis (lookup, fill lock, record written, lock
#              released), and behind it levee's backend limit, which with Redis is the
#              whole fleet's (its queue wait per request and levee_fleet_capacity are
#              reported; BACKEND_LIMIT fixes it);
#   hits-mem:  N=1000 URLs warmed through node 1 only, then random requests of them on
#              nodes 2 and 3: each node's first touch of a URL comes from Redis, every
#              later one from its own memory;
#   hits-redis: nodes 2 and 3 replaced by nodes with SMALL_CACHE of memory (a config file:
#              [cache] size, max_object_size 64KiB), the same random requests: most hits
#              come from Redis (the share is measured and reported).
# Per phase: req/s summed over the loaded nodes, the worst of their wrk p99s, non-2xx
# responses (levee's levee_requests_total by status, every node) and wrk's socket errors,
# Redis commands per request (`total_commands_processed` of INFO stats, delta over the
# phase, summed over the primaries only: the one server; Sentinel's primary; the Cluster's
# 3 primaries), levee's levee_redis_{hits,misses,errors}_total deltas summed over the
# nodes, the origin's requests, and CPU seconds per 1,000 requests of the 3 levee nodes
# and of all of the way's redis-server processes (/proc/PID/stat utime + stime).
# ROUNDS rounds, each with fresh servers, the order of the ways rotated each round;
# medians are reported.
#
# Usage: benchmarks/shared.sh              (from anywhere; about 6.5 minutes at the defaults, plus the build)
#        RECORD=0 ROUNDS=1 DURATION=3 benchmarks/shared.sh   (a trial: about 75 seconds)
#        The table goes to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   ROUNDS=3 DURATION=10 CONNS=16 (per wrk, one wrk per node) HITS_N=1000
#        SMALL_CACHE=256KiB (memory of the hits-redis nodes) WAYS="single sentinel cluster"
#        REDIS_WAIT=30 (seconds for every node to show levee_redis_up 1)
#        BACKEND_LIMIT=N: every node gets --backend-max-concurrency N (default: levee's auto,
#        which with Redis is one adaptive limit for the whole fleet; the misses' queue wait
#        and the fleet's limit are reported so that its share of the misses' cost shows)
#        LEVEE_ARGS="...": more flags for every node (e.g. "--access-log json --access-log-file -",
#        which goes to the node's log in the scratch directory; with KEEP_WORK=1)
#        LEVEE=/path/to/levee (default: cargo build --release, then target/release/levee)
#        BUILD=0 (use target/release/levee as it is)  KEEP_WORK=1 (keep scratch files)
# Needs: wrk, redis-server and redis-cli (Debian's redis-server, 7.x), curl, python3.
#        Targets and binds 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-16}
HITS_N=${HITS_N:-1000}
SMALL_CACHE=${SMALL_CACHE:-256KiB}
REDIS_WAIT=${REDIS_WAIT:-30}
read -r -a WAYS <<<"${WAYS:-single sentinel cluster}"
PHASES=(misses hits-mem hits-redis)
declare -A PHASE_NAME=([misses]="shared misses" [hits-mem]="hits (memory after first)"
    [hits-redis]="Redis hits (small memory)")
CLK_TCK=$(getconf CLK_TCK)

# need_tools would name a package redis-cli; Debian's redis-server brings redis-tools (redis-cli).
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "missing: redis-server or redis-cli; install with: apt-get install -y redis-server" >&2
    exit 2
fi
need_tools wrk curl python3
export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
levee_binary
"$LEVEE" serve --help 2>/dev/null | grep -q -- --cache-redis || die "this levee has no --cache-redis"
open_report shared

# One Lua script for every phase. SHARED_MODE=miss: a new URL per request; hit: a random
# one of SHARED_PREFIX1..SHARED_PREFIX<SHARED_N>. Prints report.lua's RESULT line.
cat >"$WORK/shared.lua" <<'EOF'
local mode = os.getenv("SHARED_MODE") or "hit"
local tag = os.getenv("SHARED_TAG") or "x"
local prefix = os.getenv("SHARED_PREFIX") or "/h/"
local n = tonumber(os.getenv("SHARED_N") or "1000")
local headers = { Host = "shared.test", ["Accept-Encoding"] = "gzip" }
local counter = 0
math.randomseed(os.time() * 1000 + tonumber(os.getenv("SHARED_SEED") or "0"))
function request()
  if mode == "miss" then
    counter = counter + 1
    return wrk.format("GET", string.format("/m/%s-%d-%d", tag, counter, math.random(1, 1000000000)), headers)
  end
  return wrk.format("GET", prefix .. math.random(1, n), headers)
end
EOF
# done(): lib.sh's report.lua (the RESULT line).
cat "$WORK/report.lua" >>"$WORK/shared.lua"

cat >"$WORK/small.toml" <<EOF
[cache]
size = "$SMALL_CACHE"
max_object_size = "64KiB"
EOF

rcli() { # rcli PORT ARGS...: redis-cli on 127.0.0.1, bounded in time
    local port=$1
    shift
    timeout 5 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null | tr -d '\r'
}

redis_field() { # redis_field PORT SECTION FIELD: one field of INFO SECTION
    rcli "$1" info "$2" | awk -F: -v f="$3" '$1 == f {print $2}'
}

# ports_with_bus N: N free ports p in 20000-29999 with p + 10000 free too (a Cluster
# node's bus port).
ports_with_bus() {
    python3 - "$1" <<'EOF'
import random, socket, sys
out = []
while len(out) < int(sys.argv[1]):
    p = random.randint(20000, 29999)
    if p in out:
        continue
    socks, ok = [], True
    for q in (p, p + 10000):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", q))
        except OSError:
            ok = False
        socks.append(s)
    for s in socks:
        s.close()
    if ok:
        out.append(p)
print(" ".join(map(str, out)))
EOF
}

# redis_start NAME PORT ARGS...: one redis-server of the way's (its own directory).
redis_start() {
    local name=$1 port=$2
    shift 2
    mkdir -p "$WORK/$name"
    start_bg "$name" redis-server --port "$port" --bind 127.0.0.1 --protected-mode no \
        --save '' --appendonly no --dir "$WORK/$name" "$@"
    REDIS_PIDS+=("$BG_PID")
    wait_port "$port" "$BG_PID"
}

# wait_for SECONDS WHAT CMD...: until CMD succeeds; FAIL_REASON and 1 after SECONDS.
wait_for() {
    local secs=$1 what=$2 i
    shift 2
    for ((i = 0; i < secs * 5; i++)); do
        "$@" && return 0
        sleep 0.2
    done
    FAIL_REASON="$what: not after ${secs}s"
    return 1
}

# ---- the three ways: each sets REDIS_ARGS (levee's flags), DATA_PORTS (the primaries
# whose commands are counted) and REDIS_PIDS (every redis-server, for CPU and stopping).

setup_single() {
    local p
    p=$(free_port)
    redis_start "redis-$TAG" "$p"
    DATA_PORTS=("$p")
    REDIS_ARGS=(--cache-redis "redis://127.0.0.1:$p/0")
    WAY_DESC="127.0.0.1:$p"
}

replica_linked() { [ "$(redis_field "$1" replication master_link_status)" = up ]; }

sentinel_ready() { # sentinel_ready PORT: knows the primary, its replica and 2 other sentinels
    local m
    m=$(rcli "$1" sentinel master mymaster | paste - - | awk -F'\t' '{v[$1] = $2} END {
        print v["flags"], v["num-slaves"], v["num-other-sentinels"]}')
    [ "$m" = "master 1 2" ]
}

setup_sentinel() {
    local primary replica s k ports=() url=""
    primary=$(free_port)
    replica=$(free_port)
    redis_start "redis-$TAG-primary" "$primary"
    redis_start "redis-$TAG-replica" "$replica" --replicaof 127.0.0.1 "$primary"
    wait_for 30 "replica 127.0.0.1:$replica linked to its primary" replica_linked "$replica" || return 1
    for k in 1 2 3; do
        s=$(free_port)
        mkdir -p "$WORK/sentinel-$TAG-$k"
        printf '%s\n' "port $s" "bind 127.0.0.1" "protected-mode no" "daemonize no" \
            "dir $WORK/sentinel-$TAG-$k" \
            "sentinel monitor mymaster 127.0.0.1 $primary 2" \
            "sentinel down-after-milliseconds mymaster 1000" \
            "sentinel failover-timeout mymaster 5000" >"$WORK/sentinel-$TAG-$k/sentinel.conf"
        start_bg "sentinel-$TAG-$k" redis-server "$WORK/sentinel-$TAG-$k/sentinel.conf" --sentinel
        REDIS_PIDS+=("$BG_PID")
        wait_port "$s" "$BG_PID"
        ports+=("$s")
        url+="${url:+,}127.0.0.1:$s"
    done
    for s in "${ports[@]}"; do
        wait_for 30 "sentinel 127.0.0.1:$s seeing the primary, its replica and 2 other sentinels" \
            sentinel_ready "$s" || return 1
    done
    DATA_PORTS=("$primary")
    REDIS_ARGS=(--cache-redis "redis+sentinel://$url/mymaster")
    WAY_DESC="primary 127.0.0.1:$primary, replica :$replica, sentinels $url"
}

cluster_ok() { # cluster_ok PORT...: every node says cluster_state:ok
    local p
    for p in "$@"; do
        [ "$(rcli "$p" cluster info | awk -F: '$1 == "cluster_state" {print $2}')" = ok ] || return 1
    done
}

replicas_linked() { # replicas_linked PORT...: each primary has a replica online
    local p
    for p in "$@"; do
        rcli "$p" info replication | grep -q '^slave0:.*state=online' || return 1
    done
}

setup_cluster() {
    local ports p nodes=() primaries
    read -r -a ports <<<"$(ports_with_bus 6)"
    for p in "${ports[@]}"; do
        redis_start "cluster-$TAG-$p" "$p" --cluster-enabled yes \
            --cluster-config-file "$WORK/cluster-$TAG-$p/nodes.conf" --cluster-node-timeout 1000
        nodes+=("127.0.0.1:$p")
    done
    if ! timeout 60 redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes \
        >"$WORK/cluster-create-$TAG.log" 2>&1; then
        FAIL_REASON="redis-cli --cluster create failed: $(tail -3 "$WORK/cluster-create-$TAG.log" | tr '\n' ' ')"
        return 1
    fi
    wait_for 30 "cluster_state:ok on all 6 nodes" cluster_ok "${ports[@]}" || return 1
    primaries=$(rcli "${ports[0]}" cluster nodes | awk '$3 ~ /master/ {split($2, a, "[:@]"); print a[2]}' | sort -n)
    read -r -a DATA_PORTS <<<"$(echo $primaries)"
    [ ${#DATA_PORTS[@]} = 3 ] || { FAIL_REASON="cluster nodes shows ${#DATA_PORTS[@]} primaries, not 3"; return 1; }
    wait_for 30 "a replica online for each primary" replicas_linked "${DATA_PORTS[@]}" || return 1
    REDIS_ARGS=()
    for p in "${DATA_PORTS[@]}"; do REDIS_ARGS+=(--cache-redis "redis://127.0.0.1:$p"); done
    WAY_DESC="primaries :${DATA_PORTS[*]}, all nodes :${ports[*]}"
}

# ---- levee nodes --------------------------------------------------------------------------

# node_start K [ARGS...]: levee node K (1..3) on new ports with the way's REDIS_ARGS; sets
# NODE_PORT[K], NODE_ADMIN[K], NODE_PID[K]. 1 (FAIL_REASON) when it exits first.
declare -A NODE_PORT NODE_ADMIN NODE_PID NODE_LOG
node_start() {
    local k=$1 i name
    shift
    name="levee-$TAG-node$k${NODE_SUFFIX:-}"
    NODE_PORT[$k]=$(free_port)
    NODE_ADMIN[$k]=$(free_port)
    NODE_LOG[$k]="$WORK/$name.log"
    start_bg "$name" "$LEVEE" serve --listen "127.0.0.1:${NODE_PORT[$k]}" \
        --admin-listen "127.0.0.1:${NODE_ADMIN[$k]}" --backend "http://127.0.0.1:$ORIGIN_PORT" \
        "${REDIS_ARGS[@]}" ${BACKEND_LIMIT:+--backend-max-concurrency "$BACKEND_LIMIT"} ${LEVEE_ARGS:-} "$@"
    NODE_PID[$k]=$BG_PID
    for ((i = 0; i < 300; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/${NODE_PORT[$k]}") 2>/dev/null &&
            (exec 3<>"/dev/tcp/127.0.0.1/${NODE_ADMIN[$k]}") 2>/dev/null; then
            return 0
        fi
        if ! kill -0 "${NODE_PID[$k]}" 2>/dev/null; then
            FAIL_REASON="levee node $k exited at start"
            FAIL_LOG=${NODE_LOG[$k]}
            return 1
        fi
        sleep 0.1
    done
    FAIL_REASON="levee node $k not listening after 30 s"
    FAIL_LOG=${NODE_LOG[$k]}
    return 1
}

nodes_up() { # nodes_up K...: every node shows levee_redis_up 1
    local k
    for k in "$@"; do
        [ "$(levee_metric "${NODE_ADMIN[$k]}" levee_redis_up)" = 1 ] || { DOWN_NODE=$k; return 1; }
    done
}

wait_nodes_up() {
    DOWN_NODE=$1
    if ! wait_for "$REDIS_WAIT" "levee_redis_up 1 on nodes $*" nodes_up "$@"; then
        FAIL_REASON="node $DOWN_NODE: levee_redis_up never 1 in ${REDIS_WAIT}s ($(curl -s "http://127.0.0.1:${NODE_ADMIN[$DOWN_NODE]}/metrics" |
            grep -E '^levee_redis_(up|errors_total|reconnects_total|primary)' | tr '\n' ';'))"
        FAIL_LOG=${NODE_LOG[$DOWN_NODE]}
        return 1
    fi
    return 0
}

# ---- measuring ----------------------------------------------------------------------------

metrics_sum() { # metrics_sum: "redis_hits redis_misses redis_errors non2xx redis_writes backend_wait_s" over the 3 nodes
    local k
    for k in 1 2 3; do curl -s --max-time 5 "http://127.0.0.1:${NODE_ADMIN[$k]}/metrics"; done | awk '
        $1 == "levee_redis_hits_total" {h += $2}
        $1 == "levee_redis_misses_total" {m += $2}
        $1 == "levee_redis_errors_total" {e += $2}
        $1 == "levee_redis_writes_total" {w += $2}
        $1 ~ /^levee_requests_total\{/ && $1 !~ /status="2xx"/ {n += $2}
        $1 ~ /^levee_backend_wait_seconds_total\{/ {t += $2}
        END {printf "%d %d %d %d %d %.6f\n", h, m, e, n, w, t}'
}

# non2xx_by_label: levee_requests_total of every status but 2xx, summed over the 3 nodes by labels.
non2xx_by_label() {
    local k
    for k in 1 2 3; do curl -s --max-time 5 "http://127.0.0.1:${NODE_ADMIN[$k]}/metrics"; done | awk '
        $1 ~ /^levee_requests_total\{/ && $1 !~ /status="2xx"/ && $2 > 0 {l = substr($1, 22); sub(/\}$/, "", l); c[l] += $2}
        END {for (k in c) printf "%s %d; ", k, c[k]}'
}

# fleet_capacity: the most levee_fleet_capacity any node reports (the fleet's backend limit).
fleet_capacity() {
    local k
    for k in 1 2 3; do levee_metric "${NODE_ADMIN[$k]}" levee_fleet_capacity; done | sort -n | tail -1
}

cmdstats() { # cmdstats: "command calls" of every command, summed over DATA_PORTS
    local p
    for p in "${DATA_PORTS[@]}"; do rcli "$p" info commandstats; done |
        sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),.*/\1 \2/p' |
        awk '{c[$1] += $2} END {for (k in c) print k, c[k]}'
}

# snapshot: "hits misses errors non2xx writes backend_wait_s levee_ticks redis_commands redis_ticks
# origin_requests"
snapshot() {
    local k p lt=0 rc=0 rt=0 v
    for k in 1 2 3; do lt=$((lt + $(cpu_ticks "${NODE_PID[$k]}"))); done
    for p in "${DATA_PORTS[@]}"; do
        v=$(redis_field "$p" stats total_commands_processed)
        rc=$((rc + ${v:-0}))
    done
    for p in "${REDIS_PIDS[@]}"; do rt=$((rt + $(cpu_ticks "$p"))); done
    echo "$(metrics_sum) $lt $rc $rt $(origin_requests "$ORIGIN_PORT")"
}

# run_phase PHASE MODE K...: one wrk per node K at once; records the phase's results.
run_phase() {
    local phase=$1 mode=$2 k before after pids=() files=() line
    shift 2
    cmdstats >"$WORK/cmd-before"
    before=$(snapshot)
    for k in "$@"; do
        start_bg "wrk-$TAG-$phase-$k" env SHARED_MODE="$mode" SHARED_TAG="$TAG-n$k" \
            SHARED_PREFIX="/h/$TAG/" SHARED_N="$HITS_N" SHARED_SEED="$k" \
            wrk -t 1 -c "$CONNS" -d "${DURATION}s" --timeout 10s --latency -s "$WORK/shared.lua" \
            "http://127.0.0.1:${NODE_PORT[$k]}/"
        pids+=("$BG_PID")
        files+=("$WORK/wrk-$TAG-$phase-$k.log")
    done
    for k in "${pids[@]}"; do wait "$k" || true; done
    after=$(snapshot)
    cmdstats >"$WORK/cmd-after"
    for k in "${files[@]}"; do
        grep -q '^RESULT' "$k" || { cat "$k" >&2; die "wrk produced no result ($k)"; }
    done
    # rps p99_ms requests wrk_errors hits misses errors non2xx cmds/req from_redis% levee_cpu
    # redis_cpu origin backend_wait_ms/req
    line=$(cat "${files[@]}" | awk -v b="$before" -v a="$after" -v clk="$CLK_TCK" '
        /^RESULT/ {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            rps += v["rps"]; req += v["requests"]; err += v["sockerr"] + v["status_err"]
            if (v["p99_us"] > p99) p99 = v["p99_us"]
        }
        END {
            split(b, x, " "); split(a, y, " ")
            for (i = 1; i <= 10; i++) d[i] = y[i] - x[i]
            r = req > 0 ? req : 1
            printf "%.0f %.2f %d %d %d %d %d %d %.2f %.1f %.3f %.3f %d %.2f\n", rps, p99 / 1000, req, err,
                d[1], d[2], d[3], d[4], d[8] / r, 100 * d[1] / r,
                d[7] / clk / r * 1000, d[9] / clk / r * 1000, d[10], 1000 * d[6] / r
        }')
    RES[$WAY,$phase,$ROUND]=$line
    # The commands behind Redis cmds/req, per request, most first.
    CMDS[$WAY,$phase,$ROUND]=$(awk -v r="$(awk '{print $3}' <<<"$line")" '
        NR == FNR {b[$1] = $2; next}
        {d = $2 - b[$1]; if (d > 0 && r > 0) printf "%s %.3f\n", $1, d / r}' \
        "$WORK/cmd-before" "$WORK/cmd-after" | sort -k2,2gr | awk '$2 >= 0.001 {printf "%s%s %s", sep, $1, $2; sep = ", "}')
    log "    Redis commands per request: ${CMDS[$WAY,$phase,$ROUND]}"
    FLEET[$WAY,$phase,$ROUND]=$(fleet_capacity)
    log "  $WAY $phase: $(awk '{printf "%s req/s, p99 %s ms, %s requests, wrk errors %s, levee non-2xx %s, Redis hits %s misses %s errors %s, %s Redis cmds/req, %s%% from Redis, levee CPU %s s/1k, Redis CPU %s s/1k, origin %s, backend wait %s ms/req", $1, $2, $3, $4, $8, $5, $6, $7, $9, $10, $11, $12, $13, $14}' <<<"$line"), fleet capacity ${FLEET[$WAY,$phase,$ROUND]}"
    if [ "$(awk '{print $8 + $4}' <<<"$line")" != 0 ]; then
        NOTES+=("- $WAY, round $ROUND, ${PHASE_NAME[$phase]}: $(awk '{print $8}' <<<"$line") non-2xx from levee, $(awk '{print $4}' <<<"$line") wrk errors; levee_requests_total other than 2xx since the nodes started: $(non2xx_by_label)")
        log "    ${NOTES[-1]}"
    fi
}

written_since() { # written_since W0: node 1 wrote HITS_N records since its count was W0
    [ $(($(levee_metric "${NODE_ADMIN[1]}" levee_redis_writes_total) - $1)) -ge "$HITS_N" ]
}

# warm: HITS_N URLs /h/TAG/1..N through node 1 once; all 200, then node 1's records written.
warm() {
    local w0 codes
    w0=$(levee_metric "${NODE_ADMIN[1]}" levee_redis_writes_total)
    codes=$(curl -s -Z --parallel-max 16 --max-time 60 -o /dev/null -w '%{http_code}\n' \
        -H 'Host: shared.test' -H 'Accept-Encoding: gzip' \
        "http://127.0.0.1:${NODE_PORT[1]}/h/$TAG/[1-$HITS_N]" 2>"$WORK/warm-$TAG.err" | grep -c '^200$' || true)
    [ "$codes" = "$HITS_N" ] || { FAIL_REASON="warming through node 1: $codes of $HITS_N answered 200"; return 1; }
    wait_for 20 "node 1 writing $HITS_N records to Redis" written_since "$w0" || {
        FAIL_REASON+=" (levee_redis_writes_total +$(($(levee_metric "${NODE_ADMIN[1]}" levee_redis_writes_total) - w0)))"
        return 1
    }
    log "  $WAY: $HITS_N URLs warmed through node 1 ($(($(levee_metric "${NODE_ADMIN[1]}" levee_redis_writes_total) - w0)) records written)"
}

# measure_way: one way, fresh servers, its three phases. 1 with FAIL_REASON when something
# does not come up.
measure_way() {
    local k
    ORIGIN_PORT=$(free_port)
    # shellcheck disable=SC2046
    start_origin "origin-$TAG" "$ORIGIN_PORT" --cache-control "public, max-age=3600" --no-session \
        $(origin_workers 0) --delay 5ms --body-size 4096
    "setup_$WAY" || return 1
    log "  $WAY up: $WAY_DESC"
    for k in 1 2 3; do node_start "$k" || return 1; done
    wait_nodes_up 1 2 3 || return 1
    log "  $WAY: levee_redis_up 1 on the 3 nodes ($(curl -s "http://127.0.0.1:${NODE_ADMIN[1]}/metrics" | grep '^levee_redis_primary' | tr '\n' ' '))"
    run_phase misses miss 1 2 3
    warm || return 1
    run_phase hits-mem hit 2 3
    for k in 2 3; do stop_pid "${NODE_PID[$k]}"; done
    for k in 2 3; do NODE_SUFFIX=-small node_start "$k" --config "$WORK/small.toml" || return 1; done
    wait_nodes_up 2 3 || return 1
    run_phase hits-redis hit 2 3
}

stop_way() {
    local p i
    for p in "${NODE_PID[@]}"; do stop_pid "$p"; done
    # Sentinels and replicas before their primary (no failover, no SYNC errors).
    for ((i = ${#REDIS_PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${REDIS_PIDS[i]}"; done
    [ -z "$ORIGIN_PID" ] || stop_pid "$ORIGIN_PID"
    NODE_PID=()
    REDIS_PIDS=()
    ORIGIN_PID=""
}

declare -A RES CMDS FLEET FAILED
NOTES=()
ORIGIN_PID=""
T0=$(date +%s)
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    for ((i = 0; i < ${#WAYS[@]}; i++)); do
        WAY=${WAYS[(ROUND - 1 + i) % ${#WAYS[@]}]}
        TAG="r$ROUND-$WAY"
        REDIS_PIDS=()
        FAIL_REASON=""
        FAIL_LOG=""
        log "round $ROUND/$ROUNDS: $WAY"
        if ! measure_way; then
            FAILED[$WAY]+="round $ROUND "
            log "  $WAY FAILED: $FAIL_REASON"
            note="- $WAY, round $ROUND: FAILED: $FAIL_REASON"
            if [ -n "$FAIL_LOG" ] && [ -s "$FAIL_LOG" ]; then
                log "  last lines of $(basename "$FAIL_LOG"):"
                tail -n 15 "$FAIL_LOG" >&2
                note+=$'\n  last lines of its log:\n\n'"$(tail -n 15 "$FAIL_LOG" | sed 's/^/      /')"$'\n'
            fi
            NOTES+=("$note")
        fi
        stop_way
    done
done
ELAPSED=$(($(date +%s) - T0))

# ---- report -------------------------------------------------------------------------------

commit=$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$REPO_DIR" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null | wc -l)
report "# Shared cache tier through Redis: one server, Sentinel, Cluster ($(date '+%Y-%m-%d %H:%M'))" "" \
    "- machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), Linux $(uname -r); the load tool, the origin, every redis-server and the 3 levee nodes share them" \
    "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared; other jobs may compile)" \
    "- levee: $LEVEE_SRC ($("$LEVEE" --version 2>/dev/null | head -1 || echo "no --version")); repository at commit $commit$([ "$dirty" -gt 0 ] && echo " + $dirty uncommitted file(s) in crates/ or Cargo files" || true)" \
    "- $(redis-server --version | awk '{print $1, $2, $3}'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}')" \
    "- command: \`ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS HITS_N=$HITS_N SMALL_CACHE=$SMALL_CACHE WAYS=\"${WAYS[*]}\"${BACKEND_LIMIT:+ BACKEND_LIMIT=$BACKEND_LIMIT}${LEVEE_ARGS:+ LEVEE_ARGS=\"$LEVEE_ARGS\"} benchmarks/shared.sh\` ($ELAPSED s)" \
    "- setup: 3 \`levee serve --listen 127.0.0.1:P --admin-listen 127.0.0.1:A --backend http://127.0.0.1:ORIGIN --cache-redis ...\` (default 256MiB memory) in front of one \`levee origin --cache-control \"public, max-age=3600\" --no-session --workers 0 --delay 5ms --body-size 4096\`; every redis-server \`--save '' --appendonly no --bind 127.0.0.1 --protected-mode no\`. single: one redis-server; sentinel: primary + replica (\`--replicaof\`) + 3 sentinels (quorum 2, down-after 1000 ms, failover-timeout 5000 ms), levee given \`redis+sentinel://S1,S2,S3/mymaster\`; cluster: 6 redis-server (\`--cluster-enabled yes --cluster-node-timeout 1000\`, \`redis-cli --cluster create --cluster-replicas 1\`), levee given \`--cache-redis redis://127.0.0.1:P\` for each of the 3 primaries. Fresh servers for every way in every round; every node showed \`levee_redis_up 1\` before the clock." \
    "- load: one \`wrk -t 1 -c $CONNS -d ${DURATION}s --latency\` per loaded node, all at once; every request \`Host: shared.test\` (the nodes share its keys) and \`Accept-Encoding: gzip\`. misses: nodes 1-3, each request a URL never requested before. hits-mem: $HITS_N URLs warmed through node 1 only, then random ones of them on nodes 2 and 3 (a node's first touch of a URL comes from Redis, the rest from its memory). hits-redis: nodes 2 and 3 restarted with \`[cache] size = \"$SMALL_CACHE\"\` (and max_object_size 64KiB, which must not exceed it), the same random requests: what \`from Redis\` says comes from Redis, the rest from their small memory." \
    "- columns: req/s summed over the loaded nodes; p99 the worst of their wrk p99s; non-2xx: levee's responses other than 2xx (levee_requests_total by status, 3 nodes) / wrk's socket errors and statuses >= 400 (all rounds added up, must be 0 / 0); Redis cmds/req: \`total_commands_processed\` (INFO stats) of the **primaries only** (single: the server; sentinel: the primary, not the replica; cluster: the 3 primaries), delta over the phase / the phase's requests (Redis counts the commands a script runs, EVALSHA's GET and SET, too; it also includes the sentinels' and replicas' own few commands a second); levee Redis hits / misses / errors: levee_redis_*_total deltas summed over the 3 nodes; from Redis: levee Redis hits / requests; origin: requests the origin answered during the phase (0 for hits); CPU s/1k req: utime + stime (/proc/PID/stat) per 1,000 requests, of the 3 levee nodes, and of all of the way's redis-server processes (replicas and sentinels included). Medians over $ROUNDS round(s), the ways' order rotated each round." ""
report "| way | phase | req/s | p99 ms | non-2xx / wrk errors | Redis cmds/req | levee Redis hits / misses / errors | from Redis | origin req | levee CPU s/1k req | Redis CPU s/1k req | req/s of each round |" \
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
col() { # col WAY PHASE FIELD: the field (1-based) of every successful round, one a line
    local r
    for ((r = 1; r <= ROUNDS; r++)); do
        [ -n "${RES[$1,$2,$r]:-}" ] && awk -v f="$3" '{print $f}' <<<"${RES[$1,$2,$r]}"
    done
    return 0
}
sum_col() { col "$@" | awk '{s += $1} END {print s + 0}'; }
for way in "${WAYS[@]}"; do
    for phase in "${PHASES[@]}"; do
        runs=$(col "$way" "$phase" 1 | tr '\n' ' ')
        if [ -z "$runs" ]; then
            report "| $way | ${PHASE_NAME[$phase]} | failed | | | | | | | | | ${FAILED[$way]:-}(see below) |"
            continue
        fi
        report "| $way | ${PHASE_NAME[$phase]} | $(median $(col "$way" "$phase" 1)) | $(median $(col "$way" "$phase" 2)) | $(sum_col "$way" "$phase" 8) / $(sum_col "$way" "$phase" 4) | $(median $(col "$way" "$phase" 9)) | $(median $(col "$way" "$phase" 5)) / $(median $(col "$way" "$phase" 6)) / $(median $(col "$way" "$phase" 7)) | $(median $(col "$way" "$phase" 10))% | $(median $(col "$way" "$phase" 13)) | $(median $(col "$way" "$phase" 11)) | $(median $(col "$way" "$phase" 12)) | ${runs% }$([ -n "${FAILED[$way]:-}" ] && echo "; failed: ${FAILED[$way]% }" || true) |"
    done
done
report ""
for way in "${WAYS[@]}"; do
    waits=$(col "$way" misses 14 | tr '\n' ' ')
    [ -z "$waits" ] || report "- $way, shared misses: levee's backend queue wait (levee_backend_wait_seconds_total) $(median $waits) ms per request (each round: ${waits% }); the fleet's backend limit at the end (levee_fleet_capacity): $(for ((r = 1; r <= ROUNDS; r++)); do printf '%s ' "${FLEET[$way,misses,$r]:-}"; done | xargs)"
done
for way in "${WAYS[@]}"; do
    for phase in misses hits-redis; do
        for ((r = 1; r <= ROUNDS; r++)); do
            if [ -n "${CMDS[$way,$phase,$r]:-}" ]; then
                report "- $way, ${PHASE_NAME[$phase]}, Redis commands per request (INFO commandstats of the primaries, round $r): ${CMDS[$way,$phase,$r]}"
                break
            fi
        done
    done
done
report ""
if [ ${#NOTES[@]} -gt 0 ]; then
    report "Failures:" "" "${NOTES[@]}" ""
fi
log "report written to $OUT_FILE"
record_report
