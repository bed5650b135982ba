# benchmarks/lib.sh: helpers shared by hits.sh and seeds.sh. Source it, don't run it.
#
# Every process started with start_bg is stopped on exit (normal end, error, Ctrl-C),
# and the scratch directory $WORK is removed (KEEP_WORK=1 keeps it for inspection).
# Everything listens on 127.0.0.1 only, on free ephemeral ports.

set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$BENCH_DIR")
WORK=$(mktemp -d /tmp/levee-bench.XXXXXX)
BG_PIDS=()
OUT_FILE=""

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# All descendants of a pid (children, grandchildren, ...), one per line.
descendants() {
    local c
    for c in $(pgrep -P "$1" 2>/dev/null || true); do
        echo "$c"
        descendants "$c"
    done
}

# cpu_ticks PID: user + system clock ticks of PID and its descendants, all threads.
cpu_ticks() {
    local p t=0
    for p in "$1" $(descendants "$1"); do
        [ -r "/proc/$p/stat" ] || continue
        t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    done
    echo "$t"
}

cleanup() {
    local rc=$? pid all=() i
    trap - EXIT INT TERM
    for ((i = ${#BG_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${BG_PIDS[i]}
        all+=("$pid" $(descendants "$pid"))
    done
    for pid in "${all[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do
        local alive=0
        for pid in "${all[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for pid in "${all[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "${KEEP_WORK:-0}" = 1 ]; then log "scratch files kept in $WORK"; else rm -rf "$WORK"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# need_tools TOOL... : fail with the apt-get line when a tool is missing.
need_tools() {
    local t missing=()
    for t in "$@"; do
        command -v "$t" >/dev/null 2>&1 || [ -x "/usr/sbin/$t" ] || missing+=("$t")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        local pkgs=() m
        for m in "${missing[@]}"; do
            case $m in
                varnishd | varnishstat) pkgs+=(varnish) ;;
                nginx) pkgs+=(nginx-light) ;;
                python3) pkgs+=(python3) ;;
                curl) pkgs+=(curl) ;;
                *) pkgs+=("$m") ;;
            esac
        done
        echo "missing: ${missing[*]}; install with: apt-get install -y $(printf '%s\n' "${pkgs[@]}" | sort -u | tr '\n' ' ')" >&2
        exit 2
    fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT [PID] [SECONDS]: wait until 127.0.0.1:PORT accepts connections.
wait_port() {
    local port=$1 pid=${2:-} secs=${3:-30} i
    for ((i = 0; i < secs * 10; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            die "process $pid exited before listening on port $port"
        fi
        sleep 0.1
    done
    die "nothing listens on 127.0.0.1:$port after ${secs}s"
}

# start_bg NAME CMD... : run CMD in the background, log to $WORK/NAME.log; sets BG_PID.
start_bg() {
    local name=$1
    shift
    "$@" >"$WORK/$name.log" 2>&1 &
    BG_PID=$!
    BG_PIDS+=("$BG_PID")
}

# stop_pid PID: stop one process started with start_bg (and its children).
stop_pid() {
    local pid=$1 all
    all=("$pid" $(descendants "$pid"))
    kill -TERM "${all[@]}" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "${all[@]}" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# self_signed_cert: a self-signed P-256 certificate for bench.test and 127.0.0.1, two
# days long, in $WORK (sets CERT and KEY).
self_signed_cert() {
    CERT="$WORK/cert.pem"
    KEY="$WORK/key.pem"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=bench.test -addext subjectAltName=DNS:bench.test,IP:127.0.0.1 \
        -keyout "$KEY" -out "$CERT" 2>"$WORK/openssl.log" || { cat "$WORK/openssl.log" >&2; die "openssl req failed"; }
}

# ---- levee ---------------------------------------------------------------------------

# levee_binary: sets LEVEE to a private copy of the release binary, so that a rebuild by
# someone else during the run cannot change the program under test. LEVEE=/path uses
# that binary; BUILD=0 skips `cargo build`.
levee_binary() {
    local src
    if [ -n "${LEVEE:-}" ]; then
        src=$LEVEE
    else
        if [ "${BUILD:-1}" = 1 ]; then
            log "building levee (cargo build --release -p levee)"
            (cd "$REPO_DIR" && cargo build --release -p levee >&2)
        fi
        src="${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/levee"
    fi
    [ -x "$src" ] || die "no levee binary at $src (build it with cargo build --release -p levee)"
    cp "$src" "$WORK/levee"
    LEVEE_SRC=$src
    LEVEE="$WORK/levee"
}

# start_origin NAME PORT ARGS... : levee's demo origin (sets ORIGIN_PID).
start_origin() {
    local name=$1 port=$2
    shift 2
    start_bg "$name" "$LEVEE" origin --listen "127.0.0.1:$port" "$@"
    ORIGIN_PID=$BG_PID
    wait_port "$port" "$ORIGIN_PID"
}

# origin_workers N: the `levee origin` flag for N pages rendered at once (0 = unlimited),
# or nothing when this levee's origin has no --workers flag (older builds: unlimited).
origin_workers() {
    local help
    help=$("$LEVEE" origin --help 2>/dev/null || true)
    case $help in *--workers*) echo "--workers $1" ;; esac
}

# origin_requests PORT: requests the origin has answered so far.
origin_requests() {
    curl -s "http://127.0.0.1:$1/__origin/stats" | sed -n 's/.*"requests":\([0-9]*\).*/\1/p'
}

# levee_metric ADMIN_PORT NAME : a metric's value from levee's admin listener (0 if absent).
levee_metric() {
    curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {v = $2} END {print v + 0}'
}

# ---- php-fpm ---------------------------------------------------------------------------

# php_fpm_conf POOL WORKERS : finds php-fpm (PHP_FPM) and writes $WORK/php-fpm.conf, one
# static pool of WORKERS on the Unix socket SOCK=$WORK/php-fpm.sock (as root, the pool
# runs as root: php-fpm refuses otherwise).
php_fpm_conf() {
    PHP_FPM=$(command -v php-fpm8.2 || command -v php-fpm || ls /usr/sbin/php-fpm* 2>/dev/null | head -1 || true)
    [ -n "$PHP_FPM" ] || { echo "missing: php-fpm; install with: apt-get install -y php8.2-fpm php8.2-cli" >&2; exit 2; }
    SOCK="$WORK/php-fpm.sock"
    local user_line=""
    PHP_FPM_FLAGS=(--nodaemonize --fpm-config "$WORK/php-fpm.conf")
    if [ "$(id -u)" = 0 ]; then user_line="user = root"; PHP_FPM_FLAGS=(-R "${PHP_FPM_FLAGS[@]}"); fi
    printf '%s\n' "[global]" "error_log = $WORK/php-fpm-error.log" "pid = $WORK/php-fpm.pid" \
        "daemonize = no" "[$1]" "$user_line" "listen = $SOCK" "listen.backlog = 4096" \
        "pm = static" "pm.max_children = $2" >"$WORK/php-fpm.conf"
}

# start_php_fpm : starts php-fpm from php_fpm_conf's file and waits for its socket
# (sets PHP_PID).
start_php_fpm() {
    start_bg php-fpm "$PHP_FPM" "${PHP_FPM_FLAGS[@]}"
    PHP_PID=$BG_PID
    for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
    [ -S "$SOCK" ] || die "php-fpm did not create $SOCK; see $WORK/php-fpm-error.log"
}

# start_levee NAME PORT BACKEND_PORT ARGS... (sets LEVEE_PID).
start_levee() {
    local name=$1 port=$2 backend=$3
    shift 3
    start_bg "$name" "$LEVEE" serve --listen "127.0.0.1:$port" --backend "http://127.0.0.1:$backend" "$@"
    LEVEE_PID=$BG_PID
    wait_port "$port" "$LEVEE_PID"
}

# ---- Varnish ---------------------------------------------------------------------------

# start_varnish NAME PORT VCL_FILE STORAGE (sets VARNISH_PID and VARNISH_DIR).
# Runs in the foreground (-F) as the current user (-j none), its own working directory.
start_varnish() {
    local name=$1 port=$2 vcl=$3 storage=$4
    VARNISH_DIR="$WORK/$name"
    mkdir -p "$VARNISH_DIR"
    start_bg "$name" varnishd -F -j none -n "$VARNISH_DIR" -a "127.0.0.1:$port" \
        -T 127.0.0.1:0 -f "$vcl" -s "$storage" -P "$VARNISH_DIR/varnishd.pid"
    VARNISH_PID=$BG_PID
    wait_port "$port" "$VARNISH_PID" 60
}

varnish_stat() { # varnish_stat DIR COUNTER
    varnishstat -n "$1" -1 -f "$2" 2>/dev/null | awk '{print $2}'
}

# ---- nginx -----------------------------------------------------------------------------

# nginx_temp_paths DIR : nginx's temporary directories under DIR, for an http {} block
# (the defaults are under /var/lib/nginx, which a user other than root cannot write).
nginx_temp_paths() {
    local t
    for t in client_body proxy fastcgi uwsgi scgi; do
        printf '%s_temp_path %s/%s; ' "$t" "$1" "${t#client_}"
    done
}

# start_nginx NAME PORT BACKEND_PORT (sets NGINX_PID, NGINX_DIR).
# proxy_cache on disk in $WORK, 2 workers, access log off, sendfile on, keep-alive to
# the backend, and keepalive_requests raised so that wrk's connections are not closed
# every 1000 requests (nginx's default) while Varnish and levee keep theirs open.
# tcp_nopush (Debian's nginx.conf turns it on) is left off: on loopback it cut nginx's
# 100 KiB hits from ~18,000 to ~1,800 req/s with a 48 ms p99 (TCP_CORK + delayed ACK).
start_nginx() {
    local name=$1 port=$2 backend=$3 dir="$WORK/$1"
    run_nginx "$name" "$port" "
    proxy_cache_path $dir/cache levels=1:2 keys_zone=bench:64m max_size=1g inactive=1h use_temp_path=off;
    upstream origin { server 127.0.0.1:$backend; keepalive 64; }
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_cache bench;
            add_header X-Cache-Status \$upstream_cache_status always;
        }
    }"
}

# start_nginx_static NAME PORT ROOT (sets NGINX_PID, NGINX_DIR): nginx serving the files
# under ROOT itself, as a site's static files are served: open_file_cache, and the rest
# as start_nginx.
start_nginx_static() {
    run_nginx "$1" "$2" "
    open_file_cache max=1000 inactive=60s;
    server {
        listen 127.0.0.1:$2;
        root $3;
    }"
}

# run_nginx NAME PORT HTTP_CONF (sets NGINX_PID, NGINX_DIR=$WORK/NAME): nginx with 2
# workers, access log off, sendfile on, keepalive_requests raised, its temporary paths
# in NGINX_DIR, and HTTP_CONF inside `http {}`; waits for PORT.
run_nginx() {
    local name=$1 port=$2 conf=$3 user_line=""
    NGINX_DIR="$WORK/$name"
    mkdir -p "$NGINX_DIR"
    [ "$(id -u)" = 0 ] && user_line="user root;"
    cat >"$NGINX_DIR/nginx.conf" <<EOF
$user_line
worker_processes 2;
pid $NGINX_DIR/nginx.pid;
error_log $NGINX_DIR/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    keepalive_requests 1000000;
    $(nginx_temp_paths "$NGINX_DIR")
$conf
}
EOF
    start_bg "$name" "$(command -v nginx || echo /usr/sbin/nginx)" -e stderr -p "$NGINX_DIR" -c "$NGINX_DIR/nginx.conf" -g 'daemon off;'
    NGINX_PID=$BG_PID
    wait_port "$port" "$NGINX_PID"
}

# start_nginx_php NAME PORT SOCKET ROOT : nginx in front of php-fpm as PHP applications'
# documentation deploys them (try_files to index.php, PATH_INFO for /index.php/Page):
# "direct" in apps.sh and seedapps.sh (sets DIRECT_PID).
start_nginx_php() {
    local name=$1 port=$2 sock=$3 root=$4 dir="$WORK/$1" user_line=""
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && user_line="user root;"
    cat >"$dir/nginx.conf" <<EOF
$user_line
worker_processes 2;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    include /etc/nginx/mime.types;
    access_log off;
    sendfile on;
    keepalive_requests 1000000;
    $(nginx_temp_paths "$dir")
    fastcgi_read_timeout 60s;
    server {
        listen 127.0.0.1:$port;
        root $root;
        index index.php doku.php wiki.php;
        location / { try_files \$uri \$uri/ /index.php?\$args; }
        location ~ [^/]\.php(/|\$) {
            fastcgi_split_path_info ^(.+?\.php)(/.*)\$;
            include /etc/nginx/fastcgi_params;
            # Debian's fastcgi_params sets HTTP_HOST to \$host, without the port:
            # applications then build URLs and CSRF checks for the wrong origin.
            fastcgi_param HTTP_HOST \$http_host;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_param PATH_INFO \$fastcgi_path_info;
            fastcgi_pass unix:$sock;
        }
    }
}
EOF
    start_bg "$name" "$(command -v nginx || echo /usr/sbin/nginx)" -e stderr -p "$dir" \
        -c "$dir/nginx.conf" -g 'daemon off;'
    wait_port "$port" "$BG_PID"
    DIRECT_PID=$BG_PID
}

# ---- measuring -------------------------------------------------------------------------

# bench_row URL [COOKIE] : one `levee bench URL -c $CONNS -d ${DURATION}s` run (COOKIE
# sent on every request), prints "rps p99_ms errors".
bench_row() {
    local out cookie=()
    [ -n "${2:-}" ] && cookie=(--cookie "$2")
    out=$("$LEVEE" bench "$1" -c "$CONNS" -d "${DURATION}s" -q --csv - "${cookie[@]}")
    python3 -c '
import csv, sys
row = next(csv.DictReader(sys.stdin))
print(round(float(row["rps"])), "%.1f" % float(row["p99_ms"]), row["errors"])' <<<"$out"
}



ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

xcache_vcl() { # xcache_vcl FILE BACKEND_PORT: Varnish's built-in rules plus an X-Cache header
    cat >"$1" <<EOF
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$2"; }
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; }
}
EOF
}


# The wrk script that prints exact numbers from wrk's own histogram (no per-request Lua).
cat >"$WORK/report.lua" <<'EOF'
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT rps=%.1f p50_us=%d p99_us=%d requests=%d sockerr=%d status_err=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50.0), latency:percentile(99.0),
    summary.requests, e.connect + e.read + e.write + e.timeout, e.status))
end
EOF

# run_wrk URL SECONDS CONNS [SCRIPT] : one wrk run (-t 1), prints "rps p99_ms p50_ms
# requests errors". errors = socket errors + HTTP status >= 400 + non-2xx/3xx responses.
# SCRIPT (default report.lua) must print report.lua's RESULT line from its done().
run_wrk() {
    local url=$1 secs=$2 conns=$3 script=${4:-$WORK/report.lua} out line non2xx
    out=$(wrk -t 1 -c "$conns" -d "${secs}s" --timeout 10s -s "$script" "$url" 2>&1) || true
    line=$(grep '^RESULT' <<<"$out" || true)
    [ -n "$line" ] || { echo "$out" >&2; die "wrk produced no result for $url"; }
    non2xx=$(sed -n 's/.*Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' <<<"$out")
    awk -v n="${non2xx:-0}" '{
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%.0f %.2f %.2f %d %d\n", v["rps"], v["p99_us"] / 1000, v["p50_us"] / 1000, v["requests"], v["sockerr"] + v["status_err"] + n
    }' <<<"$line"
}

# median NUMBER... : the median (mean of the middle two for an even count).
median() {
    printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {
        if (NR == 0) { print "n/a"; exit }
        if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# rss_kb PID... : summed VmRSS in KiB of the given processes and all their descendants.
rss_kb() {
    local p total=0 v
    for p in $(for x in "$@"; do echo "$x"; descendants "$x"; done | sort -u); do
        v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

# header_of URL HEADER : value of one response header (case-insensitive), empty if none.
header_of() {
    curl -s -o /dev/null -D - "$1" | tr -d '\r' | awk -v h="$(tr 'A-Z' 'a-z' <<<"$2")" -F': ' \
        'tolower($1) == h {print $2; exit}'
}

# ---- output ----------------------------------------------------------------------------

# open_report NAME : results go to stdout and benchmarks/out/NAME-<date>.md.
open_report() {
    mkdir -p "$BENCH_DIR/out"
    OUT_FILE="$BENCH_DIR/out/$1-$(date +%Y-%m-%d-%H%M).md"
    : >"$OUT_FILE"
}

# record_report : appends the finished report to BENCHMARKS.md (its title one level
# down, as a dated section at the end), so that every run leaves its table in the
# repository's record. RECORD=0 leaves BENCHMARKS.md alone (trial runs).
record_report() {
    [ "${RECORD:-1}" = 1 ] || return 0
    {
        printf '\n'
        sed 's/^# /### /' "$OUT_FILE"
    } >>"$REPO_DIR/BENCHMARKS.md"
    log "table appended to $REPO_DIR/BENCHMARKS.md (RECORD=0 to skip)"
}

# report LINE... : one line of the result table, to stdout and the report file.
report() {
    printf '%s\n' "$@" | tee -a "$OUT_FILE"
}

machine_info() {
    local commit dirty
    commit=$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)
    dirty=$(git -C "$REPO_DIR" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null | wc -l)
    report "- machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), Linux $(uname -r)" \
        "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared; other jobs may compile)" \
        "- levee: $LEVEE_SRC ($("$LEVEE" --version 2>/dev/null | head -1 || echo "no --version")); repository at commit $commit$([ "$dirty" -gt 0 ] && echo " + $dirty uncommitted file(s) in crates/ or Cargo files" || true)" \
        "- $(varnishd -V 2>&1 | head -1 | sed 's/ revision.*//;s/[()]//g'), $( (nginx -v 2>&1 || /usr/sbin/nginx -v 2>&1) | sed 's/nginx version: //'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}')"
}
