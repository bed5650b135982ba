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
# Every run starts clean: a new wiki (database, php-fpm), a new nginx and a new front; the
# fronts alternate, the first one rotating with each run. After each levee storm its
# /metrics and /top.json go next to the report in benchmarks/out/.
#
# Usage: benchmarks/storm.sh                  (about 45 minutes: 8 runs x 3 fronts)
#        QUICK=1 benchmarks/storm.sh          (10 s + 15 s phases; about 20 minutes)
#        VARIANTS="one" FRONTS="levee" KINDS="plain replay" benchmarks/storm.sh
#        Tables go to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   FAIR_SECS STORM_SECS KINDS VARIANTS FRONTS="nginx varnish levee" ROUNDS=1 READERS EDITORS
#        PAGES THINK_MS=200 EDIT_EVERY=5 VISIBLE_SECS TIMEOUT_SECS=30 (per request),
#        REFUSED_PAUSE_MS=20 (a crawler's pause after a refusal; 0: none),
#        SLOW_MS=0 (print each editor's request slower than this, and when it started),
#        LEVEE, BUILD, KEEP_WORK,
#        WEBSOCKETS=0 (levee: that many idle WebSockets held open through levee, to a
#        route's echo server, for the whole run; the report says how many were still
#        answering at its end).
# Needs: php8.2-fpm php8.2-cli php8.2-mysql mariadb-server mediawiki nginx-light varnish
#        curl python3. Targets and binds 127.0.0.0/8 only.
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

need_tools nginx varnishd curl python3 php mariadbd
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
    start_bg "wiki-$1" "$WORK/app" mediawiki
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
# load's sampler (sets SITE_PID).
start_site() {
    local dir="$WORK/$1" user_line=""
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && user_line="user root;"
    cat >"$dir/nginx.conf" <<EOF
$user_line
worker_processes 2;
worker_rlimit_nofile 19000;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 9000; }
http {
    include /etc/nginx/mime.types;
    access_log off;
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
        location / { return 404; }
    }
}
EOF
    start_bg "$1" "$(command -v nginx || echo /usr/sbin/nginx)" -e stderr -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;'
    SITE_PID=$BG_PID
    wait_port "$2" "$SITE_PID"
    wait_port "$3" "$SITE_PID"
}

# start_front FRONT TAG SITE_PORT: sets FRONT_PORT, FRONT_PID (empty for nginx alone),
# ADMIN_PORT (levee).
start_front() {
    FRONT_PID=""
    case $1 in
    nginx) FRONT_PORT=$3 ;;
    varnish)
        FRONT_PORT=$(free_port)
        printf 'vcl 4.1;\nbackend default { .host = "127.0.0.1"; .port = "%s"; }\n' "$3" >"$WORK/default.vcl"
        start_varnish "varnish-$2" "$FRONT_PORT" "$WORK/default.vcl" malloc,256m
        FRONT_PID=$VARNISH_PID
        ;;
    levee)
        FRONT_PORT=$(free_port)
        ADMIN_PORT=$(free_port)
        if [ "$WEBSOCKETS" -gt 0 ]; then
            # The same site, with a route to the WebSocket server the idle ones hold.
            printf '[[site]]\ndefault = true\nbackend = "http://127.0.0.1:%s"\npreset = ["mediawiki"]\n[[site.route]]\npath = "/ws/"\nbackend = "http://127.0.0.1:%s"\n' \
                "$3" "$WS_PORT" >"$WORK/levee-ws-$2.toml"
            start_bg "levee-$2" "$LEVEE" serve --listen "127.0.0.1:$FRONT_PORT" \
                --config "$WORK/levee-ws-$2.toml" --admin-listen "127.0.0.1:$ADMIN_PORT"
            LEVEE_PID=$BG_PID
            wait_port "$FRONT_PORT" "$LEVEE_PID"
        else
            start_levee "levee-$2" "$FRONT_PORT" "$3" --preset mediawiki --admin-listen "127.0.0.1:$ADMIN_PORT"
        fi
        FRONT_PID=$LEVEE_PID
        ;;
    esac
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
    log "$tag: ${FAIR_SECS} s fair weather, then ${STORM_SECS} s of storm ($kind crawlers, $(variant_flags "$1"))"
    limit=$((FAIR_SECS + STORM_SECS + 2 * TIMEOUT_SECS + VISIBLE_SECS + 120))
    # shellcheck disable=SC2046
    start_bg "storm-$tag" timeout -k 10 "$limit" "$WORK/storm" run --target "http://127.0.0.1:$FRONT_PORT" \
        --fair-secs "$FAIR_SECS" --storm-secs "$STORM_SECS" --readers "$READERS" --editors "$EDITORS" \
        --pages "$PAGES" --think-ms "$THINK_MS" --edit-every-secs "$EDIT_EVERY" \
        --visible-within-secs "$VISIBLE_SECS" --timeout-secs "$TIMEOUT_SECS" \
        --refused-pause-ms "$REFUSED_PAUSE_MS" --slow-ms "$SLOW_MS" $(variant_flags "$1") \
        --crawler-kind "$kind" --fpm-status "http://127.0.0.1:$status_port/fpm-status"
    LOAD_PID=$BG_PID
    local idle_pid=""
    if [ "$WEBSOCKETS" -gt 0 ] && [ "$2" = levee ]; then
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
    if [ "$2" = levee ]; then
        curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" >"$OUT_BASE-$tag.metrics" ||
            log "$tag: levee's /metrics did not answer"
        curl -s "http://127.0.0.1:$ADMIN_PORT/top.json" >"$OUT_BASE-$tag.top.json" ||
            log "$tag: levee's /top.json did not answer"
    fi
    stop "$LOAD_PID"
    [ -z "$FRONT_PID" ] || stop "$FRONT_PID"
    stop "$SITE_PID"
    stop "$APP_PID"
}

# The runs, "KIND:VARIANT", in order.
RUNS=()
for k in $KINDS; do
    for v in $(kind_variants "$k"); do RUNS+=("$k:$v"); done
done

report "# Storm: people first under overload, MediaWiki behind nginx, Varnish, levee ($(date '+%Y-%m-%d %H:%M'))" ""
report "- command: \`$([ "$QUICK" = 1 ] && echo "QUICK=1 ")FAIR_SECS=$FAIR_SECS STORM_SECS=$STORM_SECS KINDS=\"$KINDS\" VARIANTS=\"$VARIANTS\" FRONTS=\"${FRONTS[*]}\" ROUNDS=$ROUNDS WEBSOCKETS=$WEBSOCKETS benchmarks/storm.sh\`"
machine_info
report "- site: MediaWiki $(dpkg-query -W -f '${Version}' mediawiki 2>/dev/null) from Debian's package, unchanged, on php-fpm $(php -r 'echo PHP_VERSION;') with 4 workers (pm = static) and MariaDB $(mariadbd --version | awk '{print $3}'); nginx (2 workers) with fastcgi_pass to it as MediaWiki's manual configures it. A new wiki, nginx and front for every run" \
    "- fronts: nginx alone; Varnish \`-s malloc,256m\` with the default VCL (\`backend default { .host = \"127.0.0.1\"; .port = \"NGINX\"; }\`); levee \`levee serve --listen 127.0.0.1:PORT --backend http://127.0.0.1:NGINX --preset mediawiki --admin-listen 127.0.0.1:ADMIN\`" \
    "- load (\`cargo run --release -p levee-test --example storm\`): $READERS readers (anonymous, 127.0.0.1, $PAGES articles of ~10 KiB wikitext, ${THINK_MS} ms think time); $EDITORS editors (logged in, viewing pages with the same think time, an API edit every ${EDIT_EVERY} s, then their own view of the page and an anonymous one until it shows the edit, at most ${VISIBLE_SECS} s); crawlers from the storm on, no think time, ${REFUSED_PAUSE_MS} ms after a 429/503, Retry-After ignored. Keep-alive connections, ${TIMEOUT_SECS} s per request" \
    "- crawler kinds: plain (uncacheable URLs: history with offsets, oldid, diffs, RecentChanges, WhatLinksHere, full-text search; no cookie); fake-session (the same with the wiki's session cookie, as the editors' login set it, and a made-up 32-character value per connection); fake-session-each (a new value per request); query (article pages with \`&x=<random>\`, no cookie); login-flood (Special:UserLogin posted with wrong passwords, no cookie jar); replay (one account's real session, logged in through the front before the clock, sent by all 64 connections from 64 addresses of one /24)" \
    "- phases: ${FAIR_SECS} s fair weather (readers and editors), then ${STORM_SECS} s of storm (crawlers too); a request counts in the phase it started in; p99 over every request of the population, errors included" \
    "- saves stored / shown / due: saves the API stored; saves the editor saw on their next view at once and anonymous readers within ${VISIBLE_SECS} s; due: what the editors' schedule asked for (fewer are made when saves take longer than ${EDIT_EVERY} s)" \
    "- crawler ok/s: 2xx and 3xx answers a second in the storm, and as a share of the same kind's on the site alone (the nginx row) when it ran; refused: 429 and 503 answers (crawlers'; readers' and editors' over both phases), all readable; unreadable: requests that got no status line (refused connect, reset, broken pipe, malformed answer), crawlers'; people's in the storm; refusal p99: of every refusal in the storm, all populations" \
    "- backend busy: the mean share of php-fpm's 4 workers at work (its status page, \`pm.status_path\` on a socket of its own, sampled every 0.2 s through a port of the site's nginx no front is given), fair → storm" \
    "- targets (PASS/FAIL per run, from the run): readers' storm p99 <= max(2 x fair p99, 100 ms) and every reader request 2xx; editors' storm p99 <= 2 x fair p99; every save due stored and shown in time; no refusal the client cannot read (no unreadable answer). For levee also refusals within 10 ms at p99, and its levee_unproven_sessions_total by outcome (0 when this levee has no such metric)" ""

run=0
for kv in "${RUNS[@]}"; do
    for ((r = 1; r <= ROUNDS; r++)); do
        n=${#FRONTS[@]}
        for ((i = 0; i < n; i++)); do
            measure "${kv%%:*}" "${kv#*:}" "${FRONTS[$(((i + run) % n))]}" "$r"
        done
        run=$((run + 1))
    done
done

python3 - "$WORK" "$OUT_BASE" "$ROUNDS" "${RUNS[*]}" "${FRONTS[@]}" <<'PY' | tee -a "$OUT_FILE"
import json, os, re, sys
work, out_base, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = [r.split(":") for r in sys.argv[4].split()]
fronts = sys.argv[5:]

def levee_refusal_p99(tag):
    """p99 of levee's own time to refuse (its levee_refusal_duration_seconds histogram,
    a bucket's upper bound): what the client's measure adds is this machine's CPU."""
    path = f"{out_base}-{tag}.metrics"
    if not os.path.exists(path):
        return None
    buckets = []
    for line in open(path):
        m = re.match(r'levee_refusal_duration_seconds_bucket\{le="([^"]+)"\} (\d+)', line)
        if m:
            buckets.append((float(m.group(1)), int(m.group(2))))
    if not buckets or buckets[-1][1] == 0:
        return None
    want = 0.99 * buckets[-1][1]
    return next(b * 1000 for b, n in buckets if n >= want)

def unproven(tag):
    """levee_unproven_sessions_total by outcome (0 for an outcome, or a levee, without
    the metric), and the networks /top.json names for them."""
    counts = {"admitted": 0, "refused": 0}
    path = f"{out_base}-{tag}.metrics"
    if os.path.exists(path):
        for line in open(path):
            m = re.match(r'levee_unproven_sessions_total\{[^}]*outcome="(\w+)"[^}]*\} (\S+)', line)
            if m and m.group(1) in counts:
                counts[m.group(1)] = int(float(m.group(2)))
    nets = None
    try:
        nets = json.load(open(f"{out_base}-{tag}.top.json")).get("unproven_session_networks")
    except (OSError, ValueError, AttributeError):
        pass
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

for kind, v in runs:
    loaded = {}
    for f in fronts:
        for rnd in range(1, rounds + 1):
            tag = f"{kind}-{v}-{f}-r{rnd}"
            loaded[(f, rnd)] = (tag, json.load(open(f"{work}/{tag}.json")))
    cookie = next((d.get("session_cookie") for _, d in loaded.values() if d.get("session_cookie")), None)
    print(f"## {kinds[kind].format(cookie=f'`{cookie}`' if cookie else 'the wiki session cookie')}: {variants[v]}")
    print()
    print("| front | readers p99 ms fair → storm | readers 2xx | editors p99 ms fair → storm | saves stored / shown / due | crawler ok/s (of site alone) | refused 429/503 crawlers; people | unreadable crawlers; people | backend busy % fair → storm | refusal p99 ms | targets |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    notes = []
    for f in fronts:
        for rnd in range(1, rounds + 1):
            tag, d = loaded[(f, rnd)]
            r, e, c, ed = d["readers"], d["editors"], d["crawlers"]["storm"], d["edits"]
            people = [sum(both(x, k) for x in (r, e)) for k in ("s429", "s503")]
            name = f if rounds == 1 else f"{f} ({rnd})"
            goodput = f"{c['ok_per_s']:,.1f}"
            bare = loaded.get(("nginx", rnd))
            if f != "nginx" and bare and bare[1]["crawlers"]["storm"]["ok_per_s"]:
                goodput += f" ({c['ok_per_s'] / bare[1]['crawlers']['storm']['ok_per_s']:.2f}×)"
            verdicts = targets(d)
            failed = [n for n, ok, _ in verdicts if not ok]
            print(f"| {name} | {ms(r['fair']['p99_ms'])} → {ms(r['storm']['p99_ms'])} | {both(r, 's2xx')}/{both(r, 'requests')} "
                  f"| {ms(e['fair']['p99_ms'])} → {ms(e['storm']['p99_ms'])} "
                  f"| {both(ed, 'stored')} / {both(ed, 'shown_both')} / {d['saves_due']} | {goodput} "
                  f"| {c['s429']}/{c['s503']}; {people[0]}/{people[1]} "
                  f"| {unreadable(c)}; {unreadable(r['storm']) + unreadable(e['storm'])} | {busy(d)} "
                  f"| {ms(d['refusal_p99_ms']['storm'])} | {'PASS' if not failed else 'FAIL: ' + ', '.join(failed)} |")
            if f == "levee":
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
                notes.append(f"- {name}: " + "; ".join(lines))
            problems = [p for ph in ("fair", "storm") for p in ed[ph]["problems"]]
            errs = {k: r["storm"][k] + e["storm"][k] for k in ("timeouts", "connect_errors", "io_errors", "other_status")}
            others = {}
            for x in (r, e):
                for p in ("fair", "storm"):
                    for k, n in x[p]["other_statuses"].items():
                        others[k] = others.get(k, 0) + n
            if problems or any(errs.values()) or others:
                notes.append(f"- {name}, people's failures in the storm: {errs}; other statuses (both phases): {others}; edit problems: {problems[:2]}")
            if c["timeouts"] or c["other_status"]:
                notes.append(f"- {name}, crawlers: {c['timeouts']} timeouts; statuses other than 2xx/3xx/429/503: {c['other_statuses']}")
            b = d.get("backend") or {}
            failed_samples = sum((b.get(p) or {}).get("failed", 0) for p in ("fair", "storm"))
            if failed_samples:
                why = next(((b.get(p) or {}).get("why") for p in ("fair", "storm") if (b.get(p) or {}).get("why")), "")
                notes.append(f"- {name}: {failed_samples} php-fpm status samples failed ({why})")
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
