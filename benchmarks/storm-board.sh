#!/usr/bin/env bash
# benchmarks/storm-board.sh: people first under a crawler storm, on a second real
# application: gnuboard5 (github:gnuboard/gnuboard5, the Korean PHP forum), installed by
# benchmarks/seedapps/gnuboard5.sh's web-installer driver on php-fpm (4 workers) and a
# private MariaDB, in front of which one of:
#   - direct: nginx as seedapps.sh deploys PHP applications (lib.sh's start_nginx_php);
#   - levee:  `levee serve --preset gnuboard --backend fastcgi+unix:SOCK --root DIR`, as
#             seedapps.sh runs it (plus --admin-listen for /metrics and --debug-headers for
#             X-Cache-Reason; neither changes what is served).
# Three populations (crates/levee-test/examples/storm_board.rs):
#   - readers: READERS=8 anonymous clients from 127.0.0.1 reading the front page, the
#     board's list and a few posts, THINK_MS=200 between pages, keeping the cookies
#     gnuboard gives them and sending them back: each first opens gnuboard5.sh's
#     FIRST_VISIT (the login form, never stored) before the clock, where a browser gets
#     its PHP session, and reads with it (levee must know it for an anonymous visitor's
#     and serve them from the cache);
#   - members: MEMBERS=2 users logged in through the front before the clock (seedapps'
#     login_gnuboard5), from 127.0.0.1 too (one /24 with the readers: an office, a NAT;
#     as storm.sh's editors), viewing pages with the same think time and writing a post on the
#     `free` board every POST_EVERY=5-10 s (a random interval in the range); each post must
#     show at once to the member and to anonymous readers of the board's list within
#     VISIBLE_SECS=10 (the gnuboard preset's anonymous TTL is 10 s);
#   - crawlers: from the storm on, CRAWLER_CONNS=64 connections from 64 loopback /24s
#     (127.1.N.1), no think time, of one of the KINDS per run:
#       search:            the site-wide search and the board's own, random words, no cookie;
#       member-pages:      bbs/profile.php?mb_id= (real and guessed ids), bbs/memo.php,
#                          bbs/new.php?mb_id=, no cookie;
#       fake-session:      the search URLs with a made-up `PHPSESSID` (26 characters, as
#                          PHP makes them), one per connection;
#       fake-session-each: the same with a new made-up value on every request.
# FAIR_SECS=30 of readers and members alone, then STORM_SECS=60 with the crawlers too.
# The backend's busy share: php-fpm's status page (pm.status_path, added to the pool the
# scripts write, on a socket of its own answered by a hidden pool, so a sample neither
# waits behind the crawlers nor takes a worker), reached through an nginx of its own that
# answers 127.0.0.1 only and that no front is given; sampled 5 times a second with every
# process (`?json&full`): a worker is busy while it runs a request. (php-fpm's summary
# counts a worker waiting on levee's kept-alive FastCGI connection as active;
# storm_board/workers.rs.)
# Every run starts clean: a new copy of the source, a new database (same MariaDB), a new
# php-fpm, nginx and front. After each levee run its /metrics and /top.json go next to the
# report in benchmarks/out/.
#
# Usage: benchmarks/storm-board.sh SRC_DIR     (SRC_DIR/gnuboard5: a clone, or the `fetch`
#                                              tool's bare mirror, as seedapps.sh takes it)
#        QUICK=1 benchmarks/storm-board.sh SRC_DIR              (10 s + 15 s phases)
#        QUICK=1 KINDS="search fake-session" FRONTS="direct levee" RECORD=0 benchmarks/storm-board.sh SRC_DIR
#        Tables go to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   FAIR_SECS STORM_SECS KINDS FRONTS="direct levee" READERS MEMBERS POSTS=5 (posts
#        readers read) THINK_MS POST_EVERY VISIBLE_SECS TIMEOUT_SECS=30 (per request)
#        REFUSED_PAUSE_MS=20 (a crawler's pause after a refusal; 0: none) CRAWLER_CONNS
#        PHP_WORKERS=4, LEVEE, BUILD, KEEP_WORK.
# Needs: php8.2-fpm php8.2-cli php8.2-mysql php8.2-{gd,mbstring,xml,curl,zip,intl}
#        mariadb-server nginx-light curl python3. Targets and binds 127.0.0.0/8 only.
source "$(dirname "$0")/lib.sh"
source "$BENCH_DIR/seedapps/common.sh"
source "$BENCH_DIR/seedapps/gnuboard5.sh"

SRC=${1:-}
[ -n "$SRC" ] && [ -e "$SRC/gnuboard5" ] ||
    { echo "usage: benchmarks/storm-board.sh SRC_DIR (SRC_DIR/gnuboard5: github:gnuboard/gnuboard5)" >&2; exit 2; }
G5_SRC=$(cd "$SRC/gnuboard5" && pwd)

QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
    FAIR_SECS=${FAIR_SECS:-10}
    STORM_SECS=${STORM_SECS:-15}
    TIMEOUT_SECS=${TIMEOUT_SECS:-15}
fi
FAIR_SECS=${FAIR_SECS:-30}
STORM_SECS=${STORM_SECS:-60}
TIMEOUT_SECS=${TIMEOUT_SECS:-30}
KINDS=${KINDS:-search member-pages fake-session fake-session-each}
read -r -a FRONTS <<<"${FRONTS:-direct levee}"
READERS=${READERS:-8}
MEMBERS=${MEMBERS:-2}
POSTS=${POSTS:-5}
THINK_MS=${THINK_MS:-200}
POST_EVERY=${POST_EVERY:-5-10}
VISIBLE_SECS=${VISIBLE_SECS:-10}
CRAWLER_CONNS=${CRAWLER_CONNS:-64}
PHP_WORKERS=${PHP_WORKERS:-4}
# As storm.sh: a crawler ignores Retry-After, but a real one is a network round trip away
# and does its own work between two requests; here it shares 2 cores with levee and the
# forum, so asking again within microseconds of a refusal would measure this load
# generator's CPU against the forum's. 0: at once.
REFUSED_PAUSE_MS=${REFUSED_PAUSE_MS:-20}

for k in $KINDS; do
    case $k in search | member-pages | fake-session | fake-session-each) ;;
    *) die "unknown kind $k (search, member-pages, fake-session, fake-session-each)" ;; esac
done
for f in "${FRONTS[@]}"; do
    case $f in direct | levee) ;; *) die "unknown front $f (direct, levee)" ;; esac
done
need_tools nginx curl php mariadbd python3 timeout
# Every curl here, the sourced seedapps functions' too, within a bound: their calls set
# none, and a front that stops answering must fail the run, not hang it.
export CURL_HOME="$WORK/curl"
mkdir -p "$CURL_HOME"
echo 'max-time = 120' >"$CURL_HOME/.curlrc"
levee_binary
EXAMPLES="${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/examples"
if [ "${BUILD:-1}" = 1 ]; then
    log "building the load (cargo build --release -p levee-test --example storm_board)"
    (cd "$REPO_DIR" && cargo build --release -p levee-test --example storm_board >&2)
fi
[ -x "$EXAMPLES/storm_board" ] || die "no $EXAMPLES/storm_board (cargo build --release -p levee-test --example storm_board)"
cp "$EXAMPLES/storm_board" "$WORK/storm_board" # a rebuild during the run must not change it
# 64 crawler connections, and as many again from nginx to php-fpm.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
open_report storm-board
OUT_BASE=${OUT_FILE%.md}

# stop PID: stop_pid, then drop PID from the exit trap's list (as storm.sh: a run starts
# many processes, and the trap must not signal a pid the system has since reused).
stop() {
    local p keep=()
    stop_pid "$1"
    for p in "${BG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    BG_PIDS=("${keep[@]}")
}

# copy_gnuboard DEST: the source tree (a clone's files, or a bare mirror's HEAD).
copy_gnuboard() {
    if [ -d "$G5_SRC/.git" ] || [ ! -f "$G5_SRC/HEAD" ]; then
        cp -r "$G5_SRC" "$1"
        rm -rf "$1/.git"
    else
        mkdir -p "$1" && git -C "$G5_SRC" archive HEAD | tar -x -C "$1"
    fi
}

# start_status_nginx NAME PORT: php-fpm's status page on 127.0.0.1:PORT/fpm-status, for
# 127.0.0.1 only, from STATUS_SOCK (sets STATUS_PID). Its own server: lib.sh's
# start_nginx_php, the direct front, is left as seedapps.sh runs it.
start_status_nginx() {
    local dir="$WORK/$1" user_line=""
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && user_line="user root;"
    cat >"$dir/nginx.conf" <<EOF
$user_line
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 64; }
http {
    access_log off;
    $(nginx_temp_paths "$dir")
    server {
        listen 127.0.0.1:$2;
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
    STATUS_PID=$BG_PID
    wait_port "$2" "$STATUS_PID"
}

# start_forum TAG: a new gnuboard5 on php-fpm and nginx, installed through its web
# installer; members storm1..stormN; POSTS posts to read. Sets ROOT, PHP_PID, DIRECT_PID,
# DIRECT_PORT, STATUS_PID, STATUS_PORT, READ_PAGES.
start_forum() {
    local tag=$1 i id ids=() sql base
    ROOT="$WORK/gnuboard5-$tag"
    copy_gnuboard "$ROOT"
    [ -z "$MARIADB_SOCK" ] || mariadb_sql "DROP DATABASE IF EXISTS gnuboard5"
    php_fpm_conf gnuboard5 "$PHP_WORKERS"
    STATUS_SOCK="$WORK/fpm-status-$tag.sock"
    # The pool's section is the file's last: these lines go into it. The sessions go
    # under $WORK: PHP's default is /tmp, where Debian's php.ini never collects them
    # (gc_probability 0), and every crawler request without a cookie starts one.
    mkdir -p "$WORK/sessions-$tag"
    printf '%s\n' "pm.status_path = /fpm-status" "pm.status_listen = $STATUS_SOCK" \
        "php_admin_value[session.save_path] = $WORK/sessions-$tag" >>"$WORK/php-fpm.conf"
    start_php_fpm
    for _ in $(seq 100); do [ -S "$STATUS_SOCK" ] && break; sleep 0.1; done
    [ -S "$STATUS_SOCK" ] || die "$tag: php-fpm did not open $STATUS_SOCK; see $WORK/php-fpm-error.log"
    DIRECT_PORT=$(free_port)
    start_nginx_php "nginx-$tag" "$DIRECT_PORT" "$SOCK" "$ROOT"
    STATUS_PORT=$(free_port)
    start_status_nginx "status-$tag" "$STATUS_PORT"
    # Named `base`: gnuboard5.sh's gnuboard5_post builds its form URL from `$base` in the
    # same `local` line that sets it, so it reads its caller's `base` (bash expands the
    # line before it assigns).
    base="http://127.0.0.1:$DIRECT_PORT"
    rm -f "$WORK/gnuboard5-install.jar" "$WORK/gnuboard5-admin.jar"
    install_gnuboard5 "$base" >"$WORK/install-$tag.log" || die "$tag: install failed"
    # Members post every few seconds: gnuboard's default write interval (cf_delay_sec, 30 s
    # for everyone but the admin) would refuse them, so the forum allows it as an active
    # forum's admin would. The members are the admin's row copied (its password hash:
    # G5_PASSWORD logs them in) as level-2 members: the registration form has a captcha.
    sql="USE gnuboard5; UPDATE g5_config SET cf_delay_sec = 0;"
    for ((i = 1; i <= MEMBERS; i++)); do
        id="storm$i"
        ids+=("$id")
        sql+=" CREATE TEMPORARY TABLE m$i AS SELECT * FROM g5_member WHERE mb_id = '$G5_USER';"
        sql+=" UPDATE m$i SET mb_no = mb_no + 1000 + $i, mb_id = '$id', mb_name = 'Storm member $i',"
        sql+=" mb_nick = 'StormMember$i', mb_email = '$id@example.com', mb_level = 2;"
        sql+=" INSERT INTO g5_member SELECT * FROM m$i;"
    done
    mariadb_sql "$sql"
    MEMBER_IDS=("${ids[@]}")
    # Posts to read, by the admin (the install left it logged in): the install's second
    # post and POSTS - 1 more.
    READ_PAGES=(/ "/bbs/board.php?bo_table=$G5_BOARD" "${PAGES[1]}")
    for ((i = 2; i <= POSTS; i++)); do
        id=$(gnuboard5_post "$base" "$WORK/gnuboard5-admin.jar" "Storm reading $i" "$(gnuboard5_lorem)") ||
            die "$tag: the admin's post $i failed"
        READ_PAGES+=("/bbs/board.php?bo_table=$G5_BOARD&wr_id=$id")
    done
}

# start_front FRONT TAG: sets FRONT_PORT, FRONT_PID (empty for direct), ADMIN_PORT.
start_front() {
    FRONT_PID=""
    ADMIN_PORT=""
    case $1 in
    direct) FRONT_PORT=$DIRECT_PORT ;;
    levee)
        FRONT_PORT=$(free_port)
        ADMIN_PORT=$(free_port)
        start_bg "levee-$2" "$LEVEE" serve --listen "127.0.0.1:$FRONT_PORT" --preset "$APP_PRESET" \
            --backend "fastcgi+unix:$SOCK" --root "$ROOT" --admin-listen "127.0.0.1:$ADMIN_PORT" --debug-headers
        FRONT_PID=$BG_PID
        wait_port "$FRONT_PORT" "$FRONT_PID"
        ;;
    esac
}

# reason_of CURL-ARGS... : X-Cache and X-Cache-Reason of one GET through the front.
reason_of() {
    curl -s -o /dev/null -D - -A "$FIREFOX_UA" "$@" | tr -d '\r' |
        awk -F': ' 'tolower($1) == "x-cache" {c = $2} tolower($1) == "x-cache-reason" {r = $2}
            END {printf "%s (%s)", c ? c : "-", r ? r : "no reason"}'
}

# measure KIND FRONT: one clean run; the load's JSON goes to $WORK/KIND-FRONT.json.
measure() {
    local kind=$1 front=$2 tag="$1-$2" base i jars=() load_args=() p limit
    log "$tag: a new forum"
    start_forum "$tag"
    start_front "$front" "$tag"
    base="http://127.0.0.1:$FRONT_PORT"
    # The members log in through the front, as a browser: the login levee sees is what
    # proves their sessions.
    for ((i = 1; i <= MEMBERS; i++)); do
        G5_USER="storm$i" login_gnuboard5 "$base" "$WORK/member-$tag-$i.jar" ||
            die "$tag: member storm$i cannot log in through $front"
        jars+=(--member-jar "$WORK/member-$tag-$i.jar" --member-id "storm$i")
    done
    if [ "$front" = levee ]; then
        # What levee makes of a member, and of a made-up session, before the clock.
        printf '%s\n' "member's front page: $(reason_of -b "$WORK/member-$tag-1.jar" "$base/")" \
            "made-up PHPSESSID on a search: $(reason_of -H "Cookie: PHPSESSID=leveestormmadeup0123456789" "$base/bbs/search.php?sfl=wr_subject&stx=probe")" \
            >"$WORK/$tag.probes"
        sed "s/^/  $tag: /" "$WORK/$tag.probes" >&2
    fi
    for p in "${READ_PAGES[@]}"; do load_args+=(--page "$p"); done
    log "$tag: ${FAIR_SECS} s fair weather, then ${STORM_SECS} s of storm ($kind crawlers)"
    limit=$((FAIR_SECS + STORM_SECS + 2 * TIMEOUT_SECS + VISIBLE_SECS + 120))
    start_bg "load-$tag" timeout -k 10 "$limit" "$WORK/storm_board" --target "$base" \
        "${load_args[@]}" "${jars[@]}" --member-mark "$MEMBER_MARK" --board "$G5_BOARD" --first-visit "$FIRST_VISIT" \
        --readers "$READERS" --think-ms "$THINK_MS" --post-every-secs "$POST_EVERY" \
        --crawler-kind "$kind" --crawler-addrs "$CRAWLER_CONNS" --crawler-conns "$CRAWLER_CONNS" \
        --fair-secs "$FAIR_SECS" --storm-secs "$STORM_SECS" --visible-within-secs "$VISIBLE_SECS" \
        --timeout-secs "$TIMEOUT_SECS" --refused-pause-ms "$REFUSED_PAUSE_MS" \
        --fpm-status "http://127.0.0.1:$STATUS_PORT/fpm-status"
    LOAD_PID=$BG_PID
    wait "$LOAD_PID" || { cat "$WORK/load-$tag.log" >&2; die "$tag: the load failed"; }
    grep -Ev '^RESULT' "$WORK/load-$tag.log" | sed "s/^/  $tag /" >&2
    sed -n 's/^RESULT //p' "$WORK/load-$tag.log" >"$WORK/$tag.json"
    cp "$WORK/$tag.json" "$OUT_BASE-$tag.json"
    if [ "$front" = levee ]; then
        curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" >"$OUT_BASE-$tag.metrics" ||
            log "$tag: levee's /metrics did not answer"
        curl -s "http://127.0.0.1:$ADMIN_PORT/top.json" >"$OUT_BASE-$tag.top.json" ||
            log "$tag: levee's /top.json did not answer"
        cp "$WORK/$tag.probes" "$OUT_BASE-$tag.probes"
    fi
    stop "$LOAD_PID"
    [ -z "$FRONT_PID" ] || stop "$FRONT_PID"
    stop "$STATUS_PID"
    stop "$DIRECT_PID"
    stop "$PHP_PID"
    # 43 MB per copy: not kept across runs unless asked.
    [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$ROOT" "$WORK/sessions-$tag"
}

report "# Storm on a forum: gnuboard5, direct vs levee, people first under crawlers ($(date '+%Y-%m-%d %H:%M'))" ""
report "- command: \`$([ "$QUICK" = 1 ] && echo "QUICK=1 ")FAIR_SECS=$FAIR_SECS STORM_SECS=$STORM_SECS KINDS=\"$KINDS\" FRONTS=\"${FRONTS[*]}\" benchmarks/storm-board.sh SRC_DIR\`"
machine_info
report "- site: gnuboard5 $(git -C "$G5_SRC" log -1 --format='%h (%cd)' --date=short 2>/dev/null || echo '(commit unknown)') from github:gnuboard/gnuboard5, installed by its web installer (benchmarks/seedapps/gnuboard5.sh; forum only, theme basic), write interval 0 s, $MEMBERS level-2 members; php-fpm $(php -r 'echo PHP_VERSION;') with $PHP_WORKERS workers (pm = static), MariaDB $(mariadbd --version | awk '{print $3}'). A new copy, database, php-fpm and front for every run" \
    "- fronts: direct (nginx, 2 workers, \`fastcgi_pass\` to php-fpm as seedapps.sh deploys it); levee \`levee serve --preset gnuboard --backend fastcgi+unix:SOCK --root ROOT\` (+ \`--admin-listen\`, \`--debug-headers\`)" \
    "- load (\`cargo run --release -p levee-test --example storm_board\`): $READERS readers (anonymous, 127.0.0.1, the front page, the list of \`$G5_BOARD\` and $POSTS posts, ${THINK_MS} ms think time, keeping the cookies gnuboard gives them, from a first visit to \`$FIRST_VISIT\` before the clock); $MEMBERS members (logged in through the front by seedapps' login_gnuboard5, viewing the same pages and their posts, a post every $POST_EVERY s through the write form, then their view of it and an anonymous poll of the list until it shows, at most ${VISIBLE_SECS} s); crawlers in the storm, $CRAWLER_CONNS connections from $CRAWLER_CONNS loopback /24s (127.1.N.1), no think time, ${REFUSED_PAUSE_MS} ms after a 429/503. Keep-alive connections, ${TIMEOUT_SECS} s per request" \
    "- crawler kinds: search (bbs/search.php and the board's search, random words, no cookie); member-pages (bbs/profile.php?mb_id=, bbs/memo.php, bbs/new.php?mb_id=, no cookie); fake-session (the search URLs with a made-up 26-character \`PHPSESSID\` per connection); fake-session-each (a new one per request)" \
    "- phases: ${FAIR_SECS} s fair weather, then ${STORM_SECS} s of storm; a request counts in the phase it started in; p99 over every request of the population, errors included; members' requests include the write form's three" \
    "- posts in time / due: posts the member saw at once and anonymous readers saw on the list within ${VISIBLE_SECS} s, of those the members' schedules asked for; members 429/503: members' requests refused, over both phases (a failure of the members' target: a refusal is a quick answer, which would lower their p99); crawler ok/s: 2xx and 3xx a second in the storm; refused: 429/503; unreadable: no status line (refused connect, reset, broken pipe), crawlers'; people's; php-fpm busy: mean share of its $PHP_WORKERS workers running a request (pm.status_path's process list sampled every 0.2 s), fair → storm; unproven: levee_unproven_sessions_total admitted / refused (before the clock, the members' login posts, sent with the session a visitor gets, and the probe of a made-up session count as admitted: $((MEMBERS + 1)))" \
    "- targets (PASS/FAIL per run): readers' storm p99 <= max(2 x fair, 100 ms) and every reader request 2xx; members' storm p99 <= 2 x fair and no member refused; every post due shown in time; no unreadable answer" ""

for kind in $KINDS; do
    for front in "${FRONTS[@]}"; do measure "$kind" "$front"; done
done

# The tables, from the runs' files in benchmarks/out/ (so that they can be made again
# from a run's files alone).
python3 - "$OUT_BASE" "$KINDS" "${FRONTS[@]}" <<'PY' | tee -a "$OUT_FILE"
import json, os, re, sys
out_base, kinds, fronts = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
titles = {"search": "search: bbs/search.php and the board's search, random words, no cookie",
          "member-pages": "member-pages: profiles, memo box, a member's posts, no cookie",
          "fake-session": "fake-session: the search URLs with a made-up PHPSESSID per connection",
          "fake-session-each": "fake-session-each: the search URLs with a new made-up PHPSESSID per request"}

def ms(v):
    return "-" if v is None else f"{v:,.0f}" if v >= 10 else f"{v:.1f}"

def both(x, key):
    return sum(x[p][key] for p in ("fair", "storm"))

def unreadable(t):
    return t["connect_errors"] + t["io_errors"]

def metrics(tag):
    """levee's /metrics after the run (None for direct): levee_unproven_sessions_total by
    outcome, levee_backend_sessions_over_share_total (None where this levee has none)."""
    path = f"{out_base}-{tag}.metrics"
    if not os.path.exists(path):
        return None
    counts = {"admitted": 0, "refused": 0, "over_share": None}
    for line in open(path):
        m = re.match(r'levee_unproven_sessions_total\{[^}]*outcome="(\w+)"[^}]*\} (\S+)', line)
        if m and m.group(1) in counts:
            counts[m.group(1)] = int(float(m.group(2)))
        m = re.match(r'levee_backend_sessions_over_share_total (\S+)', line)
        if m:
            counts["over_share"] = int(float(m.group(1)))
    return counts

def targets(d):
    r, m, p = d["readers"], d["members"], d["posts"]
    out = []
    fair, storm = r["fair"]["p99_ms"] or 0, r["storm"]["p99_ms"]
    bound = max(2 * fair, 100)
    n, good = both(r, "requests"), both(r, "s2xx")
    out.append(("readers", storm is not None and storm <= bound and n > 0 and good == n))
    fair, storm = m["fair"]["p99_ms"] or 0, m["storm"]["p99_ms"]
    # A refusal is fast: it would lower the p99. People are never to be refused.
    refused = both(m, "s429") + both(m, "s503")
    out.append(("members", storm is not None and storm <= 2 * fair and refused == 0))
    due, shown = d["posts_due"], both(p, "shown_both")
    out.append(("posts", due > 0 and shown == due))
    people = unreadable(r["storm"]) + unreadable(m["storm"])
    out.append(("unreadable", unreadable(d["crawlers"]["storm"]) == 0 and people == 0))
    return out

def top(marks, n=3):
    items = sorted(marks.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"`{k}` {v}" for k, v in items) or "-"

for kind in kinds:
    print(f"## {titles[kind]}")
    print()
    print("| front | readers p99 ms fair → storm | readers non-2xx | members p99 ms fair → storm | members 429/503 | posts in time / due | crawler ok/s | crawlers refused 429/503 | unreadable crawlers; people | php-fpm busy % fair → storm | unproven admitted / refused | targets |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    notes = []
    for f in fronts:
        tag = f"{kind}-{f}"
        d = json.load(open(f"{out_base}-{tag}.json"))
        r, m, c, p = d["readers"], d["members"], d["crawlers"]["storm"], d["posts"]
        n = both(r, "requests")
        bad = n - both(r, "s2xx")
        b = d.get("backend") or {}
        busy = " → ".join(ms((b.get(ph) or {}).get("busy_pct")) for ph in ("fair", "storm"))
        u = metrics(tag)
        verdicts = targets(d)
        failed = [name for name, ok in verdicts if not ok]
        print(f"| {f} | {ms(r['fair']['p99_ms'])} → {ms(r['storm']['p99_ms'])} | {bad} ({100 * bad / max(n, 1):.1f}%) "
              f"| {ms(m['fair']['p99_ms'])} → {ms(m['storm']['p99_ms'])} | {both(m, 's429')}/{both(m, 's503')} "
              f"| {both(p, 'shown_both')} / {d['posts_due']} "
              f"| {c['ok_per_s']:,.1f} | {c['s429']}/{c['s503']} | {unreadable(c)}; {unreadable(r['storm']) + unreadable(m['storm'])} "
              f"| {busy} | {'-' if u is None else str(u['admitted']) + ' / ' + str(u['refused'])} "
              f"| {'PASS' if not failed else 'FAIL: ' + ', '.join(failed)} |")
        if f == "levee":
            probes = f"{out_base}-{tag}.probes"
            if os.path.exists(probes):
                notes.append(f"- {f}, before the clock: " + "; ".join(l.strip() for l in open(probes) if l.strip()))
            mr, rx = d["members_x_cache_reason"], d["readers_x_cache"]
            notes.append(f"- {f}, members' X-Cache-Reason in the storm: {top(mr['storm'])}; "
                         f"readers' X-Cache fair: {top(rx['fair'])}; storm: {top(rx['storm'])}")
            if u is not None and u["over_share"] is not None:
                notes.append(f"- {f}: levee_backend_sessions_over_share_total {u['over_share']} (members' requests "
                             "beyond their session's or their network's share of the session class, made anonymous work)")
        if d.get("readers_cookies"):
            notes.append(f"- {f}, cookies the readers held at the end: {', '.join(d['readers_cookies'])}")
        problems = [x for ph in ("fair", "storm") for x in p[ph]["problems"]]
        others = {}
        for x in (r, m):
            for ph in ("fair", "storm"):
                for k, v in x[ph]["other_statuses"].items():
                    others[k] = others.get(k, 0) + v
        refused = sum(both(x, k) for x in (r, m) for k in ("s429", "s503"))
        timeouts = sum(both(x, "timeouts") for x in (r, m))
        if problems or others or refused or timeouts:
            notes.append(f"- {f}, people: 429/503 {refused}, timeouts {timeouts}, other statuses {others}; post problems: {problems[:2]}")
        if c["timeouts"] or c["other_status"]:
            notes.append(f"- {f}, crawlers: {c['timeouts']} timeouts; other statuses: {c['other_statuses']}")
        failed_samples = sum((b.get(ph) or {}).get("failed", 0) for ph in ("fair", "storm"))
        if failed_samples:
            notes.append(f"- {f}: {failed_samples} php-fpm status samples failed")
    print()
    print("\n".join(notes))
    print()
PY
report "Each run's JSON, and for levee its /metrics, /top.json and the probes: \`$(basename "$OUT_BASE")-*\` in benchmarks/out/."
record_report
