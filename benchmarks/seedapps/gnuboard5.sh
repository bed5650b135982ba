#!/usr/bin/env bash
# benchmarks/seedapps/gnuboard5.sh: gnuboard5 (github:gnuboard/gnuboard5, the Korean PHP
# forum), for seedapps.sh (sourced after lib.sh and common.sh; see seedapps.sh's header).
#
# Installed through its own web installer (install/: license, database + administrator
# form, its AJAX database check, install_db.php), as its screens ask: a `data` directory
# with mode 707. The shop (Youngcart) box, checked by default, is unchecked: the forum
# only. The installer makes the boards notice, qa, free and gallery, and the front page
# shows the latest posts of each (theme `basic`); the posts go to `free`.
#
# The database is reached over MariaDB's Unix socket with the host `localhost` and a
# `.user.ini` in the root setting `mysqli.default_socket` (php-fpm reads it for every
# script below the root). No host field works: gnuboard passes the host untouched to
# mysqli_connect($host, $user, $pass, $db) (lib/common.lib.php sql_connect,
# install/install.function.php install_db_connect), with no socket argument, and mysqlnd
# takes only the bare `localhost` as "the default socket": `localhost:/path/sock` is tried
# as TCP to localhost (connection refused; MariaDB here has no network).
#
# Posts go through the board's write form as its script sends it: common.js asks
# bbs/write_token.php for a token (stored in the session) just before submitting, and
# write_update.php refuses a post without it.
#
# Run as a script, it records gnuboard's real HTTP exchanges (straight against nginx +
# php-fpm, no levee) into a file: see record_gnuboard5 and the end of this file.
#   benchmarks/seedapps/gnuboard5.sh record SRC_DIR/gnuboard5 OUTFILE

APP_PRESET=gnuboard
G5_USER=admin
G5_PASSWORD=levee-admin-1
G5_NICK=LeveeG5Admin
G5_EMAIL=admin@example.com
G5_BOARD=free
# The logout link of the header (theme/basic/head.php): logged-in pages only. (The nick is
# no mark: anonymous readers see it as the author of the admin's posts.)
MEMBER_MARK='/bbs/logout.php">로그아웃</a>'
FIRST_VISIT=/bbs/login.php

# g5_get JAR URL [CURL-ARGS...] : a page, as a browser: cookies kept in JAR, body on stdout.
g5_get() {
    local jar=$1 url=$2
    shift 2
    browser "$jar" "$@" "$url"
}

# g5_post JAR URL REFERER [CURL-ARGS...] : a form POST from the page REFERER; body on stdout.
g5_post() {
    local jar=$1 url=$2 referer=$3
    shift 3
    browser "$jar" -e "$referer" "$@" "$url"
}

install_gnuboard5() {
    local base=$1 jar="$WORK/gnuboard5-install.jar" page token out
    mkdir -p "$ROOT/data"
    chmod 707 "$ROOT/data"
    start_mariadb
    mariadb_sql "CREATE DATABASE gnuboard5 CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    printf 'mysqli.default_socket = %s\n' "$MARIADB_SOCK" >"$ROOT/.user.ini"
    # 1. A fresh copy's front page links to install/, the license page.
    [[ $(g5_get "$jar" "$base/") == *"$base/install/"* ]] ||
        { log "gnuboard5: no link to the installer at $base/"; return 1; }
    [[ $(g5_get "$jar" "$base/install/") == *install_config.php* ]] ||
        { log "gnuboard5: no license form at $base/install/"; return 1; }
    # 2. The license agreed: the database and administrator form, with its AJAX token.
    page=$(g5_post "$jar" "$base/install/install_config.php" "$base/install/" --data-urlencode 'agree=동의함')
    token=$(sed -n 's/.*name="ajax_token" value="\([0-9a-f]*\)".*/\1/p' <<<"$page")
    [ -n "$token" ] || { log "gnuboard5: no ajax_token in install_config.php"; return 1; }
    local form=(-d mysql_host=localhost -d mysql_user=levee -d mysql_pass=levee -d mysql_db=gnuboard5
        -d table_prefix=g5_ -d g5_shop_prefix=g5_shop_ -d "ajax_token=$token"
        -d "admin_id=$G5_USER" --data-urlencode "admin_pass=$G5_PASSWORD"
        --data-urlencode "admin_name=$G5_NICK" --data-urlencode "admin_email=$G5_EMAIL")
    # 3. The form's script checks the database first, then submits.
    out=$(g5_post "$jar" "$base/install/ajax.install.check.php" "$base/install/install_config.php" \
        -H "X-Requested-With: XMLHttpRequest" "${form[@]}")
    [[ $out == *'"success"'* ]] || { log "gnuboard5: ajax.install.check.php: $out"; return 1; }
    out=$(g5_post "$jar" "$base/install/install_db.php" "$base/install/install_config.php" "${form[@]}")
    [ -f "$ROOT/data/dbconfig.php" ] && [[ $out == *'설치가 완료되었습니다'* ]] ||
        { log "gnuboard5: install_db.php: $(sed 's/<[^>]*>//g' <<<"$out" | grep -v '^\s*$' | tail -5)"; return 1; }
    # Two posts on `free`, as the admin.
    local member="$WORK/gnuboard5-admin.jar" id
    login_gnuboard5 "$base" "$member" || { log "gnuboard5: the admin cannot log in"; return 1; }
    gnuboard5_post "$base" "$member" "Hello from levee" "The first post, written by the install script." >/dev/null &&
        id=$(gnuboard5_post "$base" "$member" "A second post" "$(gnuboard5_lorem)") ||
        { log "gnuboard5: posting failed"; return 1; }
    PAGES=(/ "/bbs/board.php?bo_table=$G5_BOARD&wr_id=$id")
}

# gnuboard5_lorem : a post body of a few paragraphs (plain text: the boards have no editor).
gnuboard5_lorem() {
    local i
    for i in 1 2 3 4 5 6; do
        printf 'Paragraph %d. gnuboard keeps its posts in MariaDB and renders them through its skins; levee stores the page for anonymous readers.\n\n' "$i"
    done
}

# gnuboard5_post BASE JAR SUBJECT CONTENT : a new post on $G5_BOARD as the member in JAR,
# through the board's write form; prints its wr_id.
gnuboard5_post() {
    # Two lines: bash expands a whole `local` line before assigning, so `$base` in the
    # same line would be the caller's.
    local base=$1 jar=$2 page uid token resp
    local form="$base/bbs/write.php?bo_table=$G5_BOARD"
    page=$(g5_get "$jar" "$form")
    uid=$(sed -n 's/.*name="uid" value="\([0-9]*\)".*/\1/p' <<<"$page")
    [ -n "$uid" ] || { log "gnuboard5: no write form at $form"; return 1; }
    # What common.js does on submit: a fresh token from write_token.php.
    token=$(g5_post "$jar" "$base/bbs/write_token.php" "$form" -H "X-Requested-With: XMLHttpRequest" \
        -d "bo_table=$G5_BOARD" | sed -n 's/.*"token":"\([0-9a-f]*\)".*/\1/p')
    [ -n "$token" ] || { log "gnuboard5: no token from write_token.php"; return 1; }
    # The form (skin/board/basic/write.skin.php) is multipart; --form-string: no @, <, ;type=.
    resp=$(g5_post "$jar" "$base/bbs/write_update.php" "$form" -o /dev/null -D - \
        -F "token=$token" -F "uid=$uid" -F w= -F "bo_table=$G5_BOARD" -F wr_id= -F sca= -F sfl= \
        -F stx= -F spt= -F sst= -F sod= -F page= -F html= --form-string "wr_subject=$3" \
        --form-string "wr_content=$4" -F wr_link1= -F wr_link2= | tr -d '\r')
    # Accepted: a redirect to the new post.
    sed -n 's/^[Ll]ocation: .*[?&]wr_id=\([0-9]*\).*/\1/p' <<<"$resp" | grep . ||
        { log "gnuboard5: write_update.php: $(head -1 <<<"$resp")"; return 1; }
}

login_gnuboard5() {
    local base=$1 jar=$2
    rm -f "$jar"
    g5_get "$jar" "$base$FIRST_VISIT" >/dev/null
    g5_post "$jar" "$base/bbs/login_check.php" "$base$FIRST_VISIT" -o /dev/null \
        -d "url=$base/" -d "mb_id=$G5_USER" --data-urlencode "mb_password=$G5_PASSWORD"
    [[ $(g5_get "$jar" "$base/") == *"$MEMBER_MARK"* ]]
}

# A new post on $G5_BOARD: the front page's latest-posts box for it (theme/basic/index.php,
# latest('theme/pic_list', 'free', 4, 23)) shows its subject, cut to 23 characters, as soon
# as write_update.php has dropped that box's cache file (delete_cache_latest).
edit_gnuboard5() {
    gnuboard5_post "$1" "$2" "$3" "$3, posted by the member." >/dev/null
}

# g5_exchange OUT TITLE JAR URL [CURL-ARGS...] : one request as a browser (cookies from and
# to JAR), appended to OUT: the request head as sent, the response head verbatim, the
# body's length and whether it shows MEMBER_MARK.
g5_exchange() {
    local out=$1 title=$2 jar=$3 url=$4 body="$WORK/g5-exchange.body" head="$WORK/g5-exchange.head"
    shift 4
    curl -sv -A "$FIREFOX_UA" -b "$jar" -c "$jar" -o "$body" -D "$head" "$@" "$url" 2>"$WORK/g5-exchange.trace"
    {
        printf '\n## %s\n\n```\n' "$title"
        tr -d '\r' <"$WORK/g5-exchange.trace" | sed -n 's/^> //p' | grep -v '^$'
        echo
        tr -d '\r' <"$head" | grep -v '^$'
        echo '```'
        printf '\nbody: %d bytes; member mark `%s`: %s\n' "$(wc -c <"$body")" "$MEMBER_MARK" \
            "$(grep -qF "$MEMBER_MARK" "$body" && echo shown || echo absent)"
    } >>"$out"
}

# record_gnuboard5 BASE OUTFILE : gnuboard's exchanges with one browser (one cookie jar)
# from its first visit to after its logout, appended to OUTFILE (PAGES set by the install).
record_gnuboard5() {
    local base=$1 out=$2 jar="$WORK/gnuboard5-record.jar" fresh="$WORK/gnuboard5-fresh.jar"
    rm -f "$jar" "$fresh"
    g5_exchange "$out" "(1) GET / with no cookies" "$jar" "$base/"
    g5_exchange "$out" "(2) GET / again, with every cookie (1) set" "$jar" "$base/"
    g5_exchange "$out" "(3) GET the post page with those cookies" "$jar" "$base${PAGES[1]}"
    g5_exchange "$out" "(3b) GET the post page again, with every cookie so far" "$jar" "$base${PAGES[1]}"
    g5_exchange "$out" "(4) GET $FIRST_VISIT (the same browser)" "$jar" "$base$FIRST_VISIT"
    g5_exchange "$out" "(4b) GET $FIRST_VISIT with no cookies (FIRST_VISIT: a new visitor)" "$fresh" "$base$FIRST_VISIT"
    g5_exchange "$out" "(5) the login POST (its form: theme/basic/skin/member/basic/login.skin.php)" "$jar" \
        "$base/bbs/login_check.php" -e "$base$FIRST_VISIT" \
        -d "url=$base/" -d "mb_id=$G5_USER" --data-urlencode "mb_password=$G5_PASSWORD"
    printf '\nrequest body (password masked): `url=%s/&mb_id=%s&mb_password=*****`\n' "$base" "$G5_USER" >>"$out"
    g5_exchange "$out" "(6) GET / as the logged-in member" "$jar" "$base/"
    g5_exchange "$out" "(7) the logout: the header's link, a GET" "$jar" "$base/bbs/logout.php"
    g5_exchange "$out" "(8) GET / after the logout, with the cookies left" "$jar" "$base/"
    g5_exchange "$out" "(9) GET / with a PHPSESSID the server never issued (no other cookie)" \
        "$WORK/gnuboard5-none.jar" "$base/" -b "PHPSESSID=leveemadeup0123456789abcd"
}

# Run as a script: installs gnuboard (MariaDB, php-fpm, nginx as seedapps.sh runs them)
# and records its exchanges into OUTFILE.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    [ "${1:-}" = record ] && [ -e "${2:-}" ] && [ -n "${3:-}" ] ||
        { echo "usage: benchmarks/seedapps/gnuboard5.sh record SRC_DIR/gnuboard5 OUTFILE" >&2; exit 2; }
    G5_SRC=$(cd "$2" && pwd)
    G5_OUT=$3
    source "$(dirname "$0")/../lib.sh"
    source "$BENCH_DIR/seedapps/common.sh"
    need_tools nginx curl php mariadbd
    ROOT="$WORK/gnuboard5"
    if [ -d "$G5_SRC/.git" ] || [ ! -f "$G5_SRC/HEAD" ]; then
        cp -r "$G5_SRC" "$ROOT" && rm -rf "$ROOT/.git"
    else
        mkdir -p "$ROOT" && git -C "$G5_SRC" archive HEAD | tar -x -C "$ROOT"
    fi
    php_fpm_conf gnuboard5 2
    start_php_fpm
    port=$(free_port)
    start_nginx_php nginx-gnuboard5 "$port" "$SOCK" "$ROOT"
    install_gnuboard5 "http://127.0.0.1:$port" || die "gnuboard5: install failed"
    {
        echo "# gnuboard5: real HTTP exchanges, straight against nginx + php-fpm (no levee)"
        echo
        echo "- gnuboard5: $(git -C "$G5_SRC" log -1 --format='%H %cd' 2>/dev/null || echo 'unknown commit')"
        echo "- $("$PHP_FPM" -v | head -1); $(nginx -v 2>&1); MariaDB $(mariadbd --version | awk '{print $3}')"
        echo "- recorded $(date -u '+%Y-%m-%d %H:%M:%S UTC') by \`benchmarks/seedapps/gnuboard5.sh record $2 $3\`"
        echo "  (installed by install_gnuboard5: the web installer, forum only, theme basic; the"
        echo "  admin \`$G5_USER\` (nick $G5_NICK) wrote two posts on \`$G5_BOARD\`; the post page is ${PAGES[1]})"
        echo "  (database: host \`localhost\`, mysqli.default_socket from the root's .user.ini)"
        echo "- one browser, one cookie jar (curl, User-Agent: $FIREFOX_UA);"
        echo "  request heads as curl sent them, response heads verbatim, bodies left out"
        echo "- cookie names: PHPSESSID is PHP's session; the others are set_cookie()'s, named"
        echo "  md5(name) with the value base64-encoded (lib/common.lib.php set_cookie):"
        for n in ck_visit_ip ck_bo_table mb_client_key ck_mb_id ck_auto; do
            printf '  %s = md5("%s")\n' "$(php -r 'echo md5($argv[1]);' "$n")" "$n"
        done
    } >"$G5_OUT"
    record_gnuboard5 "http://127.0.0.1:$port" "$G5_OUT"
    log "recorded into $G5_OUT"
fi
