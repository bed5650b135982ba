<?php
// The one front controller: php-fpm runs it per request; levee's warm runtime
// (runtime/levee-worker.php) defines LEVEE_WORKER, requires it once and keeps the
// returned kernel.

use App\Kernel;
use Symfony\Component\HttpFoundation\Request;

require dirname(__DIR__) . '/bootstrap.php';

$kernel = new Kernel($_SERVER['APP_ENV'] ?? 'prod', false);

if (defined('LEVEE_WORKER')) {
    $kernel->boot();
    return $kernel;
}

$request = Request::createFromGlobals();
$response = $kernel->handle($request);
$response->send();
$kernel->terminate($request, $response);
