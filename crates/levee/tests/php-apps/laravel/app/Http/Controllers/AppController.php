<?php

namespace App\Http\Controllers;

use Illuminate\Http\Request;
use Illuminate\Routing\Controller;
use Symfony\Component\HttpFoundation\File\Exception\FileException;

class AppController extends Controller
{
    public function index()
    {
        return view('index', ['name' => 'levee']);
    }

    public function json()
    {
        return response()->json(['hello' => 'world', 'n' => 42]);
    }

    public function error()
    {
        throw new \RuntimeException('levee test failure in ' . __FILE__);
    }

    public function redirectToJson()
    {
        return redirect('/json');
    }

    public function login(Request $request)
    {
        $user = $request->query('user');
        session()->put('user', $user);
        return response()->json(['user' => $user]);
    }

    public function whoami()
    {
        return response()->json(['user' => session('user')]);
    }

    /** PHP's own session, as legacy code inside a controller uses it. */
    public function nativeLogin(Request $request)
    {
        session_start();
        $_SESSION['user'] = $request->query('user');
        return response()->json(['user' => $_SESSION['user']]);
    }

    public function nativeWhoami()
    {
        session_start();
        return response()->json(['user' => $_SESSION['user'] ?? null, 'id' => session_id()]);
    }

    public function echoJson(Request $request)
    {
        return response()->json(['received' => $request->json()->all()]);
    }

    public function echoForm(Request $request)
    {
        return response()->json(['post' => $request->request->all(), 'raw_post' => $_POST]);
    }

    public function upload(Request $request)
    {
        $file = $request->file('file');
        $out = [
            'name' => null,
            'size' => null,
            'sha256' => null,
            'note' => $request->input('note'),
            'valid' => false,
            'moved' => false,
        ];
        if ($file !== null) {
            $sha256 = hash_file('sha256', $file->getPathname());
            $out['name'] = $file->getClientOriginalName();
            $out['size'] = $file->getSize();
            $out['sha256'] = $sha256;
            $out['valid'] = $file->isValid();
            try {
                $moved = $file->move(self::varDir('uploads'), bin2hex(random_bytes(8)) . '.bin');
                $out['moved'] = hash_file('sha256', $moved->getPathname()) === $sha256;
                unlink($moved->getPathname());
            } catch (FileException $e) {
                $out['move_error'] = $e->getMessage();
            }
        }
        return response()->json($out);
    }

    public function download()
    {
        return response()->download(self::downloadFile(self::varDir('')));
    }

    public function stream()
    {
        return response()->stream(static function (): void {
            for ($i = 1; $i <= 50; $i++) {
                echo "line $i\n";
                ob_flush();
                flush();
            }
        }, 200, ['Content-Type' => 'text/plain; charset=UTF-8']);
    }

    public function server(Request $request)
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
        return response()->json($out);
    }

    public function exitEarly()
    {
        http_response_code(202);
        header('X-Before-Exit: yes');
        echo 'before exit';
        exit();
    }

    public function rawHeaders()
    {
        header('X-Raw: 1');
        setcookie('raw', 'v');
        http_response_code(203);
        echo 'raw';
        return response('');
    }

    public function state()
    {
        $headers = headers_list();
        return response()->json([
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

    private static function varDir(string $sub): string
    {
        $dir = base_path('var') . ($sub === '' ? '' : "/$sub");
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
