#!/usr/bin/env bash
# benchmarks/seedapps.sh: the source documents' own applications, which Debian does not
# package, from their public sources (issue 34). Each is installed into a scratch
# directory, served by nginx + php-fpm as its documentation deploys it ("direct"), and by
# levee alone with the application's preset (`levee serve --preset NAME --backend
# fastcgi+unix:SOCK --root DIR`, nothing else).
#
# For each application, first the checks (through levee): a member logs in and sees their
# own pages (never a stored one), an anonymous reader never sees the member's page nor
# cookies, the member's edit reaches anonymous readers within the preset's freshness.
# Then the front page and a post are measured for new visitors (no cookie) and returning
# ones (every cookie the application gave a first-time visitor of an uncached page through
# levee, sent back), ROUNDS runs per server, the order rotated; medians.
# The issue's target: levee at least 50x direct, for both kinds of visitor.
#
# Usage: benchmarks/seedapps.sh SRC_DIR [APP...]
#        SRC_DIR holds the fetched sources (clones or the `fetch` tool's bare mirrors):
#        SRC_DIR/moniwiki (github:wkpark/moniwiki), SRC_DIR/gnuboard5
#        (github:gnuboard/gnuboard5), SRC_DIR/rhymix (github:rhymix/rhymix). What is there
#        is measured; APP... picks some.
# Env:   ROUNDS=3 DURATION=10 CONNS=32 PHP_WORKERS=4, LEVEE, RECORD, KEEP_WORK, CHECKS_ONLY=1,
#        LEVEE_ARGS (more flags for levee serve, e.g. "--access-log combined")
# Needs: php8.2-fpm php8.2-cli php8.2-mysql php8.2-{gd,mbstring,xml,curl,zip,intl}
#        mariadb-server nginx-light curl. Targets 127.0.0.1 only.
#
# Each application is a file benchmarks/seedapps/APP.sh that defines:
#   APP_PRESET              the levee preset
#   install_APP BASE        drives the installer over BASE (nginx + php-fpm, ROOT already
#                           holds the source); sets PAGES (front page first, then a post)
#   login_APP BASE JAR      logs the admin in (curl cookie jar JAR); fails if it did not
#   MEMBER_MARK             text only a logged-in admin's pages show
#   edit_APP BASE JAR TEXT  as the member in JAR, makes TEXT appear on ${PAGES[0]}
#   FIRST_VISIT             a path that is never stored (a login form): what a returning
#                           visitor's cookies are taken from
source "$(dirname "$0")/lib.sh"
source "$BENCH_DIR/seedapps/common.sh"

SRC=${1:-}
[ -n "$SRC" ] && [ -d "$SRC" ] || { echo "usage: benchmarks/seedapps.sh SRC_DIR [APP...] (SRC_DIR/moniwiki ...)" >&2; exit 2; }
shift
APPS=("$@")
[ ${#APPS[@]} -gt 0 ] || APPS=(moniwiki gnuboard5 rhymix)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-32}
PHP_WORKERS=${PHP_WORKERS:-4}
need_tools nginx curl php mariadbd
levee_binary
open_report seedapps

# copy_source APP DEST : the application's source tree (a clone, or a bare mirror's HEAD).
copy_source() {
    if [ -d "$SRC/$1/.git" ] || [ ! -f "$SRC/$1/HEAD" ]; then
        cp -r "$SRC/$1" "$2"
        rm -rf "$2/.git"
    else
        mkdir -p "$2" && git -C "$SRC/$1" archive HEAD | tar -x -C "$2"
    fi
}

# cookies_of URL : the cookies a response sets, as a browser sends them back ("a=1; b=2"),
# without those it deletes.
cookies_of() {
    curl -s -D - -o /dev/null "$1" | tr -d '\r' |
        sed -n 's/^[Ss]et-[Cc]ookie: *\([^;]*\).*/\1/p' |
        awk -F= '$2 != "" && $2 != "deleted" {print}' | paste -sd';' | sed 's/;/; /g'
}

FAILED=0
check() { # check DESCRIPTION CONDITION-RESULT(0/1)
    if [ "$2" = 0 ]; then log "  ok: $1"; else log "  FAILED: $1"; FAILED=$((FAILED + 1)); fi
    CHECKS+="| $APP | $1 | $([ "$2" = 0 ] && echo ok || echo FAILED) |"$'\n'
}

# run_checks LEVEE_BASE : logins, privacy, edits through levee.
run_checks() {
    local base=$1 jar="$WORK/$APP-member.jar" page=${PAGES[0]} body xc anon marker
    anon=$(curl -s "$base$page")
    curl -s -o /dev/null "$base$page" # stored now, if it may be
    # (`if`, not `$?`: lib.sh sets -e, a failed check must be counted, not end the run.)
    local r
    if "login_$APP" "$base" "$jar"; then r=0; else r=1; fi
    check "the member logs in through levee" $r
    body=$(curl -s -b "$jar" -c "$jar" -D "$WORK/h" "$base$page")
    xc=$(tr -d '\r' <"$WORK/h" | sed -n 's/^[Xx]-[Cc]ache: //p')
    if [[ $body == *"$MEMBER_MARK"* ]] && [ "$xc" != HIT ]; then r=0; else r=1; fi
    check "the member's front page is theirs (shows \`$MEMBER_MARK\`, X-Cache $xc)" $r
    body=$(curl -s -D "$WORK/h" "$base$page")
    # The member's cookie values, identifiers only (16 characters or more): gnuboard's
    # visit cookie holds the client's address, the same for every visitor from here.
    local leaked=0 v
    for v in $(awk 'NF >= 7 && ($1 !~ /^#/ || $1 ~ /^#HttpOnly_/) && length($7) >= 16 {print $7}' "$jar"); do
        if grep -qF "$v" "$WORK/h"; then leaked=1; fi
    done
    if [[ $body != *"$MEMBER_MARK"* ]] && [ "$leaked" = 0 ]; then r=0; else r=1; fi
    check "an anonymous reader gets the anonymous page, no member cookie" $r
    # Phones and desktops: each gets through levee the page the application gives it
    # (sizes within 2%: pages carry a per-session token), whichever filled the cache.
    local ua d l same=0 name
    for ua in "$IPHONE_UA" "$FIREFOX_UA" "$IPHONE_UA"; do
        d=$(curl -s -A "$ua" "$DIRECT$page" | wc -c)
        l=$(curl -s -A "$ua" "$base$page" | wc -c)
        name=phone
        [ "$ua" = "$FIREFOX_UA" ] && name=desktop
        log "  $name: direct $d bytes, levee $l bytes"
        awk -v a="$d" -v b="$l" 'BEGIN {exit !(a > 0 && (a - b) ^ 2 <= (a * 0.02) ^ 2)}' || same=1
    done
    check "phones and desktops each get their own page" $same
    # levee doctor with the preset, on the application itself: the pages cached, no
    # cookie of theirs that makes a returning visitor pass, and what serve does.
    local urls=() p json served="" doctor_ok
    for p in "${PAGES[@]}"; do urls+=("$DIRECT$p"); done
    json=$("$LEVEE" doctor --json --rate 50 --preset "$APP_PRESET" "${urls[@]}" 2>"$WORK/doctor.err")
    for p in "${PAGES[@]}"; do
        curl -s -o /dev/null "$base$p"
        served+="$(curl -s -o /dev/null -D - "$base$p" | tr -d '\r' | sed -n 's/^[Xx]-[Cc]ache: //p') "
    done
    if python3 -c '
import json, sys
r = json.load(sys.stdin)
served = sys.argv[1].split()
ok = True
for u, s in zip(r["urls"], served):
    v = u.get("with_preset") or u["levee"]
    back = u.get("returning_passes_with")
    print("%s: doctor %s (%s), a returning visitor passes with %s; serve %s" % (u["url"], v["result"], v["reason"], back, s))
    ok &= v["result"] == "HIT" and s == "HIT" and back is None
sys.exit(0 if ok else 1)' "$served" <<<"$json" >"$WORK/doctor.txt" 2>&1; then doctor_ok=0; else doctor_ok=1; fi
    sed 's/^/  doctor: /' "$WORK/doctor.txt" >&2
    check "levee doctor --preset $APP_PRESET: every page cached, returning visitors too, as serve does" $doctor_ok
    marker="levee-edit-$(date +%s)"
    if "edit_$APP" "$base" "$jar" "$marker"; then r=0; else r=1; fi
    check "the member's edit is accepted" $r
    local deadline=$((SECONDS + EDIT_WITHIN)) seen=1
    while [ $SECONDS -le $deadline ]; do
        # Not `curl | grep -q`: with pipefail, grep's early exit fails curl (code 23).
        if [[ $(curl -s "$base$page") == *"$marker"* ]]; then seen=0; break; fi
        sleep 0.5
    done
    check "anonymous readers see the edit within ${EDIT_WITHIN}s" $seen
}

report "# The source documents' applications: ${APPS[*]}, direct vs levee alone ($(date -u '+%Y-%m-%d %H:%M'))" ""
machine_info
report "- levee alone: \`levee serve --preset APP --backend fastcgi+unix:SOCK --root ROOT\`; direct: nginx (2 workers) + php-fpm ($PHP_WORKERS workers, pm = static); MariaDB $(mariadbd --version | awk '{print $3}')" \
    "- load: \`levee bench URL -c $CONNS -d ${DURATION}s\`; returning visitors send back every cookie a first visit to an uncached page through levee gave them; $ROUNDS runs per server, order rotated, medians" \
    "" \
    "| app | page | visitor | direct req/s | levee req/s | levee/direct | levee X-Cache | target |" \
    "|---|---|---|---:|---:|---:|---|---:|"
CHECKS=""

for APP in "${APPS[@]}"; do
    [ -e "$SRC/$APP" ] || { log "$APP: not in $SRC, skipped"; continue; }
    [ -f "$BENCH_DIR/seedapps/$APP.sh" ] || die "no benchmarks/seedapps/$APP.sh"
    EDIT_WITHIN=12
    source "$BENCH_DIR/seedapps/$APP.sh"
    log "$APP: installing"
    ROOT="$WORK/$APP"
    copy_source "$APP" "$ROOT"
    php_fpm_conf "$APP" "$PHP_WORKERS"
    start_php_fpm
    DIRECT_PORT=$(free_port)
    start_nginx_php "nginx-$APP" "$DIRECT_PORT" "$SOCK" "$ROOT"
    "install_$APP" "http://127.0.0.1:$DIRECT_PORT" || die "$APP: install failed"
    LEVEE_PORT=$(free_port)
    start_bg "levee-$APP" "$LEVEE" serve --listen "127.0.0.1:$LEVEE_PORT" --preset "$APP_PRESET" \
        --backend "fastcgi+unix:$SOCK" --root "$ROOT" ${LEVEE_ARGS:-}
    LEVEE_PID=$BG_PID
    wait_port "$LEVEE_PORT" "$LEVEE_PID"
    DIRECT="http://127.0.0.1:$DIRECT_PORT"
    log "$APP: checks through levee"
    run_checks "http://127.0.0.1:$LEVEE_PORT"
    # A returning visitor: the cookies of a first visit to a page levee never stores.
    cookie=$(cookies_of "http://127.0.0.1:$LEVEE_PORT$FIRST_VISIT")
    log "$APP: a returning visitor holds: ${cookie:-nothing}"
    [ "${CHECKS_ONLY:-0}" = 1 ] && { stop_pid "$LEVEE_PID"; stop_pid "$DIRECT_PID"; stop_pid "$PHP_PID"; continue; }
    for page in "${PAGES[@]}"; do
        curl -s -o /dev/null "http://127.0.0.1:$LEVEE_PORT$page"
        for visitor in new returning; do
            c=""
            [ "$visitor" = returning ] && c=$cookie
            xcache=$(curl -s -D - -o /dev/null ${c:+-H "Cookie: $c"} "http://127.0.0.1:$LEVEE_PORT$page" |
                tr -d '\r' | sed -n 's/^[Xx]-[Cc]ache: //p')
            declare -A runs=()
            for ((r = 0; r < ROUNDS; r++)); do
                order=(direct levee)
                for ((k = 0; k < 2; k++)); do
                    s=${order[$(((k + r) % 2))]}
                    port=$DIRECT_PORT
                    [ "$s" = levee ] && port=$LEVEE_PORT
                    read -r rps p99 err <<<"$(bench_row "http://127.0.0.1:$port$page" "$c")"
                    runs[$s]+="$rps "
                    log "  $APP $page $visitor round $((r + 1)) $s: $rps req/s, p99 $p99 ms, errors $err"
                    [ "$s" = direct ] && sleep 3
                done
            done
            # shellcheck disable=SC2086
            d=$(median ${runs[direct]})
            # Returning visitors all send one session cookie, and PHP queues requests of
            # one session behind its lock: the direct baseline is the better of new and
            # returning visitors' figures, not the slower one.
            [ "$visitor" = new ] && best_direct=$d
            d=$(awk -v a="$d" -v b="$best_direct" 'BEGIN {print (a > b) ? a : b}')
            # shellcheck disable=SC2086
            l=$(median ${runs[levee]})
            ratio=$(awk -v a="$l" -v b="$d" 'BEGIN {printf "%.0f", a / b}')
            verdict=$(awk -v r="$ratio" 'BEGIN {print (r >= 50) ? "50x met" : "50x MISSED"}')
            names=$(tr ';' '\n' <<<"$c" | sed 's/=.*//;s/^ *//' | paste -sd, -)
            report "| $APP | \`$page\` | $visitor${c:+ (\`$names\`)} | $d | $l | ${ratio}x | $xcache | $verdict |"
        done
    done
    stop_pid "$LEVEE_PID"
    stop_pid "$DIRECT_PID"
    stop_pid "$PHP_PID"
done
report "" "Checks through levee:" "" "| app | check | result |" "|---|---|---|"
printf '%s' "$CHECKS" | tee -a "$OUT_FILE"
[ "$FAILED" = 0 ] || log "$FAILED check(s) FAILED"
record_report
[ "$FAILED" = 0 ]
