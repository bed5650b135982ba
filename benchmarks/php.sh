#!/usr/bin/env bash
# benchmarks/php.sh: levee in nginx's place in front of php-fpm, in one run.
#
# 1. A hello-world PHP page through levee's FastCGI client and through nginx's
#    fastcgi_pass, both to the same php-fpm pool (pm = static, PHP_WORKERS workers, one
#    Unix socket). The page sends no caching headers, so levee runs PHP for every request
#    (as nginx does): this measures the FastCGI path, not the cache.
# 2. Static files from the same document root: 1 KiB and 1 MiB, levee (`--root`) vs nginx
#    (`root`, sendfile on).
# 3. Memory a cached 100 KiB HTML page takes in levee: PAGES distinct pages (text that
#    compresses like real HTML) stored with compression on (the default: stored gzip) and
#    with --no-compression; RSS growth per page.
#
# wrk -t 1 -c CONNS -d DURATION, ROUNDS runs per server alternating; medians.
# Usage: benchmarks/php.sh     (about 6 minutes)
#        The table goes to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   ROUNDS=5 DURATION=10 CONNS=64 PHP_WORKERS=4 PAGES=2000, LEVEE, BUILD, KEEP_WORK (see lib.sh)
# Needs: php8.2-fpm (or any php-fpm), nginx-light, wrk, curl, python3. Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
PHP_WORKERS=${PHP_WORKERS:-4}
PAGES=${PAGES:-2000}

need_tools wrk nginx curl python3
levee_binary
open_report php

# ---- the site ---------------------------------------------------------------------------

ROOT="$WORK/www"
mkdir -p "$ROOT"
printf '<?php\necho "Hello, world!\\n";\n' >"$ROOT/hello.php"
head -c 1024 /dev/urandom >"$ROOT/1k.bin"
head -c $((1024 * 1024)) /dev/urandom >"$ROOT/1m.bin"

# ---- php-fpm ----------------------------------------------------------------------------

php_fpm_conf bench "$PHP_WORKERS"
start_php_fpm

# ---- levee and nginx in front of it -----------------------------------------------------

declare -A PORT PID
PORT[levee]=$(free_port)
ADMIN=$(free_port)
start_bg levee "$LEVEE" serve --listen "127.0.0.1:${PORT[levee]}" \
    --backend "fastcgi+unix:$SOCK" --root "$ROOT" --admin-listen "127.0.0.1:$ADMIN"
PID[levee]=$BG_PID
wait_port "${PORT[levee]}" "${PID[levee]}"

PORT[nginx]=$(free_port)
NGINX_DIR="$WORK/nginx"
mkdir -p "$NGINX_DIR"
nginx_user=""
[ "$(id -u)" = 0 ] && nginx_user="user root;"
# Debian's fastcgi_params plus SCRIPT_FILENAME, as in its snippets/fastcgi-php.conf.
cat >"$NGINX_DIR/nginx.conf" <<EOF
$nginx_user
worker_processes 2;
pid $NGINX_DIR/nginx.pid;
error_log $NGINX_DIR/error.log warn;
events { worker_connections 4096; }
http {
    include /etc/nginx/mime.types;
    access_log off;
    sendfile on;
    keepalive_requests 1000000;
    $(nginx_temp_paths "$NGINX_DIR")
    server {
        listen 127.0.0.1:${PORT[nginx]};
        root $ROOT;
        location ~ \.php\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_pass unix:$SOCK;
        }
    }
}
EOF
start_bg nginx "$(command -v nginx || echo /usr/sbin/nginx)" -e stderr -p "$NGINX_DIR" \
    -c "$NGINX_DIR/nginx.conf" -g 'daemon off;'
PID[nginx]=$BG_PID
wait_port "${PORT[nginx]}" "${PID[nginx]}"

SERVERS=(levee nginx)
for s in "${SERVERS[@]}"; do
    body=$(curl -s "http://127.0.0.1:${PORT[$s]}/hello.php")
    [ "$body" = "Hello, world!" ] || die "$s: /hello.php answered '$body', not the PHP output"
    for f in 1k.bin 1m.bin; do
        cmp -s <(curl -s "http://127.0.0.1:${PORT[$s]}/$f") "$ROOT/$f" || die "$s: /$f differs from the file"
    done
    log "$s: /hello.php runs PHP, static files match"
done

report "# PHP without nginx: levee vs nginx in front of one php-fpm pool ($(date '+%Y-%m-%d %H:%M'))" ""
machine_info
report "- php-fpm: $("$PHP_FPM" -v 2>/dev/null | head -1 | cut -d' ' -f1-2), pm = static, $PHP_WORKERS workers, one Unix socket shared by levee and nginx" \
    "- method: wrk -t 1 -c $CONNS -d ${DURATION}s, $ROUNDS runs per server and target, servers alternated (the first rotates each round); medians." \
    "- levee: \`levee serve --backend fastcgi+unix:SOCK --root ROOT\` (defaults: backend limit = pm.max_children read from php-fpm's configuration, FastCGI connections kept alive, static files from memory up to 1 MiB)." \
    "- nginx: worker_processes 2, fastcgi_pass unix:SOCK with Debian's fastcgi_params (no keep-alive to php-fpm, nginx's default), sendfile on, access_log off." \
    "- Static files are random bytes (application/octet-stream): neither server compresses them." \
    "" \
    "| target | server | req/s (median) | p99 ms (median) | req/s of each run | errors |" \
    "|---|---|---:|---:|---|---:|"

declare -A RPS
for target in hello.php 1k.bin 1m.bin; do
    declare -A runs=() p99s=() errs=()
    for ((r = 0; r < ROUNDS; r++)); do
        for ((k = 0; k < ${#SERVERS[@]}; k++)); do
            s=${SERVERS[(k + r) % ${#SERVERS[@]}]}
            if [ "$s" = nginx ]; then
                # levee's kept-alive php-fpm connections each hold a php-fpm worker until
                # they have been idle 2 s; nginx gets the whole pool, as levee does.
                for _ in $(seq 100); do
                    [ "$(levee_metric "$ADMIN" levee_fastcgi_idle)" = 0 ] && break
                    sleep 0.1
                done
            fi
            connects_before=$(levee_metric "$ADMIN" levee_fastcgi_connects_total)
            read -r rps p99 _ n err <<<"$(run_wrk "http://127.0.0.1:${PORT[$s]}/$target" "$DURATION" "$CONNS")"
            if [ "$s" = levee ] && [ "$target" = hello.php ]; then
                CONNECTS=$((${CONNECTS:-0} + $(levee_metric "$ADMIN" levee_fastcgi_connects_total) - connects_before))
                HELLO_REQUESTS=$((${HELLO_REQUESTS:-0} + n))
            fi
            runs[$s]+="$rps "
            p99s[$s]+="$p99 "
            errs[$s]=$((${errs[$s]:-0} + err))
            log "  $target round $((r + 1))/$ROUNDS $s: $rps req/s, p99 $p99 ms, errors $err"
        done
    done
    for s in "${SERVERS[@]}"; do
        # shellcheck disable=SC2086
        RPS[$target,$s]=$(median ${runs[$s]})
        # shellcheck disable=SC2086
        report "| $target | $s | ${RPS[$target,$s]} | $(median ${p99s[$s]}) | ${runs[$s]% } | ${errs[$s]} |"
    done
done
report ""
report "- hello.php through levee: $CONNECTS php-fpm connections opened for $HELLO_REQUESTS requests ($(awk -v c="$CONNECTS" -v n="$HELLO_REQUESTS" 'BEGIN {printf "%.5f", c / n}') per request; nginx opens one per request)."
for target in hello.php 1k.bin 1m.bin; do
    report "- $target: levee/nginx req/s = $(awk -v a="${RPS[$target,levee]}" -v b="${RPS[$target,nginx]}" 'BEGIN {printf "%.2f", a / b}')"
done
stop_pid "${PID[levee]}"
stop_pid "${PID[nginx]}"
stop_pid "$PHP_PID"

# ---- memory of cached 100 KiB pages -----------------------------------------------------

log "memory: $PAGES cached 100 KiB HTML pages, compressed vs not"
ORIGIN_PORT=$(free_port)
# shellcheck disable=SC2046
start_origin origin "$ORIGIN_PORT" --delay 0ms --no-session $(origin_workers 0) \
    --cache-control "public, max-age=3600" --body-size 102400
PAGE_GZ=$(curl -s "http://127.0.0.1:$ORIGIN_PORT/page/1" | gzip -6 | wc -c)
cat >"$WORK/pages.lua" <<EOF
counter = 0
request = function()
  counter = counter + 1
  if counter > $PAGES then counter = 1 end
  return wrk.format("GET", "/page/" .. counter, {["Accept-Encoding"] = "gzip"})
end
EOF
report "" "## Memory of cached 100 KiB HTML pages" "" \
    "$PAGES distinct pages of \`levee origin --body-size 102400\` (varied words; gzip -6 makes one 102,400-byte page $PAGE_GZ bytes)," \
    "each requested once by a client that accepts gzip (as browsers do); RSS growth of levee, ${SETTLE:-12} s after the last" \
    "page (jemalloc returns freed pages within ~10 s), divided by the pages stored." \
    "Clients that accept no coding get uncompressed copies made on demand and kept in a bounded side cache" \
    "(\`[compression] transcode_memory\`, 32 MiB by default): at most that much more, whatever the number of pages." \
    "" \
    "| levee | RSS before (MiB) | RSS with $PAGES pages (MiB) | per page (KiB) | check |" \
    "|---|---:|---:|---:|---|"
for mode in compressed uncompressed; do
    port=$(free_port)
    flags=(--cache-size 2GiB)
    [ "$mode" = uncompressed ] && flags+=(--no-compression)
    start_levee "levee-$mode" "$port" "$ORIGIN_PORT" "${flags[@]}"
    pid=$LEVEE_PID
    curl -s -o /dev/null "http://127.0.0.1:$port/page/warm"
    before=$(rss_kb "$pid")
    origin_before=$(origin_requests "$ORIGIN_PORT")
    # One connection walks the pages in order, so each is stored once.
    wrk -t 1 -c 1 -d 300s -s "$WORK/pages.lua" --timeout 10s "http://127.0.0.1:$port/" >/dev/null 2>&1 &
    WRK_PID=$!
    for _ in $(seq 600); do
        n=$(( $(origin_requests "$ORIGIN_PORT") - origin_before ))
        [ "$n" -ge "$PAGES" ] && break
        sleep 0.1
    done
    kill "$WRK_PID" 2>/dev/null || true
    wait "$WRK_PID" 2>/dev/null || true
    # jemalloc gives freed pages back to the kernel after ~10 s (its dirty decay).
    sleep "${SETTLE:-12}"
    after=$(rss_kb "$pid")
    x1=$(header_of "http://127.0.0.1:$port/page/1" X-Cache)
    xl=$(header_of "http://127.0.0.1:$port/page/$PAGES" X-Cache)
    per=$(awk -v a="$after" -v b="$before" -v n="$PAGES" 'BEGIN {printf "%.1f", (a - b) / n}')
    report "| $mode | $(mib "$before") | $(mib "$after") | $per | /page/1: $x1, /page/$PAGES: $xl |"
    log "  $mode: RSS $(mib "$before") -> $(mib "$after") MiB, $per KiB per page"
    stop_pid "$pid"
done
report "" "report written to $OUT_FILE"
record_report
