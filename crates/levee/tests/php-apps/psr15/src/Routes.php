<?php

namespace App;

use Nyholm\Psr7\Response;
use Nyholm\Psr7\Stream;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Message\UploadedFileInterface;
use Psr\Http\Server\RequestHandlerInterface;

/** The app: a route table of GET and POST paths to methods of this class. */
final class Routes implements RequestHandlerInterface
{
    private const GET = [
        '/' => 'index',
        '/json' => 'jsonData',
        '/error' => 'error',
        '/redirect' => 'redirect',
        '/login' => 'login',
        '/whoami' => 'whoami',
        '/native/login' => 'nativeLogin',
        '/native/whoami' => 'nativeWhoami',
        '/download' => 'download',
        '/stream' => 'stream',
        '/server' => 'server',
        '/exit' => 'exitEarly',
        '/raw-headers' => 'rawHeaders',
        '/state' => 'state',
    ];

    private const POST = [
        '/echo/json' => 'echoJson',
        '/echo/form' => 'echoForm',
        '/upload' => 'upload',
    ];

    /** @param string $var where the app writes (uploads, the download file) */
    public function __construct(private string $var)
    {
    }

    public function handle(ServerRequestInterface $request): ResponseInterface
    {
        $path = $request->getUri()->getPath();
        $routes = match ($request->getMethod()) {
            'GET', 'HEAD' => self::GET,
            'POST' => self::POST,
            default => [],
        };
        $action = $routes[$path] ?? null;
        if ($action === null) {
            return new Response(
                404,
                ['Content-Type' => 'text/html; charset=UTF-8'],
                "<!DOCTYPE html>\n<title>Not Found</title>\n<h1>404 Not Found</h1>\n"
            );
        }
        return $this->$action($request);
    }

    private function index(): ResponseInterface
    {
        $name = 'levee';
        $html = "<!DOCTYPE html>\n<html>\n<head><meta charset=\"UTF-8\"><title>$name</title></head>\n"
            . "<body>\n<h1>Hello $name</h1>\n<p>PSR-15, nyholm/psr7.</p>\n</body>\n</html>\n";
        return new Response(200, ['Content-Type' => 'text/html; charset=UTF-8'], $html);
    }

    private static function json(mixed $data, int $status = 200): ResponseInterface
    {
        return new Response($status, ['Content-Type' => 'application/json'], json_encode($data));
    }

    private function jsonData(): ResponseInterface
    {
        return self::json(['hello' => 'world', 'n' => 42]);
    }

    private function error(): ResponseInterface
    {
        throw new \RuntimeException('levee test failure in ' . __FILE__);
    }

    private function redirect(): ResponseInterface
    {
        return new Response(302, ['Location' => '/json']);
    }

    private function login(ServerRequestInterface $request): ResponseInterface
    {
        $user = $request->getQueryParams()['user'] ?? null;
        $request->getAttribute('session')->set('user', $user);
        return self::json(['user' => $user]);
    }

    private function whoami(ServerRequestInterface $request): ResponseInterface
    {
        return self::json(['user' => $request->getAttribute('session')->get('user')]);
    }

    /** PHP's own session, as legacy code inside a handler uses it. */
    private function nativeLogin(ServerRequestInterface $request): ResponseInterface
    {
        session_start();
        $_SESSION['user'] = $request->getQueryParams()['user'] ?? null;
        return self::json(['user' => $_SESSION['user']]);
    }

    private function nativeWhoami(): ResponseInterface
    {
        session_start();
        return self::json(['user' => $_SESSION['user'] ?? null, 'id' => session_id()]);
    }

    private function echoJson(ServerRequestInterface $request): ResponseInterface
    {
        return self::json(['received' => json_decode((string) $request->getBody(), true)]);
    }

    private function echoForm(ServerRequestInterface $request): ResponseInterface
    {
        return self::json(['post' => $request->getParsedBody(), 'raw_post' => $_POST]);
    }

    private function upload(ServerRequestInterface $request): ResponseInterface
    {
        $file = $request->getUploadedFiles()['file'] ?? null;
        $body = $request->getParsedBody();
        $out = [
            'name' => null,
            'size' => null,
            'sha256' => null,
            'note' => is_array($body) ? ($body['note'] ?? null) : null,
            'valid' => false,
            'moved' => false,
        ];
        if ($file instanceof UploadedFileInterface) {
            $out['name'] = $file->getClientFilename();
            $out['size'] = $file->getSize();
            $out['valid'] = $file->getError() === UPLOAD_ERR_OK;
            if ($out['valid']) {
                $sha256 = hash('sha256', (string) $file->getStream());
                $out['sha256'] = $sha256;
                $target = $this->varDir('uploads') . '/' . bin2hex(random_bytes(8)) . '.bin';
                try {
                    $file->moveTo($target);
                    $out['moved'] = hash_file('sha256', $target) === $sha256;
                    unlink($target);
                } catch (\RuntimeException $e) {
                    $out['move_error'] = $e->getMessage();
                }
            }
        }
        return self::json($out);
    }

    private function download(): ResponseInterface
    {
        $path = self::downloadFile($this->varDir(''));
        return new Response(200, [
            'Content-Type' => 'application/octet-stream',
            'Content-Length' => (string) filesize($path),
        ], Stream::create(fopen($path, 'rb')));
    }

    private function stream(): ResponseInterface
    {
        $body = '';
        for ($i = 1; $i <= 50; $i++) {
            $body .= "line $i\n";
        }
        return new Response(200, ['Content-Type' => 'text/plain; charset=UTF-8'], $body);
    }

    private function server(ServerRequestInterface $request): ResponseInterface
    {
        $out = [];
        foreach (['REMOTE_ADDR', 'REMOTE_PORT', 'SERVER_NAME', 'SERVER_PORT', 'SERVER_ADDR', 'HTTPS',
                  'REQUEST_SCHEME', 'SCRIPT_NAME', 'SCRIPT_FILENAME', 'PHP_SELF', 'DOCUMENT_ROOT',
                  'REQUEST_URI', 'QUERY_STRING', 'REQUEST_METHOD', 'SERVER_PROTOCOL', 'HTTP_HOST',
                  'HTTP_X_TEST', 'CONTENT_TYPE'] as $key) {
            $out[$key] = $_SERVER[$key] ?? null;
        }
        $out['has_request_time'] = isset($_SERVER['REQUEST_TIME'], $_SERVER['REQUEST_TIME_FLOAT']);
        $out['client_ip'] = $request->getServerParams()['REMOTE_ADDR'] ?? null;
        return self::json($out);
    }

    private function exitEarly(): ResponseInterface
    {
        http_response_code(202);
        header('X-Before-Exit: yes');
        echo 'before exit';
        exit();
    }

    private function rawHeaders(): ResponseInterface
    {
        header('X-Raw: 1');
        setcookie('raw', 'v');
        http_response_code(203);
        echo 'raw';
        return new Response();
    }

    private function state(): ResponseInterface
    {
        $headers = headers_list();
        return self::json([
            'code' => http_response_code(),
            'headers' => $headers,
            'get' => $_GET,
            'post' => $_POST,
            'files' => $_FILES,
            'cookie' => $_COOKIE,
            'session_status' => session_status(),
            'session_set' => isset($_SESSION),
        ]);
    }

    private function varDir(string $sub): string
    {
        $dir = $this->var . ($sub === '' ? '' : "/$sub");
        if (!is_dir($dir)) {
            @mkdir($dir, 0777, true);
        }
        return $dir;
    }

    /** 1 MiB (16384 SHA-512 blocks of "levee N"), written once, atomically. */
    private static function downloadFile(string $dir): string
    {
        $path = "$dir/download.bin";
        if (!is_file($path)) {
            $data = '';
            for ($i = 0; $i < 16384; $i++) {
                $data .= hash('sha512', "levee $i", true);
            }
            $tmp = "$path." . bin2hex(random_bytes(6));
            file_put_contents($tmp, $data);
            rename($tmp, $path);
        }
        return $path;
    }
}
