<?php
/**
 * levee's PHP worker: keeps a PHP application warm in a process that levee's app pool
 * starts, balances and recycles:
 *
 *     levee serve --app "php runtime/levee-worker.php {port} public/index.php" --app-processes 4
 *
 * It runs under php-cgi (Debian: php8.2-cgi) and re-executes itself there when started
 * with php-cli: php-cli drops header(), setcookie() and the session's cookie without a
 * word, php-cgi keeps them where headers_list() can read them. Nothing else is needed:
 * no ReactPHP, no RoadRunner, no extension.
 *
 * The application file runs once, when the process starts (boot the framework, open
 * connections), with the constant LEVEE_WORKER defined, and returns what handles the
 * requests. One front controller can serve both php-fpm and levee:
 *
 *     $kernel = new App\Kernel('prod', false);
 *     if (defined('LEVEE_WORKER')) {
 *         return $kernel;                                  // booted once, kept warm
 *     }
 *     $request = Request::createFromGlobals();             // php-fpm, as before
 *     ...
 *
 * What it may return:
 * - a Symfony HttpKernelInterface (a Kernel is booted at start): each request is
 *   handle()d, send()s itself, and is terminate()d; Symfony's Kernel resets its
 *   services (services_resetter) before the next one;
 * - a Laravel Illuminate\Contracts\Http\Kernel: the same, and after each request the
 *   state Laravel Octane flushes too: the session's data, the auth guards, queued
 *   cookies, the resolved request;
 * - a PSR-15 Psr\Http\Server\RequestHandlerInterface: given a PSR-7 ServerRequest made
 *   with nyholm/psr7 (Debian: php-nyholm-psr7);
 * - a callable: called with an array (method, uri, path, query, headers with lowercase
 *   names, body); it may echo and call header() as a plain PHP script does, and may
 *   return [status, headers, body] or a string.
 *
 * Each request runs as php-fpm would run the front controller: $_SERVER as php-fpm fills
 * it (REMOTE_ADDR and REMOTE_PORT of the client, SERVER_NAME, SERVER_PORT and HTTPS as
 * the client reached levee, SCRIPT_NAME, SCRIPT_FILENAME, PHP_SELF and DOCUMENT_ROOT of
 * the application file, every HTTP_*), $_GET, $_POST, $_COOKIE, $_FILES (multipart
 * uploads in temporary files, upload_max_filesize, post_max_size and max_file_uploads
 * honoured, removed after the request), the body in php://input (a framework gets it in its Request); header(),
 * setcookie(), http_response_code(), headers_sent() and PHP's own sessions (the id from
 * the request's cookie, Set-Cookie when it is new, written and closed after the request)
 * work as under php-fpm. Output is sent as it is flushed past 64 KiB or by ob_flush(),
 * so streamed and file responses are streamed. exit() and die() send what was output
 * with the status set so far, as php-fpm does; the process then ends and levee starts
 * another. Everything above is reset between requests.
 *
 * What stays the application's concern: its own static and global state (a static
 * cache, a singleton holding the last user) lives as long as the process; memory that
 * grows is what `[app] max_requests` and `max_memory` are for. move_uploaded_file()
 * and is_uploaded_file() know nothing of uploads made here: use rename(), or the
 * framework's UploadedFile, which this runtime hands over ready to move.
 * One request at a time per process (`[app] concurrency = 1`).
 */

declare(strict_types=1);

const LEVEE_CHUNK = 65536;
const LEVEE_REASONS = [
    100 => 'Continue', 101 => 'Switching Protocols', 200 => 'OK', 201 => 'Created', 202 => 'Accepted',
    203 => 'Non-Authoritative Information', 204 => 'No Content', 206 => 'Partial Content',
    301 => 'Moved Permanently', 302 => 'Found', 303 => 'See Other', 304 => 'Not Modified',
    307 => 'Temporary Redirect', 308 => 'Permanent Redirect', 400 => 'Bad Request', 401 => 'Unauthorized',
    403 => 'Forbidden', 404 => 'Not Found', 405 => 'Method Not Allowed', 409 => 'Conflict', 410 => 'Gone',
    413 => 'Content Too Large', 415 => 'Unsupported Media Type', 419 => 'Page Expired',
    422 => 'Unprocessable Content', 429 => 'Too Many Requests', 500 => 'Internal Server Error',
    501 => 'Not Implemented', 502 => 'Bad Gateway', 503 => 'Service Unavailable', 504 => 'Gateway Timeout',
];

$levee_log = fopen('php://stderr', 'w');

/** A line in levee's log (the process's stderr goes there). */
function levee_log(string $message): void
{
    global $levee_log;
    fwrite($levee_log, "levee-worker: $message\n");
}

// php-cli cannot see what header() and setcookie() set: run again under php-cgi, same
// process (levee's supervision and parent-death signal carry over), same arguments.
if (PHP_SAPI === 'cli') {
    $args = $_SERVER['argv'] ?? [];
    $cgi = null;
    foreach ([PHP_BINDIR . '/php-cgi' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION, PHP_BINDIR . '/php-cgi'] as $candidate) {
        if (is_executable($candidate)) {
            $cgi = $candidate;
            break;
        }
    }
    if ($cgi === null) {
        levee_log('needs php-cgi (Debian: apt install php' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION
            . '-cgi): php-cli drops header(), setcookie() and session cookies');
        exit(2);
    }
    if (!function_exists('pcntl_exec')) {
        levee_log("cannot re-execute under php-cgi (no pcntl here): start it as `$cgi -d register_argc_argv=1 "
            . implode(' ', $args) . '`');
        exit(2);
    }
    // -C: php-cgi would otherwise change to this file's directory, and relative paths
    // given to levee would no longer be found.
    pcntl_exec($cgi, array_merge(['-C', '-d', 'register_argc_argv=1', '-d', 'max_execution_time=0'], $args));
    levee_log("could not run $cgi");
    exit(2);
}
if (PHP_SAPI !== 'cgi-fcgi') {
    levee_log('runs under php-cgi or php-cli, not ' . PHP_SAPI);
    exit(2);
}

$levee_argv = $_SERVER['argv'] ?? [];
if (count($levee_argv) < 3) {
    levee_log('usage: php levee-worker.php PORT APP_FILE (php-cgi needs -d register_argc_argv=1)');
    exit(2);
}
set_time_limit(0);
$levee_port = (int) $levee_argv[1];
$levee_app_file = realpath($levee_argv[2]);
if ($levee_app_file === false) {
    levee_log("no application file {$levee_argv[2]}");
    exit(2);
}

/**
 * php://input from the request levee sent. PHP offers no way to give php://input a body
 * from userland, so this wrapper takes over the php:// scheme: php://input is served from
 * memory, every other php:// stream is opened by PHP's own wrapper and passed through.
 */
final class LeveePhpStream
{
    /** The current request's body. */
    public static string $input = '';
    /** @var resource */
    public $context;
    /** @var resource|null */
    private $inner = null;
    private int $pos = 0;
    private bool $isInput = false;

    public static function install(): void
    {
        stream_wrapper_unregister('php');
        stream_wrapper_register('php', self::class);
    }

    public function stream_open(string $path, string $mode, int $options, ?string &$opened): bool
    {
        if (strcasecmp($path, 'php://input') === 0) {
            $this->isInput = true;
            return true;
        }
        stream_wrapper_restore('php');
        try {
            $inner = $this->context ? @fopen($path, $mode, false, $this->context) : @fopen($path, $mode);
        } finally {
            self::install();
        }
        if ($inner === false) {
            return false;
        }
        $this->inner = $inner;
        return true;
    }

    public function stream_read(int $count): string|false
    {
        if ($this->isInput) {
            $chunk = (string) substr(self::$input, $this->pos, $count);
            $this->pos += strlen($chunk);
            return $chunk;
        }
        return fread($this->inner, $count);
    }

    public function stream_write(string $data): int
    {
        return $this->isInput ? 0 : (int) fwrite($this->inner, $data);
    }

    public function stream_eof(): bool
    {
        return $this->isInput ? $this->pos >= strlen(self::$input) : feof($this->inner);
    }

    public function stream_tell(): int
    {
        return $this->isInput ? $this->pos : (int) ftell($this->inner);
    }

    public function stream_seek(int $offset, int $whence): bool
    {
        if (!$this->isInput) {
            return fseek($this->inner, $offset, $whence) === 0;
        }
        $to = match ($whence) {
            SEEK_SET => $offset,
            SEEK_CUR => $this->pos + $offset,
            SEEK_END => strlen(self::$input) + $offset,
            default => -1,
        };
        if ($to < 0) {
            return false;
        }
        $this->pos = $to;
        return true;
    }

    public function stream_flush(): bool
    {
        return $this->isInput || fflush($this->inner);
    }

    public function stream_close(): void
    {
        if ($this->inner) {
            fclose($this->inner);
        }
    }

    public function stream_stat(): array|false
    {
        return $this->isInput ? ['size' => strlen(self::$input)] : fstat($this->inner);
    }

    public function stream_truncate(int $size): bool
    {
        return !$this->isInput && ftruncate($this->inner, $size);
    }

    public function stream_set_option(int $option, int $arg1, ?int $arg2): bool
    {
        if ($this->isInput) {
            return false;
        }
        return match ($option) {
            STREAM_OPTION_BLOCKING => stream_set_blocking($this->inner, (bool) $arg1),
            STREAM_OPTION_READ_TIMEOUT => stream_set_timeout($this->inner, $arg1, (int) $arg2),
            STREAM_OPTION_WRITE_BUFFER => stream_set_write_buffer($this->inner, (int) $arg2) === 0,
            default => false,
        };
    }

    /** @return resource|false */
    public function stream_cast(int $as)
    {
        return $this->isInput ? false : $this->inner;
    }

    public function stream_lock(int $operation): bool
    {
        return !$this->isInput && flock($this->inner, $operation);
    }
}

/** Parses a php.ini size (8M, 2G, 512K). */
function levee_ini_bytes(string $value): int
{
    $value = trim($value);
    if ($value === '') {
        return 0;
    }
    $n = (int) $value;
    return match (strtolower(substr($value, -1))) {
        'g' => $n << 30,
        'm' => $n << 20,
        'k' => $n << 10,
        default => $n,
    };
}

/** A form field name as parse_str reads it: brackets kept, everything else encoded. */
function levee_field_name(string $name): string
{
    return str_replace(['%5B', '%5D'], ['[', ']'], rawurlencode($name));
}

/** The state one request changes, and what to undo after it. */
final class LeveeRequest
{
    /** @var resource the connection to levee */
    public $conn;
    public string $method = 'GET';
    public bool $committed = false;
    public bool $chunked = false;
    public bool $done = false;
    public bool $keepAlive = true;
    public int $bodyBytes = 0;
    /** @var string[] temporary files of uploads */
    public array $uploads = [];
    /** No body goes out (HEAD, 204, 304). */
    public bool $bodyless = false;
    /** The head, written with the first part of the body. */
    public string $pending = '';
    /** The request has ended: the next flush is the last. */
    public bool $ending = false;
    /** The status and headers sent, to see any set too late. */
    public array $sentHead = [];
}

/** The request being served; null between requests. */
$levee_current = null;

/** Reads one request head and body from $conn; null at end of stream. */
function levee_read_request($conn): ?array
{
    $line = fgets($conn, 65536);
    if ($line === false || trim($line) === '') {
        return null;
    }
    $parts = explode(' ', trim($line), 3);
    if (count($parts) !== 3) {
        return ['bad' => true];
    }
    [$method, $uri, $protocol] = $parts;
    $headers = [];
    while (($h = fgets($conn, 65536)) !== false) {
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
        if (isset($headers[$name])) {
            $headers[$name] .= ($name === 'cookie' ? '; ' : ', ') . $value;
        } else {
            $headers[$name] = $value;
        }
    }
    $body = '';
    $tooLarge = false;
    $max = levee_ini_bytes((string) ini_get('post_max_size'));
    if (isset($headers['transfer-encoding'])) {
        // levee sends bodies of unknown length chunked.
        while (($size = fgets($conn)) !== false) {
            $n = (int) hexdec(trim(explode(';', $size)[0]));
            if ($n === 0) {
                fgets($conn);
                break;
            }
            $chunk = (string) stream_get_contents($conn, $n);
            if ($max === 0 || strlen($body) + $n <= $max) {
                $body .= $chunk;
            } else {
                // Read and dropped, as PHP drops a body over post_max_size.
                $tooLarge = true;
            }
            fgets($conn);
        }
    } elseif (isset($headers['content-length'])) {
        $n = max(0, (int) $headers['content-length']);
        if ($max > 0 && $n > $max) {
            // Read and dropped piece by piece: never held whole in memory.
            $tooLarge = true;
            while ($n > 0 && !feof($conn)) {
                $n -= strlen((string) fread($conn, min($n, 1 << 16)));
            }
        } else {
            $body = $n > 0 ? (string) stream_get_contents($conn, $n) : '';
        }
    }
    $tooLarge = $tooLarge || ($max > 0 && strlen($body) > $max);
    $path = parse_url('http://x' . $uri, PHP_URL_PATH) ?: '/';
    $query = (string) (parse_url('http://x' . $uri, PHP_URL_QUERY) ?? '');
    return compact('method', 'uri', 'protocol', 'headers', 'body', 'path', 'query', 'tooLarge');
}

/** `host:port` or `[v6]:port` into its two parts. */
function levee_split_addr(string $addr): array
{
    $colon = strrpos($addr, ':');
    if ($colon === false) {
        return [$addr, ''];
    }
    return [trim(substr($addr, 0, $colon), '[]'), substr($addr, $colon + 1)];
}

/** $_SERVER as php-fpm behind levee's FastCGI fills it. */
function levee_server(array $r, array $pristine, string $appFile, int $port): array
{
    $h = $r['headers'];
    [$remoteIp, $remotePort] = levee_split_addr($h['x-levee-remote'] ?? '127.0.0.1:0');
    [$localIp, $localPort] = levee_split_addr($h['x-levee-local'] ?? "127.0.0.1:$port");
    $https = ($h['x-levee-scheme'] ?? 'http') === 'https';
    $host = $h['host'] ?? '';
    $serverName = str_starts_with($host, '[')
        ? substr($host, 0, (int) strpos($host, ']') + 1)
        : explode(':', $host, 2)[0];
    $now = microtime(true);
    $script = '/' . basename($appFile);
    $s = $pristine;
    $s['GATEWAY_INTERFACE'] = 'CGI/1.1';
    $s['SERVER_SOFTWARE'] = 'levee';
    $s['SERVER_PROTOCOL'] = $r['protocol'];
    $s['REQUEST_METHOD'] = $r['method'];
    $s['REQUEST_SCHEME'] = $https ? 'https' : 'http';
    if ($https) {
        $s['HTTPS'] = 'on';
    }
    $s['REQUEST_URI'] = $r['uri'];
    $s['QUERY_STRING'] = $r['query'];
    $s['DOCUMENT_ROOT'] = dirname($appFile);
    $s['DOCUMENT_URI'] = $script;
    $s['SCRIPT_NAME'] = $script;
    $s['SCRIPT_FILENAME'] = $appFile;
    $s['PATH_INFO'] = '';
    $s['PHP_SELF'] = $script;
    $s['REMOTE_ADDR'] = $remoteIp;
    $s['REMOTE_PORT'] = $remotePort;
    $s['SERVER_ADDR'] = $localIp;
    $s['SERVER_PORT'] = $localPort;
    $s['SERVER_NAME'] = $serverName;
    $s['REDIRECT_STATUS'] = '200';
    foreach ($h as $name => $value) {
        if (str_starts_with($name, 'x-levee-') || str_contains($name, '_')) {
            continue;
        }
        if ($name === 'content-type' || $name === 'content-length') {
            $s[strtoupper(str_replace('-', '_', $name))] = $value;
            continue;
        }
        if ($name === 'connection' || $name === 'transfer-encoding') {
            continue;
        }
        $s['HTTP_' . strtoupper(str_replace('-', '_', $name))] = $value;
    }
    if (isset($h['transfer-encoding']) && !isset($s['CONTENT_LENGTH']) && $r['body'] !== '') {
        $s['CONTENT_LENGTH'] = (string) strlen($r['body']);
    }
    $s['REQUEST_TIME_FLOAT'] = $now;
    $s['REQUEST_TIME'] = (int) $now;
    return $s;
}

/** $_COOKIE as PHP parses the Cookie header: values URL-decoded, the first of a name wins. */
function levee_cookies(string $header): array
{
    $cookies = [];
    foreach (explode(';', $header) as $pair) {
        $kv = explode('=', ltrim($pair), 2);
        if (count($kv) !== 2 || trim($kv[0]) === '') {
            continue;
        }
        $one = [];
        parse_str(levee_field_name(rtrim($kv[0])) . '=' . rawurlencode(urldecode($kv[1])), $one);
        $cookies += $one;
    }
    return $cookies;
}

/**
 * multipart/form-data into $_POST and $_FILES, as PHP's rfc1867 handler does: files in
 * temporary files (removed after the request), the ini limits honoured.
 */
function levee_multipart(string $body, string $contentType, LeveeRequest $req): array
{
    if (!preg_match('/boundary=(?:"([^"]+)"|([^;\s]+))/i', $contentType, $m)) {
        return [[], []];
    }
    $boundary = '--' . ($m[1] !== '' ? $m[1] : $m[2]);
    $maxFile = levee_ini_bytes((string) ini_get('upload_max_filesize'));
    $maxFiles = (int) ini_get('max_file_uploads');
    $uploads = (bool) ini_get('file_uploads');
    $tmpDir = ini_get('upload_tmp_dir') ?: sys_get_temp_dir();
    $query = [];
    $files = [];
    $formMax = 0;
    $fileCount = 0;
    $pos = strpos($body, $boundary);
    while ($pos !== false) {
        $pos += strlen($boundary);
        if (substr($body, $pos, 2) === '--') {
            break;
        }
        $pos += 2; // CRLF
        $headEnd = strpos($body, "\r\n\r\n", $pos);
        if ($headEnd === false) {
            break;
        }
        $head = substr($body, $pos, $headEnd - $pos);
        $next = strpos($body, "\r\n" . $boundary, $headEnd + 4);
        if ($next === false) {
            break;
        }
        $data = substr($body, $headEnd + 4, $next - $headEnd - 4);
        $pos = $next + 2;
        if (!preg_match('/^content-disposition:\s*form-data(.*)$/mi', $head, $d)) {
            continue;
        }
        preg_match('/[;\s]name="([^"]*)"/i', $d[1], $nm);
        $name = $nm[1] ?? '';
        if ($name === '') {
            continue;
        }
        $hasFile = preg_match('/filename="([^"]*)"/i', $d[1], $fn) === 1;
        if (!$hasFile) {
            if ($name === 'MAX_FILE_SIZE') {
                $formMax = (int) $data;
            }
            $query[] = levee_field_name($name) . '=' . rawurlencode($data);
            continue;
        }
        if (!$uploads) {
            continue;
        }
        if (++$fileCount > $maxFiles) {
            levee_log("a request sent more than max_file_uploads ($maxFiles) files; the rest were dropped");
            continue;
        }
        $type = preg_match('/^content-type:\s*(.+)$/mi', $head, $t) ? trim($t[1]) : '';
        $fullPath = $fn[1];
        $entry = ['name' => basename(str_replace('\\', '/', $fullPath)), 'full_path' => $fullPath, 'type' => $type, 'tmp_name' => '', 'error' => UPLOAD_ERR_OK, 'size' => 0];
        if ($fullPath === '') {
            $entry['error'] = UPLOAD_ERR_NO_FILE;
        } elseif ($maxFile > 0 && strlen($data) > $maxFile) {
            $entry['error'] = UPLOAD_ERR_INI_SIZE;
            $entry['type'] = '';
        } elseif ($formMax > 0 && strlen($data) > $formMax) {
            $entry['error'] = UPLOAD_ERR_FORM_SIZE;
            $entry['type'] = '';
        } else {
            $tmp = tempnam($tmpDir, 'php');
            if ($tmp === false || file_put_contents($tmp, $data) === false) {
                $entry['error'] = UPLOAD_ERR_CANT_WRITE;
            } else {
                $req->uploads[] = $tmp;
                $entry['tmp_name'] = $tmp;
                $entry['size'] = strlen($data);
            }
        }
        levee_add_file($files, $name, $entry);
    }
    $post = [];
    parse_str(implode('&', $query), $post);
    return [$post, $files];
}

/** One file into $_FILES's shape: `a[b][]` goes to $files['a']['name']['b'][n] and so on. */
function levee_add_file(array &$files, string $name, array $entry): void
{
    $open = strpos($name, '[');
    if ($open === false || $open === 0) {
        $files[$name] = $entry;
        return;
    }
    $base = substr($name, 0, $open);
    preg_match_all('/\[([^\]]*)\]/', substr($name, $open), $m);
    $keys = $m[1];
    // The index an empty `[]` takes is decided once, on the 'name' tree, for all fields.
    $node = &$files[$base]['name'];
    $resolved = [];
    foreach ($keys as $i => $k) {
        if (!is_array($node)) {
            $node = [];
        }
        if ($k === '') {
            $k = $node === [] ? 0 : max(array_filter(array_keys($node), 'is_int') ?: [-1]) + 1;
        }
        $resolved[] = $k;
        if ($i < count($keys) - 1) {
            if (!isset($node[$k]) || !is_array($node[$k])) {
                $node[$k] = [];
            }
            $node = &$node[$k];
        }
    }
    unset($node);
    foreach ($entry as $field => $value) {
        $ref = &$files[$base][$field];
        foreach ($resolved as $k) {
            if (!is_array($ref)) {
                $ref = [];
            }
            $ref = &$ref[$k];
        }
        $ref = $value;
        unset($ref);
    }
}

/** The superglobals and php://input for request $r, as php-fpm would set them. */
function levee_globals(array $r, LeveeRequest $req, array $pristine, string $appFile, int $port): void
{
    $_SERVER = levee_server($r, $pristine, $appFile, $port);
    $_GET = [];
    parse_str($r['query'], $_GET);
    $_COOKIE = levee_cookies($r['headers']['cookie'] ?? '');
    $_POST = [];
    $_FILES = [];
    LeveePhpStream::$input = $r['body'];
    $type = strtolower($r['headers']['content-type'] ?? '');
    if ($r['tooLarge']) {
        LeveePhpStream::$input = '';
        levee_log('a request body exceeds post_max_size (' . ini_get('post_max_size') . '): $_POST, $_FILES and php://input are empty');
    } elseif ($r['method'] === 'POST' && str_starts_with($type, 'application/x-www-form-urlencoded')) {
        parse_str($r['body'], $_POST);
    } elseif ($r['method'] === 'POST' && str_starts_with($type, 'multipart/form-data')) {
        [$_POST, $_FILES] = levee_multipart($r['body'], $r['headers']['content-type'], $req);
        LeveePhpStream::$input = ''; // as php-fpm: no php://input for multipart
    }
    $_REQUEST = array_replace($_GET, $_POST);
}

/** Writes all of $data to levee; false once the connection is gone. */
function levee_write($conn, string $data): bool
{
    while ($data !== '') {
        $n = @fwrite($conn, $data);
        if ($n === false || $n === 0) {
            return false;
        }
        $data = (string) substr($data, $n);
    }
    return true;
}

/** The status and header lines PHP holds now, as an HTTP/1.1 head (without the end). */
function levee_head(int $contentLength = -1, bool $close = false): array
{
    $status = http_response_code();
    $status = is_int($status) && $status > 0 ? $status : 200;
    $lines = [];
    $hasType = false;
    $length = null;
    foreach (headers_list() as $line) {
        $colon = strpos($line, ':');
        if ($colon === false) {
            continue;
        }
        $name = strtolower(trim(substr($line, 0, $colon)));
        if ($name === 'status') {
            $status = (int) trim(substr($line, $colon + 1)) ?: $status;
            continue;
        }
        if ($name === 'connection' || $name === 'transfer-encoding' || $name === 'keep-alive') {
            continue;
        }
        if ($name === 'content-length') {
            $length = (int) trim(substr($line, $colon + 1));
            continue;
        }
        $hasType = $hasType || $name === 'content-type';
        $lines[] = $line;
    }
    if (!$hasType && !in_array($status, [204, 304], true)) {
        $mime = ini_get('default_mimetype') ?: 'text/html';
        $charset = ini_get('default_charset');
        $lines[] = 'Content-Type: ' . $mime . ($charset && str_starts_with($mime, 'text/') ? "; charset=$charset" : '');
    }
    if ($close) {
        $lines[] = 'Connection: close';
    }
    return [$status, $lines, $length];
}

/** Sends the head now: the body follows as it is flushed. */
function levee_commit(LeveeRequest $req, ?int $knownLength): void
{
    [$status, $lines, $length] = levee_head();
    $length ??= $knownLength;
    $out = "HTTP/1.1 $status " . (LEVEE_REASONS[$status] ?? '') . "\r\n" . implode("\r\n", $lines) . ($lines ? "\r\n" : '');
    $bodyless = $req->method === 'HEAD' || $status === 304 || $status === 204 || ($status >= 100 && $status < 200);
    if ($bodyless) {
        if ($length !== null && $status !== 204 && $status !== 304) {
            $out .= "Content-Length: $length\r\n";
        }
    } elseif ($length !== null) {
        $out .= "Content-Length: $length\r\n";
    } else {
        $req->chunked = true;
        $out .= "Transfer-Encoding: chunked\r\n";
    }
    if (!$req->keepAlive) {
        $out .= "Connection: close\r\n";
    }
    $req->committed = true;
    $req->sentHead = [http_response_code(), headers_list()];
    $req->bodyless = $bodyless;
    $req->pending = $out . "\r\n";
}

/**
 * The output handler under everything the application prints: it holds the output until
 * the request ends (one write with Content-Length), or streams it once it is flushed or
 * grows past LEVEE_CHUNK.
 */
function levee_output(string $buffer, int $phase): string
{
    global $levee_current;
    $req = $levee_current;
    if ($req === null || $req->done) {
        return '';
    }
    if ($phase & PHP_OUTPUT_HANDLER_CLEAN) {
        return '';
    }
    $final = $req->ending;
    if (!$req->committed) {
        if ($final) {
            levee_commit($req, strlen($buffer));
        } elseif ($buffer === '') {
            return '';
        } else {
            levee_commit($req, null);
        }
    }
    $out = $req->pending;
    $req->pending = '';
    if (!$req->bodyless && $buffer !== '') {
        $out .= $req->chunked ? dechex(strlen($buffer)) . "\r\n" . $buffer . "\r\n" : $buffer;
    }
    $req->bodyBytes += strlen($buffer);
    if ($final) {
        if ($req->chunked) {
            $out .= "0\r\n\r\n";
        }
        $req->done = true;
    }
    if ($out !== '' && !levee_write($req->conn, $out)) {
        $req->keepAlive = false;
    }
    return '';
}

/** Flushes what the application left in its own buffers and ends the response. */
function levee_finish(LeveeRequest $req, int $baseLevel): void
{
    while (ob_get_level() > $baseLevel) {
        if (!@ob_end_flush()) {
            break;
        }
    }
    if (!$req->done) {
        $req->ending = true;
        ob_flush();
    }
    // headers_sent() cannot turn true here without ending headers for the life of the
    // process: say so when the application set a header after its output had gone.
    if ($req->sentHead !== [] && $req->sentHead !== [http_response_code(), headers_list()]) {
        levee_log("header(), setcookie() or http_response_code() after the response's first 64 KiB or ob_flush() were ignored (php-fpm would have warned: headers already sent) for {$_SERVER['REQUEST_METHOD']} {$_SERVER['REQUEST_URI']}");
    }
}

/**
 * PHP's session as php-fpm leaves it after a request: written, closed and forgotten.
 *
 * An id PHP still holds (this request's user's) is cleared now: the next request, on
 * this process, must never get it. An empty one (Symfony's session listener sets one
 * when it resets; $force says the application may have) is only noted: it makes the
 * next session_start() ignore the request's session cookie, which matters only to a
 * request that brings one, and levee_clear_stale_session_id() clears it before such a
 * request. A cookieless request (most anonymous traffic) starts its session afresh
 * either way, and is spared the cost (a session started and destroyed: about 40 µs).
 */
function levee_reset_session(bool $force): void
{
    global $levee_session_stale;
    if (session_status() === PHP_SESSION_ACTIVE) {
        session_write_close();
    }
    // session_id() says '' both when PHP holds no id and when it holds an empty one.
    if (session_status() !== PHP_SESSION_DISABLED) {
        if (session_id() !== '') {
            levee_forget_session_id();
        } elseif ($force) {
            $levee_session_stale = true;
        }
    }
    unset($GLOBALS['_SESSION']);
}

/**
 * Before a request, once its globals are in place: clears an empty session id the last
 * request left (levee_reset_session) if this request could name its session: it brings
 * a cookie, or session ids may also come in the query or the form.
 */
function levee_clear_stale_session_id(): void
{
    global $levee_session_stale;
    if (!$levee_session_stale) {
        return;
    }
    if ($_COOKIE !== [] || !filter_var(ini_get('session.use_only_cookies'), FILTER_VALIDATE_BOOL)) {
        levee_forget_session_id();
        unset($GLOBALS['_SESSION']);
        $levee_session_stale = false;
    }
}

/**
 * Makes PHP forget the session id it holds, so that the next session_start() reads its
 * id from the request, as under php-fpm. Only session_destroy() clears it: destroy a
 * throwaway session (never the user's).
 */
function levee_forget_session_id(): void
{
    $cookie = $_COOKIE;
    $_COOKIE = [];
    // The options below set these for the rest of the request: put back at once, since
    // this may run before the request's own session_start().
    $ini = [
        'session.use_cookies' => ini_get('session.use_cookies'),
        'session.cache_limiter' => ini_get('session.cache_limiter'),
    ];
    set_error_handler(static fn (): bool => true);
    try {
        session_id('levee' . bin2hex(random_bytes(16)));
        // No cookie, no cache headers: nothing of it reaches a response.
        if (@session_start(['use_cookies' => 0, 'cache_limiter' => ''])) {
            @session_destroy();
        }
    } catch (Throwable) {
    } finally {
        foreach ($ini as $name => $value) {
            if ($value !== false) {
                @ini_set($name, $value);
            }
        }
        restore_error_handler();
        $_COOKIE = $cookie;
    }
    if (session_id() !== '') {
        levee_log('could not clear the PHP session id between requests; stopping this process so no session crosses users');
        exit(1);
    }
}

/** Whether the last request may have left PHP an empty session id (see levee_reset_session). */
$levee_session_stale = false;

/**
 * The php.ini settings a script can change (ini_set(): PHP_INI_USER or PHP_INI_ALL), as
 * the application left them at boot. The others cannot change while it runs.
 */
$levee_ini = [];

/**
 * Settings a request changed with ini_set() (a session save handler, error_reporting,
 * a time zone), set back: php-fpm reverts them at the end of every request. One
 * ini_get() per setting a script may change (about 150) costs a quarter of building
 * ini_get_all()'s array of all of them, every request.
 */
function levee_restore_ini(): void
{
    global $levee_ini;
    foreach ($levee_ini as $name => $value) {
        if (ini_get($name) !== $value) {
            @ini_set($name, $value);
        }
    }
}

/** What one request changed, undone: php-fpm starts every request afresh. */
function levee_reset(LeveeRequest $req, array $pristine, bool $forceSession): void
{
    levee_reset_session($forceSession);
    levee_restore_ini();
    header_remove();
    http_response_code(200);
    if (ini_get('expose_php')) {
        header('X-Powered-By: PHP/' . PHP_VERSION);
    }
    foreach ($req->uploads as $tmp) {
        @unlink($tmp);
    }
    $_GET = $_POST = $_COOKIE = $_REQUEST = $_FILES = [];
    $_SERVER = $pristine;
    LeveePhpStream::$input = '';
}

/** The request as a Symfony HttpFoundation Request, its body given. */
function levee_symfony_request(array $r, string $class, string $fileClass): object
{
    $files = [];
    foreach ($_FILES as $key => $f) {
        $files[$key] = levee_uploaded_files($f, $fileClass);
    }
    /** @var \Symfony\Component\HttpFoundation\Request $request */
    $request = new $class($_GET, $_POST, [], $_COOKIE, $files, $_SERVER, LeveePhpStream::$input);
    // As Request::createFromGlobals() does for form bodies of other methods.
    if (str_starts_with((string) $request->headers->get('CONTENT_TYPE'), 'application/x-www-form-urlencoded')
        && in_array(strtoupper($request->server->get('REQUEST_METHOD', 'GET')), ['PUT', 'DELETE', 'PATCH'], true)) {
        $data = [];
        parse_str($r['body'], $data);
        $request->request = new \Symfony\Component\HttpFoundation\InputBag($data);
    }
    return $request;
}

/**
 * $_FILES entries as Symfony UploadedFile objects that can be moved: PHP's
 * is_uploaded_file() knows nothing of files this runtime wrote, so they are marked as
 * tested uploads, which Symfony moves with rename().
 */
function levee_uploaded_files(array $f, string $class): mixed
{
    if (!isset($f['tmp_name'])) {
        return array_map(static fn ($one) => levee_uploaded_files($one, $class), $f);
    }
    if (is_array($f['tmp_name'])) {
        $out = [];
        foreach (array_keys($f['tmp_name']) as $k) {
            $out[$k] = levee_uploaded_files(array_combine(array_keys($f), array_map(static fn ($v) => $v[$k] ?? null, $f)), $class);
        }
        return $out;
    }
    if ($f['error'] === UPLOAD_ERR_NO_FILE) {
        return null;
    }
    return new $class($f['tmp_name'], (string) $f['name'], $f['type'] ?: null, $f['error'], true);
}

/** The request as a PSR-7 ServerRequest (nyholm/psr7). */
function levee_psr7_request(array $r): object
{
    if (!class_exists(\Nyholm\Psr7\ServerRequest::class)) {
        throw new RuntimeException('a PSR-15 handler needs nyholm/psr7 (Debian: php-nyholm-psr7) loaded by the application');
    }
    $headers = [];
    foreach ($r['headers'] as $name => $value) {
        if (!str_starts_with($name, 'x-levee-')) {
            $headers[$name] = $value;
        }
    }
    $scheme = ($_SERVER['HTTPS'] ?? '') === 'on' ? 'https' : 'http';
    $uri = $scheme . '://' . ($r['headers']['host'] ?? 'localhost') . $r['uri'];
    $request = new \Nyholm\Psr7\ServerRequest($r['method'], $uri, $headers, LeveePhpStream::$input, substr($r['protocol'], 5) ?: '1.1', $_SERVER);
    $request = $request->withCookieParams($_COOKIE)->withQueryParams($_GET)->withParsedBody($_POST ?: null);
    return $request->withUploadedFiles(levee_psr7_files($_FILES));
}

function levee_psr7_files(array $files): array
{
    $out = [];
    foreach ($files as $key => $f) {
        if (!isset($f['tmp_name'])) {
            $out[$key] = levee_psr7_files($f);
        } elseif (is_array($f['tmp_name'])) {
            $split = [];
            foreach (array_keys($f['tmp_name']) as $k) {
                $split[$k] = array_combine(array_keys($f), array_map(static fn ($v) => $v[$k] ?? null, $f));
            }
            $out[$key] = levee_psr7_files($split);
        } else {
            // From a stream: moveTo() then copies it, where from a path it would ask
            // move_uploaded_file(), which knows nothing of this runtime's uploads.
            $stream = $f['error'] === UPLOAD_ERR_OK ? \Nyholm\Psr7\Stream::create(fopen($f['tmp_name'], 'r')) : $f['tmp_name'];
            $out[$key] = new \Nyholm\Psr7\UploadedFile($stream, (int) $f['size'], (int) $f['error'], $f['name'], $f['type']);
        }
    }
    return $out;
}

/** Emits a PSR-7 response through header() and the output, as a PHP script would. */
function levee_emit_psr7(object $response): void
{
    http_response_code($response->getStatusCode());
    foreach ($response->getHeaders() as $name => $values) {
        foreach ($values as $i => $v) {
            header("$name: $v", $i === 0 && strcasecmp((string) $name, 'set-cookie') !== 0);
        }
    }
    $body = $response->getBody();
    if ($body->isSeekable()) {
        $body->rewind();
    }
    while (!$body->eof()) {
        $chunk = $body->read(LEVEE_CHUNK);
        if ($chunk === '') {
            break;
        }
        echo $chunk;
    }
}

/** Laravel's per-request state that outlives a request in a warm process (as Octane flushes it). */
function levee_laravel_flush(object $app): void
{
    if ($app->resolved('session')) {
        $driver = $app->make('session')->driver();
        $driver->flush();
        $driver->regenerate();
    }
    if ($app->resolved('auth.driver')) {
        $app->forgetInstance('auth.driver');
    }
    if ($app->resolved('auth')) {
        $app->make('auth')->forgetGuards();
    }
    if ($app->resolved('cookie')) {
        $app->make('cookie')->flushQueuedCookies();
    }
    $app->forgetInstance('request');
    \Illuminate\Support\Facades\Facade::clearResolvedInstance('request');
    \Illuminate\Support\Facades\Facade::clearResolvedInstance('session');
    \Illuminate\Support\Facades\Facade::clearResolvedInstance('auth');
}

/**
 * Runs the application for request $r; its output and headers go through PHP. True when
 * the application may have left PHP's session id set to '' (Symfony).
 */
function levee_dispatch(mixed $app, array $r): bool
{
    if (interface_exists(\Symfony\Component\HttpKernel\HttpKernelInterface::class, false)
        && $app instanceof \Symfony\Component\HttpKernel\HttpKernelInterface) {
        $request = levee_symfony_request($r, \Symfony\Component\HttpFoundation\Request::class, \Symfony\Component\HttpFoundation\File\UploadedFile::class);
        try {
            $response = $app->handle($request);
            $response->send();
            if ($app instanceof \Symfony\Component\HttpKernel\TerminableInterface) {
                $app->terminate($request, $response);
            }
        } finally {
            // A Kernel resets its services (services_resetter) when next booted; do it
            // now, after this request, rather than at the start of the next, where its
            // session listener's reset would make PHP forget the next request's cookie.
            if ($app instanceof \Symfony\Component\HttpKernel\KernelInterface) {
                // A session the application left open is PHP's to write, as at the end
                // of a php-fpm request (the listener's reset would abort it).
                if (session_status() === PHP_SESSION_ACTIVE) {
                    session_write_close();
                }
                $app->boot();
            }
        }
        return true;
    }
    if (interface_exists(\Illuminate\Contracts\Http\Kernel::class, false)
        && $app instanceof \Illuminate\Contracts\Http\Kernel) {
        // Laravel's own UploadedFile, or it would wrap each file again as an untested one.
        $base = levee_symfony_request($r, \Symfony\Component\HttpFoundation\Request::class, \Illuminate\Http\UploadedFile::class);
        $request = \Illuminate\Http\Request::createFromBase($base);
        $laravel = $app->getApplication();
        try {
            $response = $app->handle($request);
            $response->send();
            $app->terminate($request, $response);
        } finally {
            levee_laravel_flush($laravel);
        }
        return false;
    }
    if (interface_exists(\Psr\Http\Server\RequestHandlerInterface::class, false)
        && $app instanceof \Psr\Http\Server\RequestHandlerInterface) {
        levee_emit_psr7($app->handle(levee_psr7_request($r)));
        return false;
    }
    $result = $app($r);
    if (is_array($result)) {
        [$status, $headers, $body] = $result + [200, [], ''];
        http_response_code((int) $status);
        foreach ($headers as $name => $values) {
            foreach ((array) $values as $i => $v) {
                header("$name: $v", $i === 0 && strcasecmp((string) $name, 'set-cookie') !== 0);
            }
        }
        echo $body;
    } elseif (is_string($result)) {
        echo $result;
    }
    return false;
}

/** Handles one request on $conn; false when the connection is to be closed. */
function levee_serve_one($conn, mixed $app, array $pristine, string $appFile, int $port, int $baseLevel): bool
{
    global $levee_current;
    $r = levee_read_request($conn);
    if ($r === null) {
        return false;
    }
    if (isset($r['bad'])) {
        levee_write($conn, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return false;
    }
    $req = new LeveeRequest();
    $req->conn = $conn;
    $req->method = $r['method'];
    $req->keepAlive = strcasecmp($r['headers']['connection'] ?? '', 'close') !== 0;
    $levee_current = $req;
    levee_globals($r, $req, $pristine, $appFile, $port);
    levee_clear_stale_session_id();
    $forceSession = is_object($app) && $app instanceof \Symfony\Component\HttpKernel\HttpKernelInterface;
    try {
        levee_dispatch($app, $r);
    } catch (Throwable $e) {
        levee_log('uncaught ' . get_class($e) . ': ' . $e->getMessage() . ' at ' . $e->getFile() . ':' . $e->getLine());
        if (!$req->committed) {
            while (ob_get_level() > $baseLevel && @ob_end_clean()) {
            }
            ob_clean();
            header_remove();
            http_response_code(500);
        }
    }
    // The session is written before the answer leaves, so that the user's next request,
    // on whichever process, finds it.
    if (session_status() === PHP_SESSION_ACTIVE) {
        session_write_close();
    }
    levee_finish($req, $baseLevel);
    $levee_current = null;
    levee_reset($req, $pristine, $forceSession);
    return $req->keepAlive;
}

// ---- start ----------------------------------------------------------------------------

$levee_server = @stream_socket_server("tcp://127.0.0.1:$levee_port", $errno, $errstr);
if ($levee_server === false) {
    levee_log("cannot listen on 127.0.0.1:$levee_port: $errstr");
    exit(1);
}
$levee_pristine = $_SERVER;
foreach (['argv', 'argc', 'PHP_SELF', 'SCRIPT_NAME', 'SCRIPT_FILENAME', 'PATH_TRANSLATED', 'DOCUMENT_ROOT', 'REQUEST_TIME', 'REQUEST_TIME_FLOAT'] as $k) {
    unset($levee_pristine[$k]);
}
header_remove();

// exit() or a fatal error in a request ends the process: first send what the request
// had output, as php-fpm would, from the last shutdown function to run.
$levee_base_level = 0;
register_shutdown_function(static function (): void {
    register_shutdown_function(static function (): void {
        global $levee_current, $levee_base_level, $levee_server;
        // This process is ending: stop listening first, so that levee's next connection
        // is refused (and goes to another process) rather than accepted by a process
        // about to vanish.
        if (is_resource($levee_server)) {
            @fclose($levee_server);
        }
        $req = $levee_current;
        if ($req === null || $req->done) {
            return;
        }
        $error = error_get_last();
        if ($error !== null && in_array($error['type'], [E_ERROR, E_PARSE, E_CORE_ERROR, E_COMPILE_ERROR, E_USER_ERROR], true)) {
            levee_log("fatal error: {$error['message']} at {$error['file']}:{$error['line']}");
            if (!$req->committed) {
                while (ob_get_level() > $levee_base_level && @ob_end_clean()) {
                }
                @ob_clean();
                http_response_code(500);
            }
        } else {
            levee_log('exit() during a request: the answer is sent, this process ends and another takes its place');
        }
        if (session_status() === PHP_SESSION_ACTIVE) {
            session_write_close();
        }
        $req->keepAlive = false;
        levee_finish($req, $levee_base_level);
        @fclose($req->conn);
    });
});

define('LEVEE_WORKER', true);
chdir(dirname($levee_app_file));
$app = (static function (string $file): mixed {
    return require $file;
})($levee_app_file);
if (is_object($app) && interface_exists(\Symfony\Component\HttpKernel\KernelInterface::class, false)
    && $app instanceof \Symfony\Component\HttpKernel\KernelInterface) {
    $app->boot();
}
// A plain PHP app reads its body from php://input; a framework's Request (Symfony,
// Laravel, PSR-7) is given it, and PSR-7 libraries (nyholm) misread the mode a wrapped
// php://temp reports, so the wrapper is for callables only.
if (!is_object($app) || $app instanceof Closure || !(
    $app instanceof \Symfony\Component\HttpKernel\HttpKernelInterface
    || $app instanceof \Illuminate\Contracts\Http\Kernel
    || $app instanceof \Psr\Http\Server\RequestHandlerInterface
)) {
    LeveePhpStream::install();
}
$known = (is_object($app) && (
    $app instanceof \Symfony\Component\HttpKernel\HttpKernelInterface
    || $app instanceof \Illuminate\Contracts\Http\Kernel
    || $app instanceof \Psr\Http\Server\RequestHandlerInterface
)) || is_callable($app);
if (!$known) {
    levee_log("{$levee_argv[2]} must return a Symfony HttpKernelInterface, a Laravel Http Kernel, a PSR-15 RequestHandlerInterface or a callable (see runtime/levee-worker.php); it returned " . get_debug_type($app));
    exit(2);
}
header_remove();
http_response_code(200);
if (ini_get('expose_php')) {
    header('X-Powered-By: PHP/' . PHP_VERSION);
}
foreach (ini_get_all(null, true) as $name => $entry) {
    $value = ($entry['access'] & INI_USER) !== 0 ? ini_get($name) : false;
    if ($value !== false) {
        $levee_ini[$name] = $value;
    }
}

// Everything the application prints lands here; never removable, so a framework that
// closes "all" output buffers (Symfony's Response::send) stops above it.
ob_start('levee_output', LEVEE_CHUNK, PHP_OUTPUT_HANDLER_CLEANABLE | PHP_OUTPUT_HANDLER_FLUSHABLE);
$levee_base_level = ob_get_level();

// One request at a time, but any number of kept-alive connections.
$clients = [];
while (true) {
    $read = array_merge([$levee_server], array_values($clients));
    $write = $except = null;
    if (@stream_select($read, $write, $except, null) === false) {
        continue;
    }
    foreach ($read as $s) {
        if ($s === $levee_server) {
            $c = @stream_socket_accept($levee_server, 0);
            if ($c !== false) {
                $clients[(int) $c] = $c;
            }
            continue;
        }
        if (!levee_serve_one($s, $app, $levee_pristine, $levee_app_file, $levee_port, $levee_base_level)) {
            fclose($s);
            unset($clients[(int) $s]);
        }
    }
}
