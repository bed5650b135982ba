#!/usr/bin/env bash
# benchmarks/warm.sh: the seed's warm-worker experiment (ReactPHP/php-pm, 130 -> 2,000
# req/s for a Symfony CMS), uncached:
#   - under php-fpm (pm = static, PHP_WORKERS workers, opcache on) through levee's
#     FastCGI, where every request boots the app again, against
#   - the same app kept warm in levee's app pool (`--app`, runtime/levee-worker.php, the
#     same number of processes), where it boots once per process.
# APP=symfony (default): the Symfony 5.4 test app from Debian's packages
# (crates/levee/tests/php-apps/symfony, one front controller for both), its Twig page `/`
# and its JSON endpoint `/json`. APP=laravel: the Laravel 8 test app beside it, the same
# two routes (Blade, the web middleware group with file sessions). APP=synthetic: a generated framework-like tree (300
# class files and a container "compiled" at boot, about 50 ms), one page.
# Both answer uncacheable responses, so levee's cache plays no part.
#
# Load: `levee bench URL -c C -d DURATION` at 16 and 64 clients, ROUNDS runs per setup
# alternating; medians.
# Usage: benchmarks/warm.sh             (about 3 minutes per URL)
#        The table goes to stdout, benchmarks/out/ and the end of BENCHMARKS.md (RECORD=0: not there).
# Env:   APP=symfony|laravel|synthetic ROUNDS=3 DURATION=10 PHP_WORKERS=4 BOOT_WORK=140000, LEVEE, BUILD, KEEP_WORK
# Needs: php8.2-fpm, php8.2-cgi, php8.2-cli, curl, python3 (APP=symfony: php-symfony-framework-bundle,
#        php-symfony-twig-bundle, php-twig). Targets 127.0.0.1 only.
source "$(dirname "$0")/lib.sh"

APP_KIND=${APP:-symfony}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
PHP_WORKERS=${PHP_WORKERS:-4}
BOOT_WORK=${BOOT_WORK:-140000}

need_tools php php-cgi curl python3
levee_binary
open_report warm

# ---- the app -------------------------------------------------------------------------

APP="$WORK/app"
if [ "$APP_KIND" = laravel ]; then
    [ -f /usr/share/php/Illuminate/autoload.php ] ||
        { echo "missing: Laravel; install with: apt-get install -y php-laravel-framework" >&2; exit 2; }
    cp -r "$REPO_DIR/crates/levee/tests/php-apps/laravel" "$APP"
    # Sessions in memory (Laravel's array driver) for both setups: with file sessions
    # every cookieless request of the load writes a session file, and the 2% session GC
    # scans them all, so both setups measure the file system (and slow down as files
    # pile up), not the framework.
    sed -i "s/'driver' => 'file'/'driver' => 'array'/" "$APP/config/session.php"
    grep -q "'driver' => 'array'" "$APP/config/session.php" || die "cannot set Laravel's session driver"
    ROOT="$APP/public"
    FRONT="$APP/public/index.php"
    URLS="/ /json"
    CHECK="Hello levee"
    DESCRIBE='the Laravel 8.83 test app (crates/levee/tests/php-apps/laravel: HTTP kernel with the web group (cookies, sessions in memory for the benchmark, CSRF), Blade, debug off) from Debian'"'"'s packages, one front controller public/index.php for both; `/` renders a Blade page, `/json` a JSON response'
elif [ "$APP_KIND" = symfony ]; then
    [ -f /usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php ] ||
        { echo "missing: Symfony; install with: apt-get install -y php-symfony-framework-bundle php-symfony-twig-bundle php-twig" >&2; exit 2; }
    cp -r "$REPO_DIR/crates/levee/tests/php-apps/symfony" "$APP"
    ROOT="$APP/public"
    FRONT="$APP/public/index.php"
    URLS="/ /json"
    CHECK="Hello levee"
    DESCRIBE='the Symfony 5.4 test app (crates/levee/tests/php-apps/symfony: FrameworkBundle, TwigBundle, prod, debug off) from Debian'"'"'s packages, one front controller public/index.php for both; `/` renders a Twig page, `/json` a JsonResponse'
else
APP="$WORK/app"
mkdir -p "$APP/src"
php -r '
$n = 300;
for ($i = 0; $i < $n; $i++) {
    $m = "";
    for ($j = 0; $j < 8; $j++) {
        $m .= "    public function m$j(array \$a): array { return array_map(fn(\$x) => \$x * $j + $i, \$a); }\n";
    }
    file_put_contents("'"$APP"'/src/C$i.php", "<?php\nfinal class C$i {\n    public const ROUTES = [\"/r$i/a\" => \"a\", \"/r$i/b\" => \"b\"];\n$m}\n");
}'
cat >"$APP/bootstrap.php" <<EOF
<?php
// What a framework does before it can answer: load its classes, build its container.
foreach (glob(__DIR__ . '/src/*.php') as \$f) {
    require_once \$f;
}
\$routes = [];
for (\$i = 0; \$i < 300; \$i++) {
    \$c = "C\$i";
    foreach (\$c::ROUTES as \$path => \$action) {
        \$routes[\$path] = [\$c, \$action];
    }
}
\$services = [];
for (\$k = 0; \$k < $BOOT_WORK; \$k++) {
    \$services['svc' . (\$k % 5000)][] = md5((string) \$k);
}
return ['routes' => \$routes, 'services' => count(\$services)];
EOF
# The request itself is cheap: find a route, render a little HTML.
cat >"$APP/handle.php" <<'EOF'
<?php
function handle(array $app, string $path): string
{
    $route = $app['routes']['/r' . (crc32($path) % 300) . '/a'] ?? null;
    return '<html><body><h1>Page ' . htmlspecialchars($path) . '</h1><p>'
        . ($route ? $route[0] . '::' . $route[1] : 'none') . ', ' . $app['services']
        . ' services</p></body></html>';
}
EOF
# php-fpm: every request boots.
cat >"$APP/index.php" <<'EOF'
<?php
$app = require __DIR__ . '/bootstrap.php';
require_once __DIR__ . '/handle.php';
header('Cache-Control: no-store');
echo handle($app, parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) ?: '/');
EOF
# levee's app pool: boots once per process.
cat >"$APP/warm.php" <<'EOF'
<?php
$app = require __DIR__ . '/bootstrap.php';
require_once __DIR__ . '/handle.php';
return function (array $r) use ($app): array {
    return [200, ['Content-Type' => 'text/html; charset=utf-8', 'Cache-Control' => 'no-store'],
        handle($app, $r['path'])];
};
EOF
    ROOT="$APP"
    FRONT="$APP/warm.php"
    URLS="/page"
    CHECK="services</p>"
    DESCRIBE="300 generated class files and a container built at boot (BOOT_WORK=$BOOT_WORK md5s), about $(php -r '$t = microtime(true); require "'"$APP"'/bootstrap.php"; printf("%.0f", (microtime(true) - $t) * 1000);') ms per boot in php-cli"
fi

# ---- php-fpm ---------------------------------------------------------------------------

php_fpm_conf bench "$PHP_WORKERS"
start_php_fpm

declare -A PORT PID
PORT[php-fpm]=$(free_port)
start_bg levee-fpm "$LEVEE" serve --listen "127.0.0.1:${PORT[php-fpm]}" \
    --backend "fastcgi+unix:$SOCK" --root "$ROOT"
PID[php-fpm]=$BG_PID
wait_port "${PORT[php-fpm]}" "${PID[php-fpm]}"

PORT[warm]=$(free_port)
start_bg levee-warm "$LEVEE" serve --listen "127.0.0.1:${PORT[warm]}" \
    --app "php $REPO_DIR/runtime/levee-worker.php {port} $FRONT" --app-processes "$PHP_WORKERS"
PID[warm]=$BG_PID
wait_port "${PORT[warm]}" "${PID[warm]}"

first=${URLS%% *}
for s in php-fpm warm; do
    # The first request also fills Symfony's cache directory (var/cache).
    body=$(curl -s --max-time 30 "http://127.0.0.1:${PORT[$s]}$first")
    case $body in *"$CHECK"*) ;; *) die "$s: $first answered '$body'" ;; esac
done
log "both setups answer the same page"

bench() { # URL CONNS -> "rps p99 errors"
    "$LEVEE" bench "$1" -c "$2" -d "${DURATION}s" -q --csv - | python3 -c '
import csv, sys
row = next(csv.DictReader(sys.stdin))
print(round(float(row["rps"])), "%.1f" % float(row["p99_ms"]), row["errors"])'
}

report "# Warm workers: php-fpm vs levee's app pool, uncached, APP=$APP_KIND ($(date '+%Y-%m-%d %H:%M'))" ""
machine_info
report "- app: $DESCRIBE" \
    "- php-fpm: pm = static, $PHP_WORKERS workers, opcache on, through \`levee serve --backend fastcgi+unix:SOCK --root $([ "$APP_KIND" = synthetic ] && echo APP || echo APP/public)\` (every request boots the app)" \
    "- warm: \`levee serve --app \"php runtime/levee-worker.php {port} $([ "$APP_KIND" = synthetic ] && echo warm.php || echo public/index.php)\" --app-processes $PHP_WORKERS\` (php-cgi, boots once per process)" \
    "- load: \`levee bench URL -c C -d ${DURATION}s\`, $ROUNDS runs per setup alternating, medians; responses are uncacheable" \
    "" \
    "| URL | clients | php-fpm req/s | warm req/s | warm/php-fpm | php-fpm p99 ms | warm p99 ms | errors php-fpm/warm | runs php-fpm / warm |" \
    "|---|---:|---:|---:|---:|---:|---:|---:|---|"
for url in $URLS; do
for c in 16 64; do
    declare -A runs=() p99s=() errs=()
    for ((r = 0; r < ROUNDS; r++)); do
        for s in $([ $((r % 2)) = 0 ] && echo php-fpm warm || echo warm php-fpm); do
            read -r rps p99 err <<<"$(bench "http://127.0.0.1:${PORT[$s]}$url" "$c")"
            runs[$s]+="$rps "
            p99s[$s]+="$p99 "
            errs[$s]=$((${errs[$s]:-0} + err))
            log "  $url -c $c round $((r + 1))/$ROUNDS $s: $rps req/s, p99 $p99 ms, errors $err"
        done
    done
    # shellcheck disable=SC2086
    f=$(median ${runs[php-fpm]})
    # shellcheck disable=SC2086
    w=$(median ${runs[warm]})
    # shellcheck disable=SC2086
    report "| \`$url\` | $c | $f | $w | $(awk -v a="$w" -v b="$f" 'BEGIN {printf "%.1fx", a / b}') | $(median ${p99s[php-fpm]}) | $(median ${p99s[warm]}) | ${errs[php-fpm]}/${errs[warm]} | ${runs[php-fpm]% } / ${runs[warm]% } |"
done
done
record_report
