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
#   - crawlers: uncacheable URLs (history, oldid, diffs, recent changes, what links here,
#     searches), no think time, from addresses outside 127.0.0.0/24.
# FAIR_SECS=30 of readers and editors alone, then STORM_SECS=60 with the crawlers too, in
# each of the VARIANTS:
#   many:     64 connections from 64 addresses (127.1.0.1, 127.1.1.1, ...: 64 /24s);
#   one:      256 connections from one address (one abusive client);
#   thousand: 1,000 connections from 1,000 addresses (1,000 /24s).
# Every run starts clean: a new wiki (database, php-fpm), a new nginx and a new front; the
# fronts alternate, the first one rotating with each run. After each levee storm its
# /metrics go next to the report in benchmarks/out/.
#
# Usage: benchmarks/storm.sh                  (about 20 minutes)
#        QUICK=1 benchmarks/storm.sh          (10 s + 15 s phases; about 6 minutes)
#        VARIANTS="one" FRONTS="levee" benchmarks/storm.sh
#        Tables go to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   FAIR_SECS STORM_SECS VARIANTS FRONTS="nginx varnish levee" ROUNDS=1 READERS EDITORS
#        PAGES THINK_MS=200 EDIT_EVERY=5 VISIBLE_SECS TIMEOUT_SECS=30 (per request),
#        REFUSED_PAUSE_MS=20 (a crawler's pause after a refusal; 0: none),
#        SLOW_MS=0 (print each editor's request slower than this, and when it started),
#        LEVEE, BUILD, KEEP_WORK.
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
VARIANTS=${VARIANTS:-many one thousand}
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

need_tools nginx varnishd curl python3 php mariadbd
[ -e /usr/share/mediawiki/index.php ] || {
    echo "missing: /usr/share/mediawiki; install with: apt-get install -y mediawiki php8.2-fpm php8.2-mysql mariadb-server" >&2
    exit 2
}
levee_binary
EXAMPLES="${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/examples"
if [ "${BUILD:-1}" = 1 ]; then
    log "building the wiki runner and the load (cargo build --release -p levee-test --example app --example storm)"
    (cd "$REPO_DIR" && cargo build --release -p levee-test --example app --example storm >&2)
fi
for x in app storm; do
    [ -x "$EXAMPLES/$x" ] || die "no $EXAMPLES/$x (cargo build --release -p levee-test --example $x)"
    cp "$EXAMPLES/$x" "$WORK/$x" # a rebuild during the run must not change them
done
# 1,000 crawler connections, and as many again from a front to nginx.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
open_report storm
OUT_BASE=${OUT_FILE%.md}

# stop PID: stop_pid, then drop PID from the exit trap's list: a long run starts dozens of
# processes, and the trap must not signal a pid the system has since given to another.
stop() {
    local p keep=()
    stop_pid "$1"
    for p in "${BG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    BG_PIDS=("${keep[@]}")
}

# variant_flags VARIANT: the crawlers' addresses and connections.
variant_flags() {
    case $1 in
    many) echo "--crawler-addrs 64 --crawler-conns 64" ;;
    one) echo "--crawler-addrs 1 --crawler-conns 256" ;;
    thousand) echo "--crawler-addrs 1000 --crawler-conns 1000" ;;
    *) die "unknown variant $1 (many, one, thousand)" ;;
    esac
}
for v in $VARIANTS; do variant_flags "$v" >/dev/null; done

# start_wiki: a new MediaWiki (sets APP_PID, SOCK).
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
}

# start_site NAME PORT: nginx in front of the wiki's php-fpm as MediaWiki's manual
# (Manual:Short URL/Nginx) configures it, with the wiki at the root: its PHP entry points
# to php-fpm (PATH_INFO for /index.php/Title), static resources with a week's expiry
# (sets SITE_PID).
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
}
EOF
    start_bg "$1" "$(command -v nginx || echo /usr/sbin/nginx)" -e stderr -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;'
    SITE_PID=$BG_PID
    wait_port "$2" "$SITE_PID"
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
        start_levee "levee-$2" "$FRONT_PORT" "$3" --preset mediawiki --admin-listen "127.0.0.1:$ADMIN_PORT"
        FRONT_PID=$LEVEE_PID
        ;;
    esac
}

# measure VARIANT FRONT ROUND: one clean run; the load's JSON goes to $WORK/VARIANT-FRONT-rROUND.json.
measure() {
    local tag="$1-$2-r$3" site_port limit
    log "$tag: a new wiki"
    start_wiki "$tag"
    site_port=$(free_port)
    start_site "site-$tag" "$site_port"
    "$WORK/storm" setup --target "http://127.0.0.1:$site_port" --pages "$PAGES" --editors "$EDITORS" \
        >"$WORK/setup-$tag.log" 2>&1 || { cat "$WORK/setup-$tag.log" >&2; die "$tag: setup failed"; }
    start_front "$2" "$tag" "$site_port"
    log "$tag: ${FAIR_SECS} s fair weather, then ${STORM_SECS} s of storm ($(variant_flags "$1"))"
    limit=$((FAIR_SECS + STORM_SECS + 2 * TIMEOUT_SECS + VISIBLE_SECS + 120))
    # shellcheck disable=SC2046
    start_bg "storm-$tag" timeout -k 10 "$limit" "$WORK/storm" run --target "http://127.0.0.1:$FRONT_PORT" \
        --fair-secs "$FAIR_SECS" --storm-secs "$STORM_SECS" --readers "$READERS" --editors "$EDITORS" \
        --pages "$PAGES" --think-ms "$THINK_MS" --edit-every-secs "$EDIT_EVERY" \
        --visible-within-secs "$VISIBLE_SECS" --timeout-secs "$TIMEOUT_SECS" \
        --refused-pause-ms "$REFUSED_PAUSE_MS" --slow-ms "$SLOW_MS" $(variant_flags "$1")
    LOAD_PID=$BG_PID
    wait "$LOAD_PID" || { cat "$WORK/storm-$tag.log" >&2; die "$tag: the load failed"; }
    grep -E '^([a-z]|SLOW)' "$WORK/storm-$tag.log" | sed "s/^/  $tag /" >&2
    sed -n 's/^RESULT //p' "$WORK/storm-$tag.log" >"$WORK/$tag.json"
    cp "$WORK/$tag.json" "$OUT_BASE-$tag.json"
    if [ "$2" = levee ]; then
        curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" >"$OUT_BASE-$tag.metrics" ||
            log "$tag: levee's /metrics did not answer"
    fi
    stop "$LOAD_PID"
    [ -z "$FRONT_PID" ] || stop "$FRONT_PID"
    stop "$SITE_PID"
    stop "$APP_PID"
}

report "# Storm: people first under overload, MediaWiki behind nginx, Varnish, levee ($(date '+%Y-%m-%d %H:%M'))" ""
report "- command: \`$([ "$QUICK" = 1 ] && echo "QUICK=1 ")FAIR_SECS=$FAIR_SECS STORM_SECS=$STORM_SECS VARIANTS=\"$VARIANTS\" FRONTS=\"${FRONTS[*]}\" ROUNDS=$ROUNDS benchmarks/storm.sh\`"
machine_info
report "- site: MediaWiki $(dpkg-query -W -f '${Version}' mediawiki 2>/dev/null) from Debian's package, unchanged, on php-fpm $(php -r 'echo PHP_VERSION;') with 4 workers (pm = static) and MariaDB $(mariadbd --version | awk '{print $3}'); nginx (2 workers) with fastcgi_pass to it as MediaWiki's manual configures it. A new wiki, nginx and front for every run" \
    "- fronts: nginx alone; Varnish \`-s malloc,256m\` with the default VCL (\`backend default { .host = \"127.0.0.1\"; .port = \"NGINX\"; }\`); levee \`levee serve --listen 127.0.0.1:PORT --backend http://127.0.0.1:NGINX --preset mediawiki --admin-listen 127.0.0.1:ADMIN\`" \
    "- load (\`cargo run --release -p levee-test --example storm\`): $READERS readers (anonymous, 127.0.0.1, $PAGES articles of ~10 KiB wikitext, ${THINK_MS} ms think time); $EDITORS editors (logged in, viewing pages with the same think time, an API edit every ${EDIT_EVERY} s, then their own view of the page and an anonymous one until it shows the edit, at most ${VISIBLE_SECS} s); crawlers (uncacheable URLs: history with offsets, oldid, diffs, RecentChanges, WhatLinksHere, full-text search; no think time, ${REFUSED_PAUSE_MS} ms after a 429/503, Retry-After ignored) from the storm on. Keep-alive connections, ${TIMEOUT_SECS} s per request" \
    "- phases: ${FAIR_SECS} s fair weather (readers and editors), then ${STORM_SECS} s of storm (crawlers too); a request counts in the phase it started in; p99 over every request of the population, errors included" \
    "- saves shown: saves the editor saw on their next view at once and anonymous readers within ${VISIBLE_SECS} s; made: saves tried; due: what the editors' schedule asked for (fewer are made when saves take longer than ${EDIT_EVERY} s)" \
    "- refused: 429 and 503 answers (crawlers'; readers' and editors' over both phases); refusal p99: of every refusal in the storm, all populations" \
    "- targets (levee): readers' storm p99 <= max(2 x fair p99, 100 ms) and every reader request 2xx; editors' storm p99 <= 2 x fair p99 and every save shown; refusals answered within 10 ms at p99" ""

run=0
for v in $VARIANTS; do
    for ((r = 1; r <= ROUNDS; r++)); do
        n=${#FRONTS[@]}
        for ((i = 0; i < n; i++)); do
            measure "$v" "${FRONTS[$(((i + run) % n))]}" "$r"
        done
        run=$((run + 1))
    done
done

python3 - "$WORK" "$OUT_BASE" "$ROUNDS" "$VARIANTS" "${FRONTS[@]}" <<'PY' | tee -a "$OUT_FILE"
import json, os, re, sys
work, out_base, rounds, variants, fronts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), sys.argv[5:]

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
titles = {"many": "64 crawler connections from 64 addresses",
          "one": "one abusive client: 256 connections from one address",
          "thousand": "1,000 crawler connections from 1,000 addresses"}

def ms(v):
    return "-" if v is None else f"{v:,.0f}" if v >= 10 else f"{v:.1f}"

def pct(v):
    return "-" if v is None else f"{v:.1f}"

def verdicts(d, tag):
    r, e, ed = d["readers"], d["editors"], d["edits"]
    out = []
    fair, storm = r["fair"]["p99_ms"] or 0, r["storm"]["p99_ms"]
    bound = max(2 * fair, 100)
    ok = storm is not None and storm <= bound
    out.append(f"readers' p99 {ms(storm)} ms <= {ms(bound)} ms: {'PASS' if ok else 'FAIL'}")
    n = sum(r[p]["requests"] for p in ("fair", "storm"))
    good = sum(r[p]["s2xx"] for p in ("fair", "storm"))
    out.append(f"reader requests 2xx {good}/{n}: {'PASS' if n and good == n else 'FAIL'}")
    fair, storm = e["fair"]["p99_ms"] or 0, e["storm"]["p99_ms"]
    ok = storm is not None and storm <= 2 * fair
    out.append(f"editors' p99 {ms(storm)} ms <= {ms(2 * fair)} ms: {'PASS' if ok else 'FAIL'}")
    saves, due = sum(ed[p]["saves"] for p in ("fair", "storm")), d["saves_due"]
    shown = sum(ed[p]["shown_both"] for p in ("fair", "storm"))
    out.append(f"saves shown {shown} of {saves} made, {due} due: {'PASS' if due and shown == saves == due else 'FAIL'}")
    rp = d["refusal_p99_ms"]["storm"]
    if rp is None:
        out.append("refusal p99: no refusals, PASS")
    else:
        out.append(f"refusal p99 {ms(rp)} ms <= 10 ms: {'PASS' if rp <= 10 else 'FAIL'}")
        own = levee_refusal_p99(tag)
        if own is not None:
            out.append(f"levee's own refusal p99 <= {own:g} ms")
    return out

for v in variants:
    print(f"## {titles[v]}")
    print()
    print("| front | readers p99 ms fair → storm | readers ok % storm | editors p99 ms fair → storm | editors ok % storm | saves shown / made / due | crawler ok/s | refused 429/503 crawlers; people | refusal p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes = []
    for f in fronts:
        for rnd in range(1, rounds + 1):
            d = json.load(open(f"{work}/{v}-{f}-r{rnd}.json"))
            r, e, c, ed = d["readers"], d["editors"], d["crawlers"]["storm"], d["edits"]
            saves = sum(ed[p]["saves"] for p in ("fair", "storm"))
            shown = sum(ed[p]["shown_both"] for p in ("fair", "storm"))
            people = [sum(x[p][k] for x in (r, e) for p in ("fair", "storm")) for k in ("s429", "s503")]
            name = f if rounds == 1 else f"{f} ({rnd})"
            print(f"| {name} | {ms(r['fair']['p99_ms'])} → {ms(r['storm']['p99_ms'])} | {pct(r['storm']['ok_pct'])} "
                  f"| {ms(e['fair']['p99_ms'])} → {ms(e['storm']['p99_ms'])} | {pct(e['storm']['ok_pct'])} "
                  f"| {shown} / {saves} / {d['saves_due']} | {c['ok_per_s']:,.1f} | {c['s429']}/{c['s503']}; {people[0]}/{people[1]} "
                  f"| {ms(d['refusal_p99_ms']['storm'])} |")
            if f == "levee":
                notes.append(f"- {name}: " + "; ".join(verdicts(d, f"{v}-{f}-r{rnd}")))
            problems = [p for ph in ("fair", "storm") for p in ed[ph]["problems"]]
            errs = {k: r["storm"][k] + e["storm"][k] for k in ("timeouts", "connect_errors", "io_errors", "other_status")}
            if problems or any(errs.values()):
                notes.append(f"- {name}, people's failures in the storm: {errs}; edit problems: {problems[:2]}")
    print()
    print("\n".join(notes))
    print()
PY
report "Each run's JSON (every count, p50s, statuses) and levee's /metrics after its storm: \`$(basename "$OUT_BASE")-*\` in benchmarks/out/."
record_report
