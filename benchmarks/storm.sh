#!/usr/bin/env bash
# benchmarks/storm.sh: people first under overload (issue 32). MediaWiki from Debian's
# package, unchanged, on php-fpm with 4 workers and a private MariaDB (levee-test's app
# runner, as apps.sh), behind nginx configured as MediaWiki's documentation does
# (fastcgi_pass to php-fpm), and in front of that nginx one of:
#   - nothing: the site alone;
#   - Varnish with the default VCL (just the backend);
#   - levee: `levee serve --backend http://NGINX --preset mediawiki`, nothing else.
# Three populations (crates/levee-test/examples/storm.rs):
#   - readers: READERS=8 anonymous clients from 127.0.0.1 reading PAGES=8 articles, 0.2 s
#     think time;
#   - editors: EDITORS=2 logged-in users viewing pages, saving an edit every 5 s; each save
#     must show on the editor's next view at once, and to anonymous readers within
#     VISIBLE_SECS=10;
#   - crawlers: no think time, from addresses outside 127.0.0.0/24, of one of the KINDS
#     per run (a session cookie is a claim levee checks, issue 42: each kind tries to pass
#     for a person another way):
#       plain:             uncacheable URLs (history, oldid, diffs, recent changes, what
#                          links here, searches), no cookie;
#       fake-session:      the same with a made-up session cookie of the wiki's own name
#                          (`<dbname>_session`, as the editors' login received it), one
#                          random 32-character value per connection;
#       fake-session-each: the same with a new value on every request;
#       query:             article pages (cacheable) made new URLs by `&x=<random>`;
#       login-flood:       Special:UserLogin's form posted with wrong passwords, no cookie
#                          jar: refusals of requests with a body, which a client must be
#                          able to read (a status line, not a reset or a broken pipe);
#       replay:            one real session (an account logged in through the front before
#                          the clock, as the editors are) sent by every connection, all
#                          from one client network (127.1.0.0/24).
# FAIR_SECS=30 of readers and editors alone, then STORM_SECS=60 with the crawlers too, in
# each of the VARIANTS:
#   many:     64 connections from 64 addresses (127.1.0.1, 127.1.1.1, ...: 64 /24s);
#   one:      256 connections from one address (one abusive client);
#   thousand: 1,000 connections from 1,000 addresses (1,000 /24s).
# VARIANTS unset: all three for plain, `many` for the other kinds (what they test is the
# cookie or the URL, not the spread of addresses); replay always runs once, 64
# connections from 64 addresses of one /24 ("one-net").
# The backend's busy share: php-fpm's status page for the wiki's pool, sampled 5 times a
# second in both phases through a port of the site's nginx no front is given.
# The backend's concurrency: requests in the site's nginx at once (stub_status `Writing`,
# on the same port), sampled as often; with php-fpm's most active processes, per phase.
# A fleet (issue 51): NODES="1 2 4" runs levee as each N of `levee serve` processes, each
# its own port and admin port, all with `--cache-redis` to one redis-server started for
# the run (loopback, `--save '' --appendonly no`); reader i, editor i and crawler
# connection i talk to node i mod N (storm.rs). N=1 runs without Redis, as before, unless
# REDIS=1. The levee_fleet_* values of every node at the end go into the report.
# Every run starts clean: a new wiki (database, php-fpm), a new nginx and a new front (and
# Redis); the fronts alternate, the first one rotating with each run. After each levee
# storm its /metrics and /top.json go next to the report in benchmarks/out/ (one of each
# per node, `-nodeK`, for N > 1).
#
# Usage: benchmarks/storm.sh                  (about 45 minutes: 8 runs x 3 fronts)
#        QUICK=1 benchmarks/storm.sh          (10 s + 15 s phases; about 20 minutes)
#        VARIANTS="one" FRONTS="levee" KINDS="plain replay" benchmarks/storm.sh
#        NODES="1 2 4" FRONTS="levee" KINDS="plain" VARIANTS="many" ROUNDS=3 benchmarks/storm.sh
#        Tables go to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   FAIR_SECS STORM_SECS KINDS VARIANTS FRONTS="nginx varnish levee" ROUNDS=1 READERS EDITORS
#        PAGES THINK_MS=200 EDIT_EVERY=5 VISIBLE_SECS TIMEOUT_SECS=30 (per request),
#        REFUSED_PAUSE_MS=20 (a crawler's pause after a refusal; 0: none),
#        SLOW_MS=0 (print each editor's request slower than this, and when it started),
#        LEVEE, BUILD, KEEP_WORK, LEVEE_FLAGS (more `levee serve` flags for every node, as
#        "--backend-anonymous-share 10%": an experiment's; the report's command shows them),
#        NODES="1" (levee: the fleet sizes to run, each a run of its own), REDIS=0 (1: Redis
#        at N=1 too),
#        WEBSOCKETS=0 (levee: that many idle WebSockets held open through levee, to a
#        route's echo server, for the whole run; the report says how many were still
#        answering at its end),
#        ACCESS_LOG=0 (1: the site's nginx logs every request the backend got, with its
#        time, status, whether it carried a session cookie, the user agent and php-fpm's
#        own time (what of the time was the application's, not the delivery's), to
#        benchmarks/out/<run>.access.log: whose work the backend did, and how long it
#        took, populations apart),
#        PIN=0 (1: the site (MariaDB, php-fpm, its nginx) on CPUs 1 and up, everything
#        else (the fronts, Redis, the load) on CPU 0, with `taskset`, at every N alike: on
#        2 shared cores the fleet's processes otherwise slow the wiki's own pages, more
#        with each node, as a fleet on hosts of its own would not).
# Needs: php8.2-fpm php8.2-cli php8.2-mysql mariadb-server mediawiki nginx-light varnish
#        curl python3 (and redis-server for NODES > 1 or REDIS=1). Targets and binds
#        127.0.0.0/8 only.
source "$(dirname "$0")/lib.sh"

QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
    FAIR_SECS=${FAIR_SECS:-10}
    STORM_SECS=${STORM_SECS:-15}
    TIMEOUT_SECS=${TIMEOUT_SECS:-15}
fi
FAIR_SECS=${FAIR_SECS:-30}
STORM_SECS=${STORM_SECS:-60}
TIMEOUT_SECS=${TIMEOUT_SECS:-30}
KINDS=${KINDS:-plain fake-session fake-session-each query login-flood replay}
VARIANTS=${VARIANTS:-}
read -r -a FRONTS <<<"${FRONTS:-nginx varnish levee}"
ROUNDS=${ROUNDS:-1}
READERS=${READERS:-8}
EDITORS=${EDITORS:-2}
PAGES=${PAGES:-8}
THINK_MS=${THINK_MS:-200}
EDIT_EVERY=${EDIT_EVERY:-5}
VISIBLE_SECS=${VISIBLE_SECS:-10}
# A crawler ignores Retry-After, but a real one is a network round trip away and does its
# own work between two requests; here it is on the same 2 cores as levee and the wiki, so
# asking again within microseconds of a refusal would measure this load generator's own
# CPU against the wiki's. 0: at once (the worst case, also recorded).
REFUSED_PAUSE_MS=${REFUSED_PAUSE_MS:-20}
SLOW_MS=${SLOW_MS:-0}
WEBSOCKETS=${WEBSOCKETS:-0}
LEVEE_FLAGS=${LEVEE_FLAGS:-}
NODES=${NODES:-1}
REDIS=${REDIS:-0}
ACCESS_LOG=${ACCESS_LOG:-0}
PIN=${PIN:-0}
# What starts the site's processes: pinned to CPUs 1.. with PIN=1 (then this script,
# and all else it starts, to CPU 0).
SITE_CPU=()
if [ "$PIN" = 1 ]; then
    cpus=$(nproc)
    [ "$cpus" -ge 2 ] || { echo "PIN=1 needs 2 CPUs or more; this machine has $cpus" >&2; exit 2; }
    command -v taskset >/dev/null || { echo "PIN=1 needs taskset (apt-get install -y util-linux)" >&2; exit 2; }
    taskset -cp 0 $$ >/dev/null
    SITE_CPU=(taskset -c "1-$((cpus - 1))")
fi
for n in $NODES; do
    [[ $n =~ ^[1-9][0-9]*$ ]] && [ "$n" -le 16 ] || { echo "NODES: $n is not a node count (1 to 16)" >&2; exit 2; }
done

# The fronts' runs: levee once per fleet size, tagged `levee` (one node, no Redis: as
# before the fleet) or `levee-nN` (N nodes on one Redis; REDIS=1 makes it levee-n1 at N=1).
RUN_FRONTS=()
for f in "${FRONTS[@]}"; do
    if [ "$f" = levee ]; then
        for n in $NODES; do
            if [ "$n" = 1 ] && [ "$REDIS" != 1 ]; then RUN_FRONTS+=(levee); else RUN_FRONTS+=("levee-n$n"); fi
        done
    else
        RUN_FRONTS+=("$f")
    fi
done
NEED_REDIS=0
for f in "${RUN_FRONTS[@]}"; do case $f in levee-n*) NEED_REDIS=1 ;; esac; done

need_tools nginx varnishd curl python3 php mariadbd
[ "$NEED_REDIS" = 0 ] || need_tools redis-server
[ -e /usr/share/mediawiki/index.php ] || {
    echo "missing: /usr/share/mediawiki; install with: apt-get install -y mediawiki php8.2-fpm php8.2-mysql mariadb-server" >&2
    exit 2
}
levee_binary
EXAMPLES="${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/examples"
if [ "${BUILD:-1}" = 1 ]; then
    log "building the wiki runner and the load (cargo build --release -p levee-test --example app --example storm --example ws_bench)"
    (cd "$REPO_DIR" && cargo build --release -p levee-test --example app --example storm --example ws_bench >&2)
fi
for x in app storm ws_bench; do
    [ -x "$EXAMPLES/$x" ] || die "no $EXAMPLES/$x (cargo build --release -p levee-test --example $x)"
    cp "$EXAMPLES/$x" "$WORK/$x" # a rebuild during the run must not change them
done
# 1,000 crawler connections, and as many again from a front to nginx.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
open_report storm
OUT_BASE=${OUT_FILE%.md}
if [ "$WEBSOCKETS" -gt 0 ]; then
    WS_PORT=$(free_port)
    start_bg ws-echo "$WORK/ws_bench" server "$WS_PORT"
    wait_port "$WS_PORT" "$BG_PID"
fi

# stop PID: stop_pid, then drop PID from the exit trap's list: a long run starts dozens of
# processes, and the trap must not signal a pid the system has since given to another.
stop() {
    local p keep=()
    stop_pid "$1"
    for p in "${BG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    BG_PIDS=("${keep[@]}")
}

# variant_flags VARIANT: the crawlers' addresses and connections (one-net: replay's, the
# 64 addresses all in 127.1.0.0/24, which storm.rs does for that kind).
variant_flags() {
    case $1 in
    many | one-net) echo "--crawler-addrs 64 --crawler-conns 64" ;;
    one) echo "--crawler-addrs 1 --crawler-conns 256" ;;
    thousand) echo "--crawler-addrs 1000 --crawler-conns 1000" ;;
    *) die "unknown variant $1 (many, one, thousand)" ;;
    esac
}
for v in $VARIANTS; do variant_flags "$v" >/dev/null; done

# kind_variants KIND: the variants a kind runs in (see the header).
kind_variants() {
    case $1 in
    replay) echo one-net ;;
    plain) echo "${VARIANTS:-many one thousand}" ;;
    fake-session | fake-session-each | query | login-flood) echo "${VARIANTS:-many}" ;;
    *) die "unknown kind $1 (plain, fake-session, fake-session-each, query, login-flood, replay)" ;;
    esac
}
for k in $KINDS; do kind_variants "$k" >/dev/null; done

# start_wiki TAG: a new MediaWiki with php-fpm's status page (sets APP_PID, SOCK,
# STATUS_SOCK).
start_wiki() {
    start_bg "wiki-$1" "${SITE_CPU[@]}" "$WORK/app" mediawiki
    APP_PID=$BG_PID
    for _ in $(seq 1200); do
        grep -q '^READY' "$WORK/wiki-$1.log" 2>/dev/null && break
        kill -0 "$APP_PID" 2>/dev/null || die "MediaWiki did not start; see $WORK/wiki-$1.log"
        sleep 0.1
    done
    grep -q '^READY' "$WORK/wiki-$1.log" || die "MediaWiki did not start in 120 s"
    SOCK=$(awk '$1 == "SOCKET" {print $2}' "$WORK/wiki-$1.log")
    enable_fpm_status "$1"
}

# enable_fpm_status TAG: php-fpm's status page (pm.status_path) for the wiki's pool, on a
# socket of its own (pm.status_listen, php-fpm >= 8.0: a hidden pool of its own answers
# it, so a sample neither waits behind the crawlers for one of the 4 workers nor takes
# one and counts itself busy). levee-test's app runner writes its php-fpm.conf beside the
# pool's socket and has no option for it: the two lines go into the section that listens
# on SOCK, and SIGUSR2 makes php-fpm reread its configuration (it re-executes itself,
# same pid, keeping its listening sockets; the app runner still stops it). Before the
# wiki's setup, so the new workers warm up as the old would have. Sets STATUS_SOCK.
enable_fpm_status() {
    local dir=${SOCK%/*} master
    STATUS_SOCK="$WORK/fpm-status-$1.sock"
    [ -f "$dir/php-fpm.conf" ] && [ -f "$dir/php-fpm.pid" ] ||
        die "no php-fpm.conf or php-fpm.pid beside $SOCK: cannot enable php-fpm's status page"
    python3 - "$dir/php-fpm.conf" "$SOCK" "$STATUS_SOCK" <<'PY' || die "$1: php-fpm.conf has no pool listening on $SOCK"
import sys
path, sock, status = sys.argv[1:]
lines = open(path).read().split("\n")
at = [i for i, l in enumerate(lines) if l.replace(" ", "") == f"listen={sock}"]
if not at:
    sys.exit(1)
lines[at[0] + 1:at[0] + 1] = ["pm.status_path = /fpm-status", f"pm.status_listen = {status}"]
open(path, "w").write("\n".join(lines))
PY
    master=$(cat "$dir/php-fpm.pid")
    kill -USR2 "$master"
    for _ in $(seq 100); do
        [ -S "$STATUS_SOCK" ] && break
        sleep 0.1
    done
    [ -S "$STATUS_SOCK" ] || die "$1: php-fpm did not open its status socket after SIGUSR2; see ${dir}/php-fpm.log"
}

# start_site NAME PORT STATUS_PORT: nginx in front of the wiki's php-fpm as MediaWiki's
# manual (Manual:Short URL/Nginx) configures it, with the wiki at the root: its PHP entry
# points to php-fpm (PATH_INFO for /index.php/Title), static resources with a week's
# expiry; and on STATUS_PORT, which no front is given, php-fpm's status page for the
# load's sampler, and nginx's own stub_status (the requests in it) (sets SITE_PID).
start_site() {
    local dir="$WORK/$1" user_line="" access="access_log off;"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && user_line="user root;"
    [ "$ACCESS_LOG" = 1 ] && access="map \$http_cookie \$storm_session { \"~_session=\" session; default -; }
    log_format storm '\$msec \$request_time \$status \"\$request_method \$request_uri\" \$storm_session \"\$http_user_agent\" \$upstream_response_time';
    access_log $dir/access.log storm;"
    cat >"$dir/nginx.conf" <<EOF
$user_line
worker_processes 2;
worker_rlimit_nofile 19000;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 9000; }
http {
    include /etc/nginx/mime.types;
    $access
    sendfile on;
    $(nginx_temp_paths "$dir")
    server {
        listen 127.0.0.1:$2 backlog=4096;
        root /usr/share/mediawiki;
        location ~ ^/(index|load|api|thumb|opensearch_desc|rest|img_auth)\.php(/|\$) {
            fastcgi_split_path_info ^(.+?\.php)(/.*)\$;
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_param PATH_INFO \$fastcgi_path_info;
            fastcgi_pass unix:$SOCK;
        }
        location ~ ^/resources/(assets|lib|src) { try_files \$uri =404; add_header Cache-Control "public"; expires 7d; }
        location ~ ^/(skins|extensions)/.+\.(css|js|gif|jpg|jpeg|png|svg|wasm|ttf|woff|woff2)\$ { try_files \$uri =404; add_header Cache-Control "public"; expires 7d; }
        location = / { return 301 /index.php?title=Main_Page; }
        location / { return 404; }
    }
    server {
        listen 127.0.0.1:$3;
        allow 127.0.0.1;
        deny all;
        location = /fpm-status {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME /fpm-status;
            fastcgi_pass unix:$STATUS_SOCK;
        }
        location = /nginx-status { stub_status; }
        location / { return 404; }
    }
}
EOF
    start_bg "$1" "${SITE_CPU[@]}" "$(command -v nginx || echo /usr/sbin/nginx)" -e stderr -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;'
    SITE_PID=$BG_PID
    wait_port "$2" "$SITE_PID"
    wait_port "$3" "$SITE_PID"
}

# start_redis TAG: a redis-server of the run's own on a free loopback port, no persistence
# (sets REDIS_PID, REDIS_PORT).
start_redis() {
    REDIS_PORT=$(free_port)
    mkdir -p "$WORK/redis-$1"
    start_bg "redis-$1" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' \
        --appendonly no --dir "$WORK/redis-$1" --protected-mode yes
    REDIS_PID=$BG_PID
    wait_port "$REDIS_PORT" "$REDIS_PID"
}

# start_front FRONT TAG SITE_PORT: sets FRONT_PORT, FRONT_PIDS (empty for nginx alone),
# TARGETS (the load's --target: every node, comma-separated) and, for levee, ADMIN_PORTS
# (one per node), NODES_N and REDIS_PID (empty without Redis). FRONT: nginx, varnish,
# levee or levee-nN (N nodes on one Redis).
start_front() {
    FRONT_PIDS=()
    ADMIN_PORTS=()
    REDIS_PID=""
    NODES_N=1
    case $1 in
    nginx) FRONT_PORT=$3 ;;
    varnish)
        FRONT_PORT=$(free_port)
        printf 'vcl 4.1;\nbackend default { .host = "127.0.0.1"; .port = "%s"; }\n' "$3" >"$WORK/default.vcl"
        start_varnish "varnish-$2" "$FRONT_PORT" "$WORK/default.vcl" malloc,256m
        FRONT_PIDS=("$VARNISH_PID")
        ;;
    levee | levee-n*)
        local k port admin redis=() ports=() common
        if [ "$1" != levee ]; then
            NODES_N=${1#levee-n}
            start_redis "$2"
            redis=(--cache-redis "redis://127.0.0.1:$REDIS_PORT/0")
        fi
        if [ "$WEBSOCKETS" -gt 0 ]; then
            # The same site, with a route to the WebSocket server the idle ones hold.
            printf '[[site]]\ndefault = true\nbackend = "http://127.0.0.1:%s"\npreset = ["mediawiki"]\n[[site.route]]\npath = "/ws/"\nbackend = "http://127.0.0.1:%s"\n' \
                "$3" "$WS_PORT" >"$WORK/levee-ws-$2.toml"
        fi
        for ((k = 0; k < NODES_N; k++)); do
            port=$(free_port)
            admin=$(free_port)
            if [ "$WEBSOCKETS" -gt 0 ]; then
                common=(--config "$WORK/levee-ws-$2.toml")
            else
                common=(--backend "http://127.0.0.1:$3" --preset mediawiki)
            fi
            # shellcheck disable=SC2086
            start_bg "levee-$2-node$k" "$LEVEE" serve --listen "127.0.0.1:$port" "${common[@]}" \
                --admin-listen "127.0.0.1:$admin" "${redis[@]}" $LEVEE_FLAGS
            FRONT_PIDS+=("$BG_PID")
            ports+=("$port")
            ADMIN_PORTS+=("$admin")
        done
        for ((k = 0; k < NODES_N; k++)); do wait_port "${ports[k]}" "${FRONT_PIDS[k]}"; done
        FRONT_PORT=${ports[0]}
        ADMIN_PORT=${ADMIN_PORTS[0]}
        TARGETS=$(printf 'http://127.0.0.1:%s,' "${ports[@]}")
        TARGETS=${TARGETS%,}
        [ -z "$REDIS_PID" ] || wait_fleet "$2"
        return 0
        ;;
    esac
    TARGETS="http://127.0.0.1:$FRONT_PORT"
}

# node_metric ADMIN_PORT NAME: levee_metric, bounded to 2 s (0 if no answer).
node_metric() {
    { curl -s --max-time 2 "http://127.0.0.1:$1/metrics" || true; } | awk -v n="$2" '$1 == n {v = $2} END {print v + 0}'
}

# wait_fleet TAG: up to 20 s for every node to see Redis and the whole fleet
# (levee_redis_up 1, levee_fleet_nodes NODES_N), as the fleet's integration tests do;
# logged (and the run goes on) when it does not.
wait_fleet() {
    local k i ok
    for ((i = 0; i < 200; i++)); do
        ok=1
        for ((k = 0; k < NODES_N; k++)); do
            [ "$(node_metric "${ADMIN_PORTS[k]}" levee_redis_up)" = 1 ] &&
                [ "$(node_metric "${ADMIN_PORTS[k]}" levee_fleet_nodes)" = "$NODES_N" ] || { ok=0; break; }
        done
        [ "$ok" = 1 ] && { log "$1: $NODES_N levee nodes see each other through Redis"; return 0; }
        sleep 0.1
    done
    log "$1: warning: after 20 s not every node counts $NODES_N nodes (levee_fleet_nodes:$(for p in "${ADMIN_PORTS[@]}"; do printf ' %s' "$(node_metric "$p" levee_fleet_nodes)"; done))"
}

# measure KIND VARIANT FRONT ROUND: one clean run; the load's JSON goes to
# $WORK/KIND-VARIANT-FRONT-rROUND.json.
measure() {
    local kind=$1 tag="$1-$2-$3-r$4" site_port status_port limit
    shift
    log "$tag: a new wiki"
    start_wiki "$tag"
    site_port=$(free_port)
    status_port=$(free_port)
    start_site "site-$tag" "$site_port" "$status_port"
    "$WORK/storm" setup --target "http://127.0.0.1:$site_port" --pages "$PAGES" --editors "$EDITORS" \
        >"$WORK/setup-$tag.log" 2>&1 || { cat "$WORK/setup-$tag.log" >&2; die "$tag: setup failed"; }
    curl -sf "http://127.0.0.1:$status_port/fpm-status?json" >/dev/null ||
        die "$tag: php-fpm's status page does not answer through nginx (127.0.0.1:$status_port)"
    start_front "$2" "$tag" "$site_port"
    log "$tag: ${FAIR_SECS} s fair weather, then ${STORM_SECS} s of storm ($kind crawlers, $(variant_flags "$1")$([ "$NODES_N" = 1 ] || echo ", $NODES_N nodes"))"
    limit=$((FAIR_SECS + STORM_SECS + 2 * TIMEOUT_SECS + VISIBLE_SECS + 120))
    # shellcheck disable=SC2046
    start_bg "storm-$tag" timeout -k 10 "$limit" "$WORK/storm" run --target "$TARGETS" \
        --fair-secs "$FAIR_SECS" --storm-secs "$STORM_SECS" --readers "$READERS" --editors "$EDITORS" \
        --pages "$PAGES" --think-ms "$THINK_MS" --edit-every-secs "$EDIT_EVERY" \
        --visible-within-secs "$VISIBLE_SECS" --timeout-secs "$TIMEOUT_SECS" \
        --refused-pause-ms "$REFUSED_PAUSE_MS" --slow-ms "$SLOW_MS" $(variant_flags "$1") \
        --crawler-kind "$kind" --fpm-status "http://127.0.0.1:$status_port/fpm-status" \
        --nginx-status "http://127.0.0.1:$status_port/nginx-status" \
        $([ -z "$REDIS_PID" ] || printf -- '--fleet-metrics %s' "$(printf 'http://127.0.0.1:%s/metrics,' "${ADMIN_PORTS[@]}" | sed 's/,$//')")
    LOAD_PID=$BG_PID
    local idle_pid=""
    if [ "$WEBSOCKETS" -gt 0 ] && [[ $2 == levee* ]]; then
        # WEBSOCKETS idle WebSockets through levee for the whole run, each asked for one
        # echo at its end.
        start_bg "ws-idle-$tag" "$WORK/ws_bench" idle "ws://127.0.0.1:$FRONT_PORT/ws/idle" \
            "$WEBSOCKETS" "$((FAIR_SECS + STORM_SECS))"
        idle_pid=$BG_PID
    fi
    wait "$LOAD_PID" || { cat "$WORK/storm-$tag.log" >&2; die "$tag: the load failed"; }
    if [ -n "$idle_pid" ]; then
        wait "$idle_pid" || true
        log "$tag: WebSockets held through the run: $(cat "$WORK/ws-idle-$tag.log")"
        echo "$tag $(cat "$WORK/ws-idle-$tag.log")" >>"$WORK/ws-idle.txt"
    fi
    grep -E '^([a-z]|SLOW)' "$WORK/storm-$tag.log" | sed "s/^/  $tag /" >&2
    sed -n 's/^RESULT //p' "$WORK/storm-$tag.log" >"$WORK/$tag.json"
    cp "$WORK/$tag.json" "$OUT_BASE-$tag.json"
    [ "$ACCESS_LOG" != 1 ] || cp "$WORK/site-$tag/access.log" "$OUT_BASE-$tag.access.log"
    if [[ $2 == levee* ]]; then
        # One node: $tag.metrics as before the fleet; N nodes: $tag-nodeK.metrics each.
        local k at
        for ((k = 0; k < NODES_N; k++)); do
            at=$OUT_BASE-$tag
            [ "$NODES_N" = 1 ] || at=$at-node$k
            curl -s --max-time 10 "http://127.0.0.1:${ADMIN_PORTS[k]}/metrics" >"$at.metrics" ||
                log "$tag: node $k: levee's /metrics did not answer"
            curl -s --max-time 10 "http://127.0.0.1:${ADMIN_PORTS[k]}/top.json" >"$at.top.json" ||
                log "$tag: node $k: levee's /top.json did not answer"
        done
    fi
    stop "$LOAD_PID"
    local p
    for p in "${FRONT_PIDS[@]}"; do stop "$p"; done
    [ -z "$REDIS_PID" ] || stop "$REDIS_PID"
    stop "$SITE_PID"
    stop "$APP_PID"
}

# The runs, "KIND:VARIANT", in order.
RUNS=()
for k in $KINDS; do
    for v in $(kind_variants "$k"); do RUNS+=("$k:$v"); done
done

report "# Storm: people first under overload, MediaWiki behind nginx, Varnish, levee ($(date '+%Y-%m-%d %H:%M'))" ""
report "- command: \`$([ "$QUICK" = 1 ] && echo "QUICK=1 ")FAIR_SECS=$FAIR_SECS STORM_SECS=$STORM_SECS KINDS=\"$KINDS\" VARIANTS=\"$VARIANTS\" FRONTS=\"${FRONTS[*]}\" NODES=\"$NODES\" REDIS=$REDIS ROUNDS=$ROUNDS WEBSOCKETS=$WEBSOCKETS$([ "$PIN" = 1 ] && echo " PIN=1")$([ -z "$LEVEE_FLAGS" ] || echo " LEVEE_FLAGS=\"$LEVEE_FLAGS\"") benchmarks/storm.sh\`"
machine_info
report "- site: MediaWiki $(dpkg-query -W -f '${Version}' mediawiki 2>/dev/null) from Debian's package, unchanged, on php-fpm $(php -r 'echo PHP_VERSION;') with 4 workers (pm = static) and MariaDB $(mariadbd --version | awk '{print $3}'); nginx (2 workers) with fastcgi_pass to it as MediaWiki's manual configures it. A new wiki, nginx and front for every run" \
    "- fronts: nginx alone; Varnish \`-s malloc,256m\` with the default VCL (\`backend default { .host = \"127.0.0.1\"; .port = \"NGINX\"; }\`); levee \`levee serve --listen 127.0.0.1:PORT --backend http://127.0.0.1:NGINX --preset mediawiki --admin-listen 127.0.0.1:ADMIN\`; a fleet of N nodes (nodes column, NODES=\"$NODES\"): N such processes, each with \`--cache-redis redis://127.0.0.1:REDIS/0\` to one redis-server of the run's own (\`--save '' --appendonly no\`), reader i, editor i (its login and its anonymous check too) and crawler connection i to node i mod N, every page viewed through every node before the clock; one node runs without Redis$([ "$REDIS" = 1 ] && echo " unless REDIS=1 (here: with it)" || echo " (REDIS=1: with it)")" \
    "- load (\`cargo run --release -p levee-test --example storm\`): $READERS readers (anonymous, 127.0.0.1, $PAGES articles of ~10 KiB wikitext, ${THINK_MS} ms think time); $EDITORS editors (logged in, viewing pages with the same think time, an API edit every ${EDIT_EVERY} s, then their own view of the page and an anonymous one until it shows the edit, at most ${VISIBLE_SECS} s); crawlers from the storm on, no think time, ${REFUSED_PAUSE_MS} ms after a 429/503, Retry-After ignored. Keep-alive connections, ${TIMEOUT_SECS} s per request" \
    "- crawler kinds: plain (uncacheable URLs: history with offsets, oldid, diffs, RecentChanges, WhatLinksHere, full-text search; no cookie); fake-session (the same with the wiki's session cookie, as the editors' login set it, and a made-up 32-character value per connection); fake-session-each (a new value per request); query (article pages with \`&x=<random>\`, no cookie); login-flood (Special:UserLogin posted with wrong passwords, no cookie jar); replay (one account's real session, logged in through the front before the clock, sent by all 64 connections from 64 addresses of one /24)" \
    "- phases: ${FAIR_SECS} s fair weather (readers and editors), then ${STORM_SECS} s of storm (crawlers too); a request counts in the phase it started in; p99 over every request of the population, errors included" \
    "- saves stored / shown / due: saves the API stored; saves the editor saw on their next view at once and anonymous readers within ${VISIBLE_SECS} s; due: what the editors' schedule asked for (fewer are made when saves take longer than ${EDIT_EVERY} s)" \
    "- crawler ok/s: 2xx and 3xx answers a second in the storm, and as a share of the same kind's on the site alone (the nginx row) when it ran; refused: 429 and 503 answers (crawlers'; readers' and editors' over both phases), all readable; unreadable: requests that got no status line (refused connect, reset, broken pipe, malformed answer), crawlers'; people's in the storm; refusal p99: of every refusal in the storm, all populations" \
    "- backend busy: the mean share of php-fpm's 4 workers at work (its status page, \`pm.status_path\` on a socket of its own, sampled every 0.2 s through a port of the site's nginx no front is given), fair → storm; backend max in the storm: php-fpm's active processes / requests in the site's nginx (stub_status Writing, waiting on php-fpm included), the most of the samples every 0.2 s, and in brackets the fleet's limit (levee_fleet_capacity sampled every second from every node during the storm, the most any reported)" \
    "- targets (PASS/FAIL per run, from the run): readers' storm p99 <= max(2 x fair p99, 100 ms) and every reader request 2xx; editors' storm p99 <= 2 x fair p99; every save due stored and shown in time; no refusal the client cannot read (no unreadable answer). For levee also refusals within 10 ms at p99, and its levee_unproven_sessions_total by outcome (0 when this levee has no such metric); for a fleet (Redis) also the backend's concurrency (the most requests sampled in the site's nginx and php-fpm's active processes) never above the fleet's limit (levee_fleet_capacity), and at N > 1 nodes the crawlers' ok/s at least the same round's 1-node levee run, when there is one (\`levee-n1\` with REDIS=1, else \`levee\`); each node's levee_fleet_* at the end" ""

run=0
for kv in "${RUNS[@]}"; do
    for ((r = 1; r <= ROUNDS; r++)); do
        n=${#RUN_FRONTS[@]}
        for ((i = 0; i < n; i++)); do
            measure "${kv%%:*}" "${kv#*:}" "${RUN_FRONTS[$(((i + run) % n))]}" "$r"
        done
        run=$((run + 1))
    done
done

python3 - "$WORK" "$OUT_BASE" "$ROUNDS" "${RUNS[*]}" "${RUN_FRONTS[@]}" <<'PY' | tee -a "$OUT_FILE"
import glob, json, os, re, sys
work, out_base, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = [r.split(":") for r in sys.argv[4].split()]
fronts = sys.argv[5:]

def nodes_of(front):
    """levee-nN: N nodes on one Redis; every other front: one process, no Redis."""
    m = re.fullmatch(r"levee-n(\d+)", front)
    return (int(m.group(1)), True) if m else (1, False)

def node_files(tag, ext):
    """levee's files after the storm: one (TAG.EXT) for one node, TAG-nodeK.EXT for each
    of N nodes, in node order."""
    one = f"{out_base}-{tag}.{ext}"
    if os.path.exists(one):
        return [one]
    found = glob.glob(f"{glob.escape(out_base)}-{tag}-node*.{ext}")
    return sorted(found, key=lambda p: int(re.search(r"-node(\d+)\.", p).group(1)))

def levee_refusal_p99(tag):
    """p99 of levee's own time to refuse (its levee_refusal_duration_seconds histogram,
    a bucket's upper bound, every node's added up): what the client's measure adds is
    this machine's CPU."""
    counts = {}
    for path in node_files(tag, "metrics"):
        for line in open(path):
            m = re.match(r'levee_refusal_duration_seconds_bucket\{le="([^"]+)"\} (\d+)', line)
            if m:
                le = float(m.group(1))
                counts[le] = counts.get(le, 0) + int(m.group(2))
    buckets = sorted(counts.items())
    if not buckets or buckets[-1][1] == 0:
        return None
    want = 0.99 * buckets[-1][1]
    return next(b * 1000 for b, n in buckets if n >= want)

FLEET = ("nodes", "share", "capacity", "in_flight", "people_waiting", "alone")

def fleet(tag):
    """Each node's levee_fleet_* at the end of the run ({} for a node without them)."""
    out = []
    for path in node_files(tag, "metrics"):
        v = {}
        for line in open(path):
            m = re.match(r"levee_fleet_(\w+)(?:\{[^}]*\})? (\S+)$", line.strip())
            if m and m.group(1) in FLEET:
                v[m.group(1)] = int(float(m.group(2)))
        out.append(v)
    return out

def unproven(tag):
    """levee_unproven_sessions_total by outcome (0 for an outcome, or a levee, without
    the metric), and the networks /top.json names for them."""
    counts = {"admitted": 0, "refused": 0}
    for path in node_files(tag, "metrics"):
        for line in open(path):
            m = re.match(r'levee_unproven_sessions_total\{[^}]*outcome="(\w+)"[^}]*\} (\S+)', line)
            if m and m.group(1) in counts:
                counts[m.group(1)] += int(float(m.group(2)))
    nets = None
    for path in node_files(tag, "top.json"):
        try:
            more = json.load(open(path)).get("unproven_session_networks")
        except (OSError, ValueError, AttributeError):
            more = None
        for x in more or []:
            # One network seen by several nodes: one entry, its requests added up.
            nets = nets or []
            same = next((y for y in nets if y.get("network") == x.get("network")), None)
            if same is None:
                nets.append(dict(x))
            elif isinstance(same.get("requests"), (int, float)) and isinstance(x.get("requests"), (int, float)):
                same["requests"] += x["requests"]
    if nets:
        nets.sort(key=lambda y: -y["requests"] if isinstance(y.get("requests"), (int, float)) else 0)
    return counts, nets

kinds = {"plain": "plain crawlers: uncacheable URLs, no cookie",
         "fake-session": "a made-up session cookie ({cookie}), one value per connection",
         "fake-session-each": "a made-up session cookie ({cookie}), a new value per request",
         "query": "article pages with a changing query string, no cookie",
         "login-flood": "a login flood: Special:UserLogin posted with wrong passwords, no cookie jar",
         "replay": "one real logged-in session ({cookie}) replayed by every crawler connection"}
variants = {"many": "64 connections from 64 addresses",
            "one": "256 connections from one address",
            "thousand": "1,000 connections from 1,000 addresses",
            "one-net": "64 connections from 64 addresses of one /24"}

def ms(v):
    return "-" if v is None else f"{v:,.0f}" if v >= 10 else f"{v:.1f}"

def pct(v):
    return "-" if v is None else f"{v:.0f}" if v >= 10 else f"{v:.1f}"

def both(x, key):
    return sum(x[p][key] for p in ("fair", "storm"))

def unreadable(t):
    return t["connect_errors"] + t["io_errors"]

def targets(d):
    """(name, ok, detail) for each of the run's targets."""
    r, e, ed = d["readers"], d["editors"], d["edits"]
    out = []
    fair, storm = r["fair"]["p99_ms"] or 0, r["storm"]["p99_ms"]
    bound = max(2 * fair, 100)
    n, good = both(r, "requests"), both(r, "s2xx")
    ok = storm is not None and storm <= bound and n > 0 and good == n
    out.append(("readers", ok, f"readers' p99 {ms(storm)} ms <= {ms(bound)} ms and 2xx {good}/{n}"))
    fair, storm = e["fair"]["p99_ms"] or 0, e["storm"]["p99_ms"]
    ok = storm is not None and storm <= 2 * fair
    out.append(("editors", ok, f"editors' p99 {ms(storm)} ms <= {ms(2 * fair)} ms"))
    saves, stored, shown, due = both(ed, "saves"), both(ed, "stored"), both(ed, "shown_both"), d["saves_due"]
    ok = due > 0 and saves == stored == shown == due
    out.append(("saves", ok, f"saves stored {stored}, shown {shown}, of {saves} made, {due} due"))
    c = d["crawlers"]["storm"]
    people = unreadable(r["storm"]) + unreadable(e["storm"])
    ok = unreadable(c) == 0 and people == 0
    out.append(("unreadable", ok, f"answers without a status line: crawlers {unreadable(c)}, people {people}"))
    return out

def busy(d):
    b = d.get("backend") or {}
    return " → ".join(pct((b.get(p) or {}).get("busy_pct")) for p in ("fair", "storm"))

def backend_max(d):
    """The storm's most php-fpm active processes and requests in the site's nginx
    (sampled), None where not sampled."""
    active = ((d.get("backend") or {}).get("storm") or {}).get("active_max")
    nginx = ((d.get("backend_in_flight") or {}).get("storm") or {}).get("max")
    return active, nginx

def show_n(v):
    return "-" if v is None else str(v)

for kind, v in runs:
    loaded = {}
    for f in fronts:
        for rnd in range(1, rounds + 1):
            tag = f"{kind}-{v}-{f}-r{rnd}"
            loaded[(f, rnd)] = (tag, json.load(open(f"{work}/{tag}.json")))
    cookie = next((d.get("session_cookie") for _, d in loaded.values() if d.get("session_cookie")), None)
    print(f"## {kinds[kind].format(cookie=f'`{cookie}`' if cookie else 'the wiki session cookie')}: {variants[v]}")
    print()
    print("| front | nodes | readers p99 ms fair → storm | readers 2xx | editors p99 ms fair → storm | saves stored / shown / due | crawler ok/s (of site alone) | refused 429/503 crawlers; people | unreadable crawlers; people | backend busy % fair → storm | backend max storm: php-fpm / nginx (fleet limit) | refusal p99 ms | targets |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    notes = []
    for f in fronts:
        for rnd in range(1, rounds + 1):
            tag, d = loaded[(f, rnd)]
            r, e, c, ed = d["readers"], d["editors"], d["crawlers"]["storm"], d["edits"]
            people = [sum(both(x, k) for x in (r, e)) for k in ("s429", "s503")]
            nodes, redis = nodes_of(f)
            base = "levee" if f.startswith("levee") else f
            name = base if rounds == 1 else f"{base} ({rnd})"
            # In the notes, a fleet's rows apart from one levee's.
            label = name if not redis else f"{name}, {nodes} node{'s' if nodes > 1 else ''} (Redis)"
            goodput = f"{c['ok_per_s']:,.1f}"
            bare = loaded.get(("nginx", rnd))
            if f != "nginx" and bare and bare[1]["crawlers"]["storm"]["ok_per_s"]:
                goodput += f" ({c['ok_per_s'] / bare[1]['crawlers']['storm']['ok_per_s']:.2f}×)"
            verdicts = targets(d)
            active, in_nginx = backend_max(d)
            nodes_fleet = fleet(tag) if f.startswith("levee") else []
            # The fleet's limit while the storm ran (sampled every second from every
            # node: the most any reported); the value at the end where not sampled.
            sampled = ((d.get("fleet_capacity") or {}).get("storm") or {}).get("max")
            limit = sampled or max((v.get("capacity", 0) for v in nodes_fleet), default=0)
            if redis and limit:
                seen = max(x for x in (active, in_nginx, 0) if x is not None)
                verdicts.append(("backend", active is not None and in_nginx is not None and seen <= limit,
                                 f"backend's concurrency in the storm at most {show_n(in_nginx)} in nginx, "
                                 f"{show_n(active)} php-fpm active <= the fleet's limit {limit}"))
            one = loaded.get(("levee-n1", rnd)) or loaded.get(("levee", rnd))
            if nodes > 1 and one:
                alone = one[1]["crawlers"]["storm"]["ok_per_s"]
                verdicts.append(("goodput", c["ok_per_s"] >= alone,
                                 f"crawlers' ok/s {c['ok_per_s']:,.1f} >= {alone:,.1f} on 1 node"))
                if alone:
                    goodput += f"; {c['ok_per_s'] / alone:.2f}× of 1 node"
            failed = [n for n, ok, _ in verdicts if not ok]
            limit_shown = f" ({limit})" if limit else ""
            print(f"| {name} | {nodes}{' (Redis)' if redis else ''} "
                  f"| {ms(r['fair']['p99_ms'])} → {ms(r['storm']['p99_ms'])} | {both(r, 's2xx')}/{both(r, 'requests')} "
                  f"| {ms(e['fair']['p99_ms'])} → {ms(e['storm']['p99_ms'])} "
                  f"| {both(ed, 'stored')} / {both(ed, 'shown_both')} / {d['saves_due']} | {goodput} "
                  f"| {c['s429']}/{c['s503']}; {people[0]}/{people[1]} "
                  f"| {unreadable(c)}; {unreadable(r['storm']) + unreadable(e['storm'])} | {busy(d)} "
                  f"| {show_n(active)} / {show_n(in_nginx)}{limit_shown} "
                  f"| {ms(d['refusal_p99_ms']['storm'])} | {'PASS' if not failed else 'FAIL: ' + ', '.join(failed)} |")
            if f.startswith("levee"):
                lines = [f"{detail}: {'PASS' if ok else 'FAIL'}" for _, ok, detail in verdicts]
                rp = d["refusal_p99_ms"]["storm"]
                if rp is not None:
                    own = levee_refusal_p99(tag)
                    lines.append(f"refusal p99 {ms(rp)} ms <= 10 ms: {'PASS' if rp <= 10 else 'FAIL'}"
                                 + (f" (levee's own <= {own:g} ms)" if own is not None else ""))
                counts, nets = unproven(tag)
                shown = ""
                if nets:
                    shown = " from " + ", ".join(f"{x.get('network')} ({x.get('requests')})" for x in nets[:3])
                lines.append(f"levee_unproven_sessions_total admitted {counts['admitted']}, refused {counts['refused']}{shown}")
                for k, v in enumerate(nodes_fleet):
                    if v:
                        lines.append(f"node {k} levee_fleet_* at the end: " + ", ".join(f"{x} {v[x]}" for x in FLEET if x in v))
                    elif redis:
                        lines.append(f"node {k}: no levee_fleet_* in its /metrics")
                if redis and len(nodes_fleet) != nodes:
                    lines.append(f"/metrics saved for {len(nodes_fleet)} of {nodes} nodes")
                notes.append(f"- {label}: " + "; ".join(lines))
            problems = [p for ph in ("fair", "storm") for p in ed[ph]["problems"]]
            errs = {k: r["storm"][k] + e["storm"][k] for k in ("timeouts", "connect_errors", "io_errors", "other_status")}
            others = {}
            for x in (r, e):
                for p in ("fair", "storm"):
                    for k, n in x[p]["other_statuses"].items():
                        others[k] = others.get(k, 0) + n
            if problems or any(errs.values()) or others:
                notes.append(f"- {label}, people's failures in the storm: {errs}; other statuses (both phases): {others}; edit problems: {problems[:2]}")
            if c["timeouts"] or c["other_status"]:
                notes.append(f"- {label}, crawlers: {c['timeouts']} timeouts; statuses other than 2xx/3xx/429/503: {c['other_statuses']}")
            b = d.get("backend") or {}
            failed_samples = sum((b.get(p) or {}).get("failed", 0) for p in ("fair", "storm"))
            if failed_samples:
                why = next(((b.get(p) or {}).get("why") for p in ("fair", "storm") if (b.get(p) or {}).get("why")), "")
                notes.append(f"- {label}: {failed_samples} php-fpm status samples failed ({why})")
            b = d.get("backend_in_flight") or {}
            failed_samples = sum((b.get(p) or {}).get("failed", 0) for p in ("fair", "storm"))
            if failed_samples:
                why = next(((b.get(p) or {}).get("why") for p in ("fair", "storm") if (b.get(p) or {}).get("why")), "")
                notes.append(f"- {label}: {failed_samples} nginx stub_status samples failed ({why})")
    print()
    print("\n".join(notes))
    print()
PY
if [ -s "$WORK/ws-idle.txt" ]; then
    report "" "WebSockets held idle through levee for each whole run (WEBSOCKETS=$WEBSOCKETS, 200 per /24, to a route's echo server), answering an echo at its end:"
    while read -r line; do report "- $line"; done <"$WORK/ws-idle.txt"
fi
report "Each run's JSON (every count, p50s, statuses, the backend's samples) and levee's /metrics and /top.json after its storm: \`$(basename "$OUT_BASE")-*\` in benchmarks/out/."
record_report
