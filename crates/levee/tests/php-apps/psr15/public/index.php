<?php
// The one front controller: php-fpm runs it per request (a ServerRequest made from the
// globals, the response emitted with header() and echo); levee's warm runtime
// (runtime/levee-worker.php) defines LEVEE_WORKER, requires it once and keeps the
// returned PSR-15 request handler.

$handler = require dirname(__DIR__) . '/bootstrap.php';

if (defined('LEVEE_WORKER')) {
    return $handler;
}

App\Sapi::emit($handler->handle(App\Sapi::requestFromGlobals()));
