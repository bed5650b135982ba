<?php
// No Composer: Debian's autoloaders (php-symfony-framework-bundle, php-symfony-twig-bundle,
// php-twig), and one for the app's own classes under src/.

require_once '/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php';
require_once '/usr/share/php/Symfony/Bundle/TwigBundle/autoload.php';

spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'App\\', 4) === 0) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, 4)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

// Everything written lives in var/ (created on demand), so that the app can be copied
// anywhere. PHP's own sessions (the /native routes) share the directory of Symfony's
// (framework.session.save_path): both use the PHPSESSID cookie.
$levee_sessions = __DIR__ . '/var/sessions';
if (!is_dir($levee_sessions)) {
    @mkdir($levee_sessions, 0777, true);
}
ini_set('session.save_path', $levee_sessions);
unset($levee_sessions);
