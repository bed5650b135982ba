#!/usr/bin/env bash
# benchmarks/seedapps/rhymix.sh: Rhymix (github:rhymix/rhymix, XE's maintained fork), for
# seedapps.sh (sourced after lib.sh and common.sh; see seedapps.sh's header).
#
# Installed through its own web installer (modules/install: license, environment check,
# database, administrator). Rhymix links its pages by short URLs (/board, /board/12;
# config url.rewrite = 1 whatever the installer's rewrite check said) and needs no rewrite
# rules for them: nginx's `try_files ... /index.php?$args` hands them to index.php, whose
# router reads REQUEST_URI. The installer makes a welcome page as the front page (a
# static document in a widget page, no post list) and the boards `board`, `qna`,
# `notice`; so PAGES[0] is the list of `board`, where the posts show, and the front page
# is not measured. The database is reached over MariaDB's Unix socket by putting
# `;unix_socket=PATH` in the host field: Rhymix assembles the PDO DSN as
# "mysql:host=HOST;port=...;dbname=..." (common/framework/DB.php, connect()), with no
# socket field of its own; host `localhost` alone would use PHP's default socket.
#
# Rhymix's CSRF check of a POST (common/framework/Security.php, checkCSRF) takes, in this
# order, a token (only if `security.check_csrf_token` is on; it is off by default), the
# Sec-Fetch-Site header, the Origin, the Referer. rx_post sends all three as a browser
# would. (Debian's fastcgi_params passes HTTP_HOST without the port, and Rhymix then
# refused an Origin of http://127.0.0.1:PORT with a 403; lib.sh's start_nginx_php passes
# the Host as the client sent it.)

APP_PRESET=rhymix
RX_SRC=${SRC:-}/rhymix # the source, for the recording's header
RX_USER=admin
RX_EMAIL=admin@example.com
RX_PASSWORD=levee-admin-1
RX_NICK=LeveeRxAdmin
# The logout link of the layout (xedition) and of the member menu: logged-in pages only.
# (The nick is no mark: anonymous readers see it as the author of the admin's posts.)
MEMBER_MARK="act=dispMemberLogout"
# The login form (every page links it as ?mid=CURRENT&act=dispMemberLoginForm, which
# redirects here, to the member module's own mid).
FIRST_VISIT="/index.php?mid=member&act=dispMemberLoginForm"

# rx_get JAR URL [CURL-ARGS...] : a page, as a browser: cookies kept in JAR, body on stdout.
rx_get() {
    local jar=$1 url=$2
    shift 2
    browser "$jar" "$@" "$url"
}

# rx_post JAR BASE [CURL-ARGS...] : a form POST to BASE/index.php from a page of the site;
# prints the response head (a successful form action answers with a redirect).
rx_post() {
    local jar=$1 base=$2
    shift 2
    browser "$jar" -o /dev/null -D - -H "Sec-Fetch-Site: same-origin" \
        -H "Origin: $base" -e "$base/" "$@" "$base/index.php" | tr -d '\r'
}

# rx_json JAR BASE [CURL-ARGS...] : the same POST as the site's own scripts send it
# (X-Requested-With + _rx_ajax_compat=JSON): the answer is JSON, {"error":0,...} on success.
rx_json() {
    local jar=$1 base=$2
    shift 2
    browser "$jar" -H "Sec-Fetch-Site: same-origin" -H "Origin: $base" \
        -e "$base/" -H "X-Requested-With: XMLHttpRequest" -d _rx_ajax_compat=JSON "$@" "$base/index.php"
}

# location_of HEAD : the Location header of a response head.
location_of() { sed -n 's/^[Ll]ocation: *//p' <<<"$1"; }

install_rhymix() {
    local base=$1 jar="$WORK/rhymix-install.jar" head
    mkdir -p "$ROOT/files"
    start_mariadb
    mariadb_sql "CREATE DATABASE rhymix CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    # 1. The front page of a fresh copy is the license agreement.
    [[ $(rx_get "$jar" "$base/") == *procInstallLicenseAgreement* ]] ||
        { log "rhymix: no license agreement at $base/"; return 1; }
    head=$(rx_post "$jar" "$base" -d module=install -d act=procInstallLicenseAgreement -d license_agreement=Y)
    [[ $(location_of "$head") == *dispInstallCheckEnv* ]] || { log "rhymix: license step: $head"; return 1; }
    # 2. The environment check (its "next" link leads to the database form, rewrite off).
    rx_get "$jar" "$base/index.php?act=dispInstallCheckEnv" >/dev/null
    [[ $(rx_get "$jar" "$base/index.php?act=dispInstallDBConfig") == *procDBConfig* ]] ||
        { log "rhymix: the environment check failed (see $base/index.php?act=dispInstallCheckEnv)"; return 1; }
    # 3. The database.
    head=$(rx_post "$jar" "$base" -d module=install -d act=procDBConfig -d db_type=mysql \
        --data-urlencode "db_host=localhost;unix_socket=$MARIADB_SOCK" -d db_port=3306 \
        -d db_user=levee -d db_pass=levee -d db_database=rhymix -d db_prefix=rx_ \
        --data-urlencode "error_return_url=/index.php?act=dispInstallDBConfig")
    [[ $(location_of "$head") == *dispInstallOtherConfig* ]] ||
        { log "rhymix: database step: $head"; return 1; }
    # 4. The administrator; no SSL, no site lock.
    [[ $(rx_get "$jar" "$base/index.php?act=dispInstallOtherConfig") == *procInstall* ]] ||
        { log "rhymix: no administrator form"; return 1; }
    head=$(rx_post "$jar" "$base" -d act=procInstall -d ruleset=install \
        --data-urlencode "email_address=$RX_EMAIL" --data-urlencode "password=$RX_PASSWORD" \
        --data-urlencode "password2=$RX_PASSWORD" -d "nick_name=$RX_NICK" -d "user_id=$RX_USER" \
        -d time_zone=Etc/UTC -d use_ssl=none -d use_sitelock=N)
    [ -f "$ROOT/files/config/config.php" ] || { log "rhymix: install step: $head"; return 1; }
    # Two posts on the board the installer made.
    local member="$WORK/rhymix-admin.jar" srl
    login_rhymix "$base" "$member" || { log "rhymix: the admin cannot log in"; return 1; }
    rhymix_post "$base" "$member" "Hello from levee" "The first post, written by the install script." >/dev/null &&
        srl=$(rhymix_post "$base" "$member" "A second post" "$(rhymix_lorem)") ||
        { log "rhymix: posting failed"; return 1; }
    PAGES=("/board" "/board/$srl" /)
}

# rhymix_lorem : a post body of a few paragraphs (HTML, as the editor sends it).
rhymix_lorem() {
    local i
    for i in 1 2 3 4 5 6; do
        printf '<p>Paragraph %d. Rhymix keeps its posts in MariaDB and renders them through its template engine; levee stores the page for anonymous readers.</p>' "$i"
    done
}

# rhymix_post BASE JAR TITLE CONTENT : a new post on `board` as the member in JAR (the
# board's write form, as its scripts send it); prints its document_srl.
rhymix_post() {
    local base=$1 jar=$2 out
    rx_get "$jar" "$base/index.php?mid=board&act=dispBoardWrite" >/dev/null
    out=$(rx_json "$jar" "$base" -d mid=board -d act=procBoardInsertDocument \
        --data-urlencode "title=$3" --data-urlencode "content=$4" -d comment_status=ALLOW)
    [[ $out == *'"error":0'* ]] || { log "rhymix: procBoardInsertDocument: $out"; return 1; }
    sed -n 's/.*"document_srl":"\{0,1\}\([0-9]*\).*/\1/p' <<<"$out"
}

login_rhymix() {
    local base=$1 jar=$2 out
    rm -f "$jar"
    rx_get "$jar" "$base$FIRST_VISIT" >/dev/null
    out=$(rx_json "$jar" "$base" -d act=procMemberLogin -d "user_id=$RX_EMAIL" \
        --data-urlencode "password=$RX_PASSWORD")
    [[ $out == *'"error":0'* ]] || { log "rhymix: procMemberLogin: $out"; return 1; }
    [[ $(rx_get "$jar" "$base/index.php?mid=board") == *"$MEMBER_MARK"* ]]
}

edit_rhymix() {
    rhymix_post "$1" "$2" "$3" "<p>$3, posted by the member.</p>" >/dev/null
}

# ---- the recording (benchmarks/seedapps/recordings/rhymix.txt) ------------------------

# rx_exchange OUTFILE TITLE CURL-ARGS... : one exchange, as curl -v saw it: the request
# head, the response head verbatim, the body's length and whether it shows MEMBER_MARK.
rx_exchange() {
    local out=$1 title=$2 body="$WORK/rx-body" trace="$WORK/rx-trace"
    shift 2
    curl -sv -o "$body" "$@" 2>"$trace" || true
    {
        printf '\n== %s\n' "$title"
        sed -n 's/^> //p' "$trace" | tr -d '\r' | sed '/^$/d; s/^/> /'
        sed -n 's/^< //p' "$trace" | tr -d '\r' | sed '/^$/d; s/^/< /'
        printf '(body: %s bytes; member mark `%s`: %s; csrf-token meta: %s)\n' "$(wc -c <"$body")" \
            "$MEMBER_MARK" "$(grep -qF "$MEMBER_MARK" "$body" && echo yes || echo no)" \
            "$(sed -n 's/.*<meta name="csrf-token" content="\([^"]*\)".*/\1/p' "$body" | head -1)"
    } >>"$out"
}

# record_rhymix BASE OUTFILE : the exchanges of an anonymous visitor who logs in and out,
# straight against BASE (nginx + php-fpm, after install_rhymix).
record_rhymix() {
    local base=$1 out=$2 jar="$WORK/rx-record.jar" cookie
    {
        echo "# Rhymix: real HTTP exchanges against nginx + php-fpm (no levee)"
        echo "# Rhymix commit: $(git -C "$RX_SRC" log -1 --format='%H %cd' 2>/dev/null || echo unknown)"
        echo "# $(php -v | head -1); $(mariadbd --version); $( (nginx -v 2>&1 || /usr/sbin/nginx -v 2>&1) | sed 's/nginx version: //')"
        echo "# recorded $(date -u '+%Y-%m-%d %H:%M:%S UTC') by benchmarks/seedapps/rhymix.sh (record_rhymix;"
        echo "# run: benchmarks/seedapps/rhymix.sh record SRC_DIR OUTFILE), after install_rhymix:"
        echo "# posts on /board; PAGES = ${PAGES[*]}; the admin logs in as $RX_EMAIL."
        echo "# '>' lines: the request head curl sent; '<' lines: the response head, verbatim."
        echo "# Bodies are left out. nginx passes HTTP_HOST without the port (Debian's fastcgi_params)."
        echo "# / is the installer's welcome page (no post list); the posts are on /board."
        echo "# (9) sends what a browser keeps after (8): the cookies (8) deleted are dropped."
    } >"$out"
    rm -f "$jar"
    rx_exchange "$out" "(1) GET / with no cookies, desktop Firefox" -A "$FIREFOX_UA" -c "$jar" "$base/"
    cookie=$(awk 'NF >= 7 && ($1 !~ /^#/ || $1 ~ /^#HttpOnly_/) {printf "%s%s=%s", sep, $6, $7; sep = "; "}' "$jar")
    rx_exchange "$out" "(2) GET / again with every cookie (1) set" -A "$FIREFOX_UA" -H "Cookie: $cookie" "$base/"
    rx_exchange "$out" "(3) GET the post ${PAGES[1]} with the same cookies" -A "$FIREFOX_UA" \
        -H "Cookie: $cookie" "$base${PAGES[1]}"
    rx_exchange "$out" "(4) GET / with no cookies, iPhone Safari" -A "$IPHONE_UA" "$base/"
    rx_exchange "$out" "(5) GET the login form $FIRST_VISIT (the visitor of (1), cookies kept from here on)" \
        -A "$FIREFOX_UA" -b "$jar" -c "$jar" "$base$FIRST_VISIT"
    printf '\n(6) posts the form fields act=procMemberLogin user_id=%s password=***** success_return_url=/ (a plain form POST, no JavaScript)\n' "$RX_EMAIL" >>"$out"
    rx_exchange "$out" "(6) POST the login form" -A "$FIREFOX_UA" -b "$jar" -c "$jar" \
        -H "Sec-Fetch-Site: same-origin" -H "Origin: $base" -e "$base$FIRST_VISIT" \
        -d act=procMemberLogin -d "user_id=$RX_EMAIL" --data-urlencode "password=$RX_PASSWORD" \
        -d success_return_url=/ "$base/index.php"
    rx_exchange "$out" "(7) GET / as the logged-in member" -A "$FIREFOX_UA" -b "$jar" -c "$jar" "$base/"
    rx_exchange "$out" "(8) log out: GET the layout's logout link" -A "$FIREFOX_UA" -b "$jar" -c "$jar" \
        -e "$base/" "$base/index.php?act=dispMemberLogout"
    # curl 7.88 keeps in its jar the cookies this answer deletes (NAME=deleted, Max-Age=0,
    # among others set already expired): drop them, as a browser does.
    local name
    for name in $(tr -d '\r' <"$WORK/rx-trace" | sed -n 's/^< [Ss]et-[Cc]ookie: \([^=]*\)=deleted;.*/\1/p'); do
        awk -v n="$name" '$6 != n' "$jar" >"$jar.tmp" && mv "$jar.tmp" "$jar"
    done
    rx_exchange "$out" "(9) GET / after logging out, with the cookies left" -A "$FIREFOX_UA" -b "$jar" -c "$jar" "$base/"
}

# Run alone, `benchmarks/seedapps/rhymix.sh record SRC_DIR OUTFILE` installs Rhymix from
# SRC_DIR/rhymix as seedapps.sh does (nginx + php-fpm + MariaDB, all stopped at the end)
# and writes the recording.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    [ "${1:-}" = record ] && [ -d "${2:-}/rhymix" ] && [ -n "${3:-}" ] ||
        { echo "usage: $0 record SRC_DIR OUTFILE" >&2; exit 2; }
    RX_SRC="$2/rhymix"
    RX_OUT=$(realpath "$3")
    source "$(dirname "$0")/../lib.sh"
    source "$BENCH_DIR/seedapps/common.sh"
    ROOT="$WORK/rhymix"
    if [ -d "$RX_SRC/.git" ] || [ ! -f "$RX_SRC/HEAD" ]; then
        cp -r "$RX_SRC" "$ROOT" && rm -rf "$ROOT/.git"
    else
        mkdir -p "$ROOT" && git -C "$RX_SRC" archive HEAD | tar -x -C "$ROOT"
    fi
    php_fpm_conf rhymix 2
    start_php_fpm
    DIRECT_PORT=$(free_port)
    start_nginx_php nginx-rhymix "$DIRECT_PORT" "$SOCK" "$ROOT"
    install_rhymix "http://127.0.0.1:$DIRECT_PORT" || die "rhymix: install failed"
    record_rhymix "http://127.0.0.1:$DIRECT_PORT" "$RX_OUT"
    log "recorded $RX_OUT"
fi
