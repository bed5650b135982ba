<?php
// PSR-15's two interfaces (psr/http-server-handler and psr/http-server-middleware 1.0,
// Copyright (c) 2016 PHP Framework Interoperability Group, MIT licence), which Debian does
// not package. Declared only when no one else has: an autoloader or the runtime may.

namespace Psr\Http\Server;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;

if (!interface_exists(RequestHandlerInterface::class)) {
    /** Handles a server request and produces a response. */
    interface RequestHandlerInterface
    {
        public function handle(ServerRequestInterface $request): ResponseInterface;
    }
}

if (!interface_exists(MiddlewareInterface::class)) {
    /** Participant in processing a server request and response. */
    interface MiddlewareInterface
    {
        public function process(ServerRequestInterface $request, RequestHandlerInterface $handler): ResponseInterface;
    }
}
