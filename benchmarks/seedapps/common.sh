# benchmarks/seedapps/common.sh: what the seed applications' scripts share (sourced after
# lib.sh by seedapps.sh, and by an application's file run alone to record it): a browser
# for their forms, and a private MariaDB (its own data and tmp directories under $WORK, a
# Unix socket, no network; stopped with everything else start_bg started).

# The User-Agents the scripts browse with: a desktop Firefox, a phone's Safari.
FIREFOX_UA="Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
IPHONE_UA="Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"

# browser JAR CURL-ARGS... : one request as a desktop browser keeping its cookies in JAR.
browser() {
    local jar=$1
    shift
    curl -s -A "$FIREFOX_UA" -b "$jar" -c "$jar" "$@"
}

MARIADB_SOCK=""

# start_mariadb : starts the server once (later calls do nothing); sets MARIADB_SOCK.
# Databases are made with `mariadb_sql "CREATE DATABASE x"`; the user `levee`, password
# `levee`, may use them all (over the socket: host `localhost`, or `localhost:$MARIADB_SOCK`
# where an application takes a socket in its host field).
start_mariadb() {
    [ -n "$MARIADB_SOCK" ] && return 0
    local dir="$WORK/mariadb"
    mkdir -p "$dir/tmp"
    mariadb-install-db --no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" \
        --auth-root-authentication-method=normal --skip-test-db --user=root >"$dir/install.log" 2>&1 ||
        die "mariadb-install-db failed: $(tail -5 "$dir/install.log")"
    start_bg mariadbd mariadbd --no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" \
        --socket="$dir/sock" --pid-file="$dir/pid" --skip-networking --user=root \
        --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=0 --skip-log-bin
    local pid=$BG_PID i
    for i in $(seq 300); do
        mariadb --socket="$dir/sock" -uroot -e 'SELECT 1' >/dev/null 2>&1 && break
        kill -0 "$pid" 2>/dev/null || die "mariadbd exited; see $dir"
        [ "$i" = 300 ] && die "mariadbd did not answer in 30 s"
        sleep 0.1
    done
    MARIADB_SOCK="$dir/sock"
    mariadb_sql "CREATE USER 'levee'@'localhost' IDENTIFIED BY 'levee'; GRANT ALL ON *.* TO 'levee'@'localhost'"
}

# mariadb_sql SQL : runs SQL as root.
mariadb_sql() { mariadb --socket="$MARIADB_SOCK" -uroot --batch --skip-column-names -e "$1"; }
