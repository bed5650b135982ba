<?php

namespace App;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\MiddlewareInterface;
use Psr\Http\Server\RequestHandlerInterface;

/**
 * The app's own sessions (the framework's, as far as a bare PSR-15 app has one): JSON
 * files named by a random id in the `psr15_session` cookie, a Session in the request's
 * `session` attribute, the cookie set when a new session gets data.
 */
final class SessionMiddleware implements MiddlewareInterface
{
    public const COOKIE = 'psr15_session';

    public function __construct(private string $dir)
    {
    }

    public function process(ServerRequestInterface $request, RequestHandlerInterface $handler): ResponseInterface
    {
        $id = (string) ($request->getCookieParams()[self::COOKIE] ?? '');
        $data = [];
        if (preg_match('/^[0-9a-f]{32}$/', $id) === 1 && is_file($file = "{$this->dir}/$id.json")) {
            $data = json_decode((string) file_get_contents($file), true) ?: [];
        } else {
            $id = '';
        }
        $session = new Session($data);
        $response = $handler->handle($request->withAttribute('session', $session));
        if ($session->changed()) {
            $new = $id === '';
            if ($new) {
                $id = bin2hex(random_bytes(16));
            }
            $tmp = "{$this->dir}/$id." . bin2hex(random_bytes(6));
            file_put_contents($tmp, json_encode($session->all()));
            rename($tmp, "{$this->dir}/$id.json");
            if ($new) {
                $response = $response->withAddedHeader(
                    'Set-Cookie',
                    self::COOKIE . "=$id; path=/; httponly; samesite=lax"
                );
            }
        }
        return $response;
    }
}
