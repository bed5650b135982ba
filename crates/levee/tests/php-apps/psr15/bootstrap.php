<?php
// No Composer: Debian's autoloader of php-nyholm-psr7 (which brings PSR-7 and PSR-17),
// PSR-15's interfaces shipped here, and an autoloader for the app's classes under src/.

require_once '/usr/share/php/Nyholm/Psr7/autoload.php';
require_once __DIR__ . '/src/http-server.php';

spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'App\\', 4) === 0) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, 4)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

// Everything written lives in var/ (created on demand), so that the app can be copied
// anywhere: the app's own sessions in var/sessions, PHP's (the /native routes) in
// var/php-sessions.
foreach (['var/sessions', 'var/php-sessions'] as $dir) {
    if (!is_dir(__DIR__ . "/$dir")) {
        @mkdir(__DIR__ . "/$dir", 0777, true);
    }
}
ini_set('session.save_path', __DIR__ . '/var/php-sessions');

return new App\Pipeline(
    [new App\ErrorMiddleware(), new App\SessionMiddleware(__DIR__ . '/var/sessions')],
    new App\Routes(__DIR__ . '/var'),
);
