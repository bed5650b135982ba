<?php

namespace App;

use Nyholm\Psr7\Response;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\MiddlewareInterface;
use Psr\Http\Server\RequestHandlerInterface;

/** An exception becomes a bare 500 page (debug off); the details go to the log. */
final class ErrorMiddleware implements MiddlewareInterface
{
    public function process(ServerRequestInterface $request, RequestHandlerInterface $handler): ResponseInterface
    {
        try {
            return $handler->handle($request);
        } catch (\Throwable $e) {
            error_log('psr15 app: ' . $e);
            return new Response(
                500,
                ['Content-Type' => 'text/html; charset=UTF-8'],
                "<!DOCTYPE html>\n<title>Internal Server Error</title>\n<h1>500 Internal Server Error</h1>\n"
            );
        }
    }
}
