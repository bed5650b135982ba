<?php

namespace App;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\MiddlewareInterface;
use Psr\Http\Server\RequestHandlerInterface;

/** The middlewares in order, then the final handler. */
final class Pipeline implements RequestHandlerInterface
{
    /** @param MiddlewareInterface[] $middlewares */
    public function __construct(private array $middlewares, private RequestHandlerInterface $last)
    {
    }

    public function handle(ServerRequestInterface $request): ResponseInterface
    {
        if ($this->middlewares === []) {
            return $this->last->handle($request);
        }
        $rest = $this->middlewares;
        $first = array_shift($rest);
        return $first->process($request, new self($rest, $this->last));
    }
}
