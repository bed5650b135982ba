<?php

namespace App;

use App\Controller\AppController;
use Symfony\Bundle\FrameworkBundle\FrameworkBundle;
use Symfony\Bundle\FrameworkBundle\Kernel\MicroKernelTrait;
use Symfony\Bundle\TwigBundle\TwigBundle;
use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;
use Symfony\Component\HttpKernel\Kernel as BaseKernel;
use Symfony\Component\Routing\Loader\Configurator\RoutingConfigurator;

class Kernel extends BaseKernel
{
    use MicroKernelTrait;

    public function registerBundles(): iterable
    {
        yield new FrameworkBundle();
        yield new TwigBundle();
    }

    /** No composer.json to find it by: the directory above src/. */
    public function getProjectDir(): string
    {
        return \dirname(__DIR__);
    }

    protected function configureContainer(ContainerConfigurator $container): void
    {
        $container->extension('framework', [
            'secret' => 'levee-test-app-secret',
            'http_method_override' => false,
            'annotations' => false,
            'php_errors' => ['log' => true],
            'router' => ['utf8' => true],
            'session' => [
                'storage_factory_id' => 'session.storage.factory.native',
                'handler_id' => 'session.handler.native_file',
                'save_path' => '%kernel.project_dir%/var/sessions',
                'cookie_samesite' => 'lax',
            ],
        ]);
        $container->extension('twig', [
            'default_path' => '%kernel.project_dir%/templates',
        ]);
        $container->services()
            ->set(AppController::class)
            ->autowire()
            ->autoconfigure()
            ->public();
    }

    protected function configureRoutes(RoutingConfigurator $routes): void
    {
        $get = [
            'index' => '/',
            'jsonData' => '/json',
            'error' => '/error',
            'redirectToJson' => '/redirect',
            'login' => '/login',
            'whoami' => '/whoami',
            'nativeLogin' => '/native/login',
            'nativeWhoami' => '/native/whoami',
            'download' => '/download',
            'streamLines' => '/stream',
            'server' => '/server',
            'exitEarly' => '/exit',
            'rawHeaders' => '/raw-headers',
            'state' => '/state',
        ];
        foreach ($get as $action => $path) {
            $routes->add($action, $path)->controller([AppController::class, $action])->methods(['GET', 'HEAD']);
        }
        $post = ['echoJson' => '/echo/json', 'echoForm' => '/echo/form', 'upload' => '/upload'];
        foreach ($post as $action => $path) {
            $routes->add($action, $path)->controller([AppController::class, $action])->methods(['POST']);
        }
    }
}
