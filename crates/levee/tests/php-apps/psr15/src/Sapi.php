<?php

namespace App;

use Nyholm\Psr7\ServerRequest;
use Nyholm\Psr7\Stream;
use Nyholm\Psr7\UploadedFile;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;

/** What php-fpm needs and the warm runtime does itself: globals in, header()/echo out. */
final class Sapi
{
    public static function requestFromGlobals(): ServerRequestInterface
    {
        $headers = [];
        foreach ($_SERVER as $key => $value) {
            if (strncmp($key, 'HTTP_', 5) === 0) {
                $headers[str_replace('_', '-', substr($key, 5))] = $value;
            } elseif (($key === 'CONTENT_TYPE' || $key === 'CONTENT_LENGTH') && $value !== '') {
                $headers[str_replace('_', '-', $key)] = $value;
            }
        }
        $https = !empty($_SERVER['HTTPS']) && strcasecmp($_SERVER['HTTPS'], 'off') !== 0;
        $host = $_SERVER['HTTP_HOST'] ?? $_SERVER['SERVER_NAME'] ?? 'localhost';
        $uri = ($https ? 'https' : 'http') . '://' . $host . ($_SERVER['REQUEST_URI'] ?? '/');
        $method = $_SERVER['REQUEST_METHOD'] ?? 'GET';
        $version = substr($_SERVER['SERVER_PROTOCOL'] ?? 'HTTP/1.1', 5);
        $request = new ServerRequest($method, $uri, $headers, Stream::create(fopen('php://input', 'rb')), $version, $_SERVER);
        $type = strtolower($_SERVER['CONTENT_TYPE'] ?? '');
        $form = str_starts_with($type, 'application/x-www-form-urlencoded') || str_starts_with($type, 'multipart/form-data');
        return $request
            ->withCookieParams($_COOKIE)
            ->withQueryParams($_GET)
            ->withParsedBody($method === 'POST' && $form ? $_POST : null)
            ->withUploadedFiles(self::files($_FILES));
    }

    /** $_FILES, nested field names included, as UploadedFile trees. */
    private static function files(array $files): array
    {
        $out = [];
        foreach ($files as $field => $f) {
            $out[$field] = self::file($f['tmp_name'], $f['size'], $f['error'], $f['name'], $f['type']);
        }
        return $out;
    }

    private static function file($tmp, $size, $error, $name, $type)
    {
        if (!is_array($tmp)) {
            return new UploadedFile($tmp, (int) $size, (int) $error, $name, $type);
        }
        $out = [];
        foreach ($tmp as $k => $t) {
            $out[$k] = self::file($t, $size[$k], $error[$k], $name[$k], $type[$k]);
        }
        return $out;
    }

    public static function emit(ResponseInterface $response): void
    {
        $status = $response->getStatusCode();
        foreach ($response->getHeaders() as $name => $values) {
            // Set-Cookie adds to those set with setcookie(); other headers replace.
            $first = strcasecmp($name, 'Set-Cookie') !== 0;
            foreach ($values as $value) {
                header("$name: $value", $first, $status);
                $first = false;
            }
        }
        header(sprintf('HTTP/%s %d %s', $response->getProtocolVersion(), $status, $response->getReasonPhrase()), true, $status);
        $body = $response->getBody();
        if ($body->isSeekable()) {
            $body->rewind();
        }
        while (!$body->eof()) {
            echo $body->read(65536);
        }
    }
}
