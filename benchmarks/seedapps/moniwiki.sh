# benchmarks/seedapps/moniwiki.sh: MoniWiki (github:wkpark/moniwiki) for seedapps.sh.
# File-based, no database. Its installer (monisetup.php) only writes config.php from
# config.php.default, which is what install_moniwiki does; its registration form dies on
# PHP 8 (wikilib.php's setPasswd calls crypt() with one argument, an error since PHP 8.0),
# so the admin's account is written as saveUser() writes it, with a crypt() hash that its
# checkPasswd() accepts. Login and edits go through the wiki's own forms.

APP_PRESET=moniwiki
MEMBER_MARK='<span>LeveeAdmin</span>'
FIRST_VISIT="/wiki.php/SandBox?action=info"

install_moniwiki() {
    local base=$1
    cp "$ROOT/config.php.default" "$ROOT/config.php"
    # Served from the root, not /moniwiki/ (its default url_prefix): assets load.
    sed -i "s|^\$url_prefix=.*|\$url_prefix= '';|" "$ROOT/config.php"
    # data/cache: without it every cache write falls back to a file in /tmp (tempnam)
    # that is never renamed into place.
    mkdir -p "$ROOT/data/text" "$ROOT/data/user" "$ROOT/data/cache"
    for f in "$ROOT"/data/*.sample; do cp "$f" "${f%.sample}"; done
    # An empty wiki dies in wikilib.php under PHP 8 (getLikePages() returns false).
    printf 'Welcome to the levee test wiki.\n\n== Section ==\nSome text for readers.\n' >"$ROOT/data/text/FrontPage"
    printf 'Another page, with a [[FrontPage]] link.\n' >"$ROOT/data/text/SandBox"
    printf '[[UserPreferences]]\n' >"$ROOT/data/text/UserPreferences"
    local hash
    hash=$(php -r 'echo crypt("levee-admin-1", "$6$" . bin2hex(random_bytes(8)) . "$");')
    printf '# Data saved\nemail=admin@example.com\npassword=%s\nregdate=%s\n' \
        "$hash" "$(date -u '+%Y/%m/%d %H:%M:%S')" >"$ROOT/data/user/wu-LeveeAdmin"
    chmod -R a+rwX "$ROOT/data"
    curl -sf -o /dev/null "$base/wiki.php/FrontPage" || return 1
    PAGES=(/wiki.php/FrontPage /wiki.php/SandBox)
}

login_moniwiki() {
    local base=$1 jar=$2
    curl -s -o /dev/null -b "$jar" -c "$jar" \
        --data 'action=userform&login_id=LeveeAdmin&password=levee-admin-1&login=Login' \
        "$base/wiki.php/UserPreferences"
    curl -s -b "$jar" -c "$jar" "$base/wiki.php/FrontPage" | grep -qF "$MEMBER_MARK"
}

edit_moniwiki() {
    local base=$1 jar=$2 text=$3 stamp
    stamp=$(curl -s -b "$jar" -c "$jar" "$base/wiki.php/FrontPage?action=edit" |
        sed -n 's/.*name="datestamp" value="\([0-9]*\)".*/\1/p')
    [ -n "$stamp" ] || return 1
    curl -sf -o /dev/null -b "$jar" -c "$jar" --data-urlencode "savetext=Welcome. $text" \
        --data "action=savepage&datestamp=$stamp&comment=levee" "$base/wiki.php/FrontPage"
}
