<?php
// No Composer: Debian's autoloader of php-laravel-framework (it needs /usr/share/php on
// the include_path, Debian's default), and one for the app's own classes under app/.

require_once '/usr/share/php/Illuminate/autoload.php';

spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'App\\', 4) === 0) {
        $file = dirname(__DIR__) . '/app/' . str_replace('\\', '/', substr($class, 4)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

// Everything written lives in var/ and bootstrap/cache/ (created on demand), so that the
// app can be copied anywhere: Laravel's storage (sessions, compiled views, logs) in
// var/storage, PHP's own sessions (the /native routes) in var/php-sessions.
$base = dirname(__DIR__);
foreach (['bootstrap/cache', 'var/storage/framework/sessions', 'var/storage/framework/views',
          'var/storage/logs', 'var/php-sessions'] as $dir) {
    if (!is_dir("$base/$dir")) {
        @mkdir("$base/$dir", 0777, true);
    }
}
ini_set('session.save_path', "$base/var/php-sessions");

$app = new Illuminate\Foundation\Application($base);
$app->useStoragePath("$base/var/storage");

$app->singleton(Illuminate\Contracts\Http\Kernel::class, App\Http\Kernel::class);
$app->singleton(Illuminate\Contracts\Console\Kernel::class, Illuminate\Foundation\Console\Kernel::class);
$app->singleton(Illuminate\Contracts\Debug\ExceptionHandler::class, App\Exceptions\Handler::class);

return $app;
