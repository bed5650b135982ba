<?php
/**
 * levee's PHP worker: keeps a PHP application warm in a php-cli process that levee's app
 * pool starts, balances and recycles (`levee serve --app "php levee-worker.php {port} app.php"`).
 * Nothing but PHP is needed: no ReactPHP, no RoadRunner, no extension.
 *
 * app.php runs once, when the process starts (boot the framework, open connections), and
 * returns the handler levee's requests are given to:
 *
 *     return function (array $request): array {
 *         // $request: method, uri, path, query, headers (lowercase names), body;
 *         // $_SERVER, $_GET, $_POST, $_COOKIE are set for it too, and reset after it.
 *         return [200, ['Content-Type' => 'text/html; charset=utf-8'], '<p>hello</p>'];
 *     };
 *
 * A Symfony front controller plugs in as:
 *
 *     $kernel = new App\Kernel('prod', false);          // booted once
 *     return function (array $r) use ($kernel) {
 *         $req = Symfony\Component\HttpFoundation\Request::createFromGlobals();
 *         $resp = $kernel->handle($req);
 *         $kernel->terminate($req, $resp);               // and reset services
 *         return [$resp->getStatusCode(), $resp->headers->allPreserveCaseWithoutCookies()
 *             + ['Set-Cookie' => array_map('strval', $resp->headers->getCookies())],
 *             $resp->getContent()];
 *     };
 *
 * Laravel the same way with `$app->make(Illuminate\Contracts\Http\Kernel::class)`,
 * `handle(Request::capture())` and `terminate()`. One request at a time per process
 * (`[app] concurrency = 1`); a handler that throws answers 500 and the process lives on;
 * memory that grows is what `[app] max_memory` is for.
 */

declare(strict_types=1);

if ($argc < 3) {
    fwrite(STDERR, "usage: php levee-worker.php PORT app.php\n");
    exit(2);
}
$port = (int) $argv[1];
$handler = require $argv[2];
if (!is_callable($handler)) {
    fwrite(STDERR, "{$argv[2]} must return a callable (see levee-worker.php)\n");
    exit(2);
}
$server = @stream_socket_server("tcp://127.0.0.1:$port", $errno, $errstr);
if ($server === false) {
    fwrite(STDERR, "cannot listen on 127.0.0.1:$port: $errstr\n");
    exit(1);
}
$pristine = ['_SERVER' => $_SERVER];

/** Reads one request head and body from $conn; null at end of stream. */
function levee_read_request($conn): ?array
{
    $line = fgets($conn);
    if ($line === false || trim($line) === '') {
        return null;
    }
    $parts = explode(' ', trim($line), 3);
    if (count($parts) !== 3) {
        return ['bad' => true];
    }
    [$method, $uri, $protocol] = $parts;
    $headers = [];
    while (($h = fgets($conn)) !== false) {
        $h = rtrim($h, "\r\n");
        if ($h === '') {
            break;
        }
        $colon = strpos($h, ':');
        if ($colon === false) {
            return ['bad' => true];
        }
        $name = strtolower(trim(substr($h, 0, $colon)));
        $value = trim(substr($h, $colon + 1));
        $headers[$name] = isset($headers[$name]) ? $headers[$name] . ', ' . $value : $value;
    }
    $body = '';
    if (isset($headers['transfer-encoding'])) {
        // levee sends bodies of unknown length chunked.
        while (($size = fgets($conn)) !== false) {
            $n = hexdec(trim(explode(';', $size)[0]));
            if ($n === 0) {
                fgets($conn);
                break;
            }
            $body .= stream_get_contents($conn, (int) $n);
            fgets($conn);
        }
    } elseif (isset($headers['content-length'])) {
        $n = (int) $headers['content-length'];
        $body = $n > 0 ? (string) stream_get_contents($conn, $n) : '';
    }
    $path = parse_url($uri, PHP_URL_PATH) ?: '/';
    $query = (string) (parse_url($uri, PHP_URL_QUERY) ?? '');
    return compact('method', 'uri', 'protocol', 'headers', 'body', 'path', 'query');
}

/** The request as PHP applications expect to find it. */
function levee_globals(array $r, array $pristine, int $port): void
{
    $server = $pristine['_SERVER'];
    $server['REQUEST_METHOD'] = $r['method'];
    $server['REQUEST_URI'] = $r['uri'];
    $server['QUERY_STRING'] = $r['query'];
    $server['SERVER_PROTOCOL'] = $r['protocol'];
    $server['SERVER_PORT'] = $port;
    $server['REQUEST_TIME_FLOAT'] = microtime(true);
    $server['REQUEST_TIME'] = time();
    foreach ($r['headers'] as $name => $value) {
        $key = strtoupper(str_replace('-', '_', $name));
        $server[in_array($key, ['CONTENT_TYPE', 'CONTENT_LENGTH'], true) ? $key : 'HTTP_' . $key] = $value;
    }
    $_SERVER = $server;
    $_GET = [];
    parse_str($r['query'], $_GET);
    $_POST = [];
    if (str_starts_with($r['headers']['content-type'] ?? '', 'application/x-www-form-urlencoded')) {
        parse_str($r['body'], $_POST);
    }
    $_COOKIE = [];
    foreach (explode(';', $r['headers']['cookie'] ?? '') as $pair) {
        $kv = explode('=', trim($pair), 2);
        if (count($kv) === 2) {
            $_COOKIE[urldecode($kv[0])] = urldecode($kv[1]);
        }
    }
    $_REQUEST = $_GET + $_POST;
    $_FILES = [];
}

/** Handles one request on $conn; false when the connection is to be closed. */
function levee_serve_one($conn, callable $handler, array $pristine, int $port): bool
{
    $r = levee_read_request($conn);
    if ($r === null) {
        return false;
    }
    if (isset($r['bad'])) {
        fwrite($conn, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return false;
    }
    levee_globals($r, $pristine, $port);
    try {
        ob_start();
        $result = $handler($r);
        $echoed = (string) ob_get_clean();
        [$status, $headers, $body] = is_array($result) ? $result : [200, [], (string) $result];
        $body = $echoed . $body;
    } catch (Throwable $e) {
        while (ob_get_level() > 0) {
            ob_end_clean();
        }
        fwrite(STDERR, get_class($e) . ': ' . $e->getMessage() . ' at ' . $e->getFile() . ':' . $e->getLine() . "\n");
        [$status, $headers, $body] = [500, ['Content-Type' => 'text/plain'], "500 Internal Server Error\n"];
    }
    $out = "HTTP/1.1 " . (int) $status . "\r\n";
    foreach ($headers as $name => $values) {
        foreach ((array) $values as $v) {
            if (strcasecmp((string) $name, 'content-length') !== 0) {
                $out .= "$name: $v\r\n";
            }
        }
    }
    // One write: headers and body apart would meet Nagle and delayed ACKs.
    $out .= 'Content-Length: ' . strlen($body) . "\r\n\r\n" . ($r['method'] === 'HEAD' ? '' : $body);
    fwrite($conn, $out);
    $_GET = $_POST = $_COOKIE = $_REQUEST = $_FILES = [];
    $_SERVER = $pristine['_SERVER'];
    return strcasecmp($r['headers']['connection'] ?? '', 'close') !== 0;
}

// One request at a time, but any number of kept-alive connections: levee's serving
// threads each keep their own, and a process that waited on one idle connection while
// the next request came on another would never answer it.
$clients = [];
while (true) {
    $read = array_merge([$server], array_values($clients));
    $write = $except = null;
    if (@stream_select($read, $write, $except, null) === false) {
        continue;
    }
    foreach ($read as $s) {
        if ($s === $server) {
            $c = @stream_socket_accept($server, 0);
            if ($c !== false) {
                $clients[(int) $c] = $c;
            }
            continue;
        }
        if (!levee_serve_one($s, $handler, $pristine, $port)) {
            fclose($s);
            unset($clients[(int) $s]);
        }
    }
}
