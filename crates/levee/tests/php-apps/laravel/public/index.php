<?php
// The one front controller: php-fpm runs it per request, as Laravel's own public/index.php
// does; levee's warm runtime (runtime/levee-worker.php) defines LEVEE_WORKER, requires it
// once and keeps the returned HTTP kernel (the application bootstrapped by it).

use Illuminate\Contracts\Http\Kernel;
use Illuminate\Http\Request;

define('LARAVEL_START', microtime(true));

$app = require_once __DIR__ . '/../bootstrap/app.php';

$kernel = $app->make(Kernel::class);

if (defined('LEVEE_WORKER')) {
    $kernel->bootstrap();
    return $kernel;
}

$response = $kernel->handle(
    $request = Request::capture()
)->send();

$kernel->terminate($request, $response);
