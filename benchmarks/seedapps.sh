#!/usr/bin/env bash
# benchmarks/seedapps.sh: the source documents' own applications, which Debian does not
# package, from their public sources (issue 34). Each is installed into a scratch
# directory, served by nginx + php-fpm as its documentation deploys it ("direct"), and by
# levee alone with the application's preset (`levee serve --preset NAME --backend
# fastcgi+unix:SOCK --root DIR`, nothing else). The front page and a page are measured
# for new visitors (no cookie) and for returning ones (the cookies the application gave
# them on their first page sent back), ROUNDS runs per server, the order rotated; medians.
# The issue's target: levee at least 50x direct, for both kinds of visitor.
#
# Usage: benchmarks/seedapps.sh SRC_DIR
#        SRC_DIR holds the fetched sources: SRC_DIR/moniwiki (github:wkpark/moniwiki),
#        and later SRC_DIR/gnuboard5, SRC_DIR/rhymix. What is there is measured.
# Env:   ROUNDS=3 DURATION=10 CONNS=32 PHP_WORKERS=4, LEVEE, RECORD, KEEP_WORK
# Needs: php8.2-fpm php8.2-cli nginx-light curl. Targets 127.0.0.1 only.
#
# Done so far: MoniWiki (file-based, no database). gnuboard5 and Rhymix need MariaDB and
# their web installers driven by script: not written yet (see issue 34's notes).
source "$(dirname "$0")/lib.sh"

SRC=${1:-}
[ -n "$SRC" ] && [ -d "$SRC" ] || { echo "usage: benchmarks/seedapps.sh SRC_DIR (with SRC_DIR/moniwiki ...)" >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-32}
PHP_WORKERS=${PHP_WORKERS:-4}
need_tools nginx curl php
levee_binary
open_report seedapps

# install_moniwiki : a copy of the source with the default config and two pages (sets
# ROOT, PAGES).
install_moniwiki() {
    ROOT="$WORK/moniwiki"
    if [ -d "$SRC/moniwiki/.git" ] || [ -f "$SRC/moniwiki/wiki.php" ]; then
        cp -r "$SRC/moniwiki" "$ROOT"
    else
        # A bare mirror (the `fetch` tool's): its HEAD's tree.
        mkdir -p "$ROOT" && git -C "$SRC/moniwiki" archive HEAD | tar -x -C "$ROOT"
    fi
    cp "$ROOT/config.php.default" "$ROOT/config.php"
    mkdir -p "$ROOT/data/text" "$ROOT/data/user"
    for f in "$ROOT"/data/*.sample; do cp "$f" "${f%.sample}"; done
    # An empty wiki dies in wikilib.php under PHP 8 (getLikePages() returns false).
    printf 'Welcome to the levee test wiki.\n\n== Section ==\nSome text for readers.\n' >"$ROOT/data/text/FrontPage"
    printf 'Another page, with a [[FrontPage]] link.\n' >"$ROOT/data/text/SandBox"
    chmod -R a+rwX "$ROOT/data"
    PAGES="/wiki.php/FrontPage /wiki.php/SandBox"
}

machine_info
report "- levee alone: \`levee serve --preset APP --backend fastcgi+unix:SOCK --root ROOT\`; direct: nginx (2 workers) + php-fpm ($PHP_WORKERS workers, pm = static)" \
    "- load: \`levee bench URL -c $CONNS -d ${DURATION}s\`; returning visitors send back the cookies the application set on their first page; $ROUNDS runs per server, order rotated, medians" \
    "" \
    "| app | page | visitor | direct req/s | levee req/s | levee/direct | levee X-Cache | target |" \
    "|---|---|---|---:|---:|---:|---|---:|"

for app in moniwiki; do
    [ -e "$SRC/$app" ] || { log "$app: not in $SRC, skipped"; continue; }
    log "$app: installing"
    "install_$app"
    php_fpm_conf "$app" "$PHP_WORKERS"
    start_php_fpm
    DIRECT_PORT=$(free_port)
    start_nginx_php nginx "$DIRECT_PORT" "$SOCK" "$ROOT"
    LEVEE_PORT=$(free_port)
    start_bg "levee-$app" "$LEVEE" serve --listen "127.0.0.1:$LEVEE_PORT" --preset "$app" \
        --backend "fastcgi+unix:$SOCK" --root "$ROOT"
    LEVEE_PID=$BG_PID
    wait_port "$LEVEE_PORT" "$LEVEE_PID"
    for page in $PAGES; do
        # The cookies a first visit gets, as a browser would keep them.
        cookie=$(curl -s -D - -o /dev/null "http://127.0.0.1:$DIRECT_PORT$page" |
            tr -d '\r' | sed -n 's/^[Ss]et-[Cc]ookie: \([^;]*\).*/\1/p' | head -1)
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
                    log "  $app $page $visitor round $((r + 1)) $s: $rps req/s, p99 $p99 ms, errors $err"
                    [ "$s" = direct ] && sleep 3
                done
            done
            # shellcheck disable=SC2086
            d=$(median ${runs[direct]})
            # shellcheck disable=SC2086
            l=$(median ${runs[levee]})
            ratio=$(awk -v a="$l" -v b="$d" 'BEGIN {printf "%.0f", a / b}')
            verdict=$(awk -v r="$ratio" 'BEGIN {print (r >= 50) ? "50x met" : "50x MISSED"}')
            report "| $app | \`$page\` | $visitor${c:+ (\`${c%%=*}\`)} | $d | $l | ${ratio}x | $xcache | $verdict |"
        done
    done
    stop_pid "$LEVEE_PID"
    stop_pid "$DIRECT_PID"
    stop_pid "$PHP_PID"
done
record_report
