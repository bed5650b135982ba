<?php

namespace App\Controller;

use Symfony\Bundle\FrameworkBundle\Controller\AbstractController;
use Symfony\Component\HttpFoundation\BinaryFileResponse;
use Symfony\Component\HttpFoundation\File\Exception\FileException;
use Symfony\Component\HttpFoundation\File\UploadedFile;
use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\Response;
use Symfony\Component\HttpFoundation\StreamedResponse;
use Symfony\Component\HttpKernel\Kernel;

class AppController extends AbstractController
{
    public function index(): Response
    {
        return $this->render('index.html.twig', ['name' => 'levee', 'version' => Kernel::VERSION]);
    }

    public function jsonData(): JsonResponse
    {
        return new JsonResponse(['hello' => 'world', 'n' => 42]);
    }

    public function error(): Response
    {
        throw new \RuntimeException('levee test failure in ' . __FILE__);
    }

    public function redirectToJson(): Response
    {
        return $this->redirect('/json');
    }

    public function login(Request $request): JsonResponse
    {
        $user = $request->query->get('user');
        $request->getSession()->set('user', $user);
        return new JsonResponse(['user' => $user]);
    }

    public function whoami(Request $request): JsonResponse
    {
        return new JsonResponse(['user' => $request->getSession()->get('user')]);
    }

    /** PHP's own session, as legacy code inside a controller uses it. */
    public function nativeLogin(Request $request): JsonResponse
    {
        session_start();
        $_SESSION['user'] = $request->query->get('user');
        return new JsonResponse(['user' => $_SESSION['user']]);
    }

    public function nativeWhoami(): JsonResponse
    {
        session_start();
        return new JsonResponse(['user' => $_SESSION['user'] ?? null, 'id' => session_id()]);
    }

    public function echoJson(Request $request): JsonResponse
    {
        return new JsonResponse(['received' => json_decode($request->getContent(), true)]);
    }

    public function echoForm(Request $request): JsonResponse
    {
        return new JsonResponse(['post' => $request->request->all(), 'raw_post' => $_POST]);
    }

    public function upload(Request $request): JsonResponse
    {
        $file = $request->files->get('file');
        $out = [
            'name' => null,
            'size' => null,
            'sha256' => null,
            'note' => $request->request->get('note'),
            'valid' => false,
            'moved' => false,
        ];
        if ($file instanceof UploadedFile) {
            $sha256 = hash_file('sha256', $file->getPathname());
            $out['name'] = $file->getClientOriginalName();
            $out['size'] = $file->getSize();
            $out['sha256'] = $sha256;
            $out['valid'] = $file->isValid();
            try {
                $moved = $file->move($this->varDir('uploads'), bin2hex(random_bytes(8)) . '.bin');
                $out['moved'] = hash_file('sha256', $moved->getPathname()) === $sha256;
                unlink($moved->getPathname());
            } catch (FileException $e) {
                $out['move_error'] = $e->getMessage();
            }
        }
        return new JsonResponse($out);
    }

    public function download(): BinaryFileResponse
    {
        // The type given: guessing it needs symfony/mime, which FrameworkBundle does not require.
        return new BinaryFileResponse(self::downloadFile($this->varDir('')), 200, [
            'Content-Type' => 'application/octet-stream',
        ]);
    }

    public function streamLines(): StreamedResponse
    {
        return new StreamedResponse(static function (): void {
            for ($i = 1; $i <= 50; $i++) {
                echo "line $i\n";
                ob_flush();
                flush();
            }
        }, 200, ['Content-Type' => 'text/plain; charset=UTF-8']);
    }

    public function server(Request $request): JsonResponse
    {
        $out = [];
        foreach (['REMOTE_ADDR', 'REMOTE_PORT', 'SERVER_NAME', 'SERVER_PORT', 'SERVER_ADDR', 'HTTPS',
                  'REQUEST_SCHEME', 'SCRIPT_NAME', 'SCRIPT_FILENAME', 'PHP_SELF', 'DOCUMENT_ROOT',
                  'REQUEST_URI', 'QUERY_STRING', 'REQUEST_METHOD', 'SERVER_PROTOCOL', 'HTTP_HOST',
                  'HTTP_X_TEST', 'CONTENT_TYPE'] as $key) {
            $out[$key] = $_SERVER[$key] ?? null;
        }
        $out['has_request_time'] = isset($_SERVER['REQUEST_TIME'], $_SERVER['REQUEST_TIME_FLOAT']);
        $out['client_ip'] = $request->getClientIp();
        return new JsonResponse($out);
    }

    public function exitEarly(): Response
    {
        http_response_code(202);
        header('X-Before-Exit: yes');
        echo 'before exit';
        exit();
    }

    public function rawHeaders(): Response
    {
        header('X-Raw: 1');
        setcookie('raw', 'v');
        http_response_code(203);
        echo 'raw';
        return new Response();
    }

    public function state(): JsonResponse
    {
        $headers = headers_list();
        return new JsonResponse([
            'code' => http_response_code(),
            'headers' => $headers,
            'get' => $_GET,
            'post' => $_POST,
            'files' => $_FILES,
            'cookie' => $_COOKIE,
            'session_status' => session_status(),
            'session_set' => isset($_SESSION),
        ]);
    }

    private function varDir(string $sub): string
    {
        $dir = $this->getParameter('kernel.project_dir') . '/var' . ($sub === '' ? '' : "/$sub");
        if (!is_dir($dir)) {
            @mkdir($dir, 0777, true);
        }
        return $dir;
    }

    /** 1 MiB (16384 SHA-512 blocks of "levee N"), written once, atomically. */
    private static function downloadFile(string $dir): string
    {
        $path = "$dir/download.bin";
        if (!is_file($path)) {
            $data = '';
            for ($i = 0; $i < 16384; $i++) {
                $data .= hash('sha512', "levee $i", true);
            }
            $tmp = "$path." . bin2hex(random_bytes(6));
            file_put_contents($tmp, $data);
            rename($tmp, $path);
        }
        return $path;
    }
}
