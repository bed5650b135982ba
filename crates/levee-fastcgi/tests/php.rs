//! levee-fastcgi against a real php-fpm (see `levee_test::PhpFpm`), with PHP fixture
//! scripts written into a temporary document root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, Full};
use levee_fastcgi::{
    route, Address, CgiRequest, Client, ClientConfig, Error, Params, ResponseBody, Route,
};
use levee_test::PhpFpm;
use tokio::sync::mpsc;

/// Every test must finish well within this, or it failed by hanging.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

const FIXTURES: &[(&str, &str)] = &[
    (
        "index.php",
        "<?php echo 'front controller: ', $_SERVER['REQUEST_URI'];",
    ),
    ("hello.php", "<?php echo 'Hello, world!';"),
    (
        "status.php",
        "<?php http_response_code(404); header('X-One: 1'); setcookie('a', '1'); \
         setcookie('b', '2'); echo 'missing';",
    ),
    ("redirect.php", "<?php header('Location: /elsewhere');"),
    (
        "unavailable.php",
        "<?php header('Status: 503 Service Unavailable'); header('Retry-After: 7');",
    ),
    (
        "server.php",
        "<?php header('Content-Type: application/json'); echo json_encode($_SERVER);",
    ),
    (
        "sub/page.php",
        "<?php echo json_encode(['SCRIPT_NAME' => $_SERVER['SCRIPT_NAME'], \
         'PATH_INFO' => $_SERVER['PATH_INFO'] ?? null, '__FILE__' => __FILE__]);",
    ),
    (
        "upload.php",
        "<?php $f = $_FILES['file'] ?? null; header('Content-Type: application/json'); \
         echo json_encode(['error' => $f['error'] ?? 'missing', 'name' => $f['name'] ?? null, \
         'size' => $f['size'] ?? null, \
         'md5' => $f ? md5_file($f['tmp_name']) : null, 'field' => $_POST['field'] ?? null]);",
    ),
    (
        "big.php",
        "<?php for ($i = 0; $i < 320; $i++) { echo str_repeat(chr(97 + $i % 26), 65536); }",
    ),
    (
        "echo.php",
        "<?php while (ob_get_level()) { ob_end_flush(); } $in = fopen('php://input', 'rb'); \
         while (($chunk = fread($in, 65536)) !== false && $chunk !== '') { echo $chunk; flush(); }",
    ),
    (
        "pingpong.php",
        "<?php while (ob_get_level()) { ob_end_flush(); } $in = fopen('php://input', 'rb'); \
         stream_set_read_buffer($in, 0); \
         for ($i = 0; $i < 3; $i++) { echo strtoupper(fread($in, 5)); flush(); }",
    ),
    (
        "die.php",
        "<?php echo str_repeat('x', 100000); flush(); exit(1);",
    ),
    (
        "kill.php",
        "<?php while (ob_get_level()) { ob_end_flush(); } echo str_repeat('x', 100000); flush(); \
         posix_kill(getmypid(), 9); sleep(10);",
    ),
    (
        "fatal.php",
        "<?php echo 'partial'; flush(); undefined_function_levee();",
    ),
    (
        "stderr.php",
        "<?php error_log('levee-stderr-marker one'); echo 'clean body'; \
         error_log('levee-stderr-marker two');",
    ),
    ("pid.php", "<?php echo getmypid();"),
    ("usleep.php", "<?php usleep(200000); echo getmypid();"),
    ("slowhead.php", "<?php sleep(5); echo 'late';"),
    (
        "slowbody.php",
        "<?php while (ob_get_level()) { ob_end_flush(); } echo 'first'; flush(); sleep(5); \
         echo 'late';",
    ),
];

/// A document root with the fixtures and a php-fpm serving it; both removed on drop.
struct Site {
    fpm: PhpFpm,
    root: DocRoot,
}

struct DocRoot(PathBuf);

impl Drop for DocRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn docroot() -> DocRoot {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("levee-fastcgi-www-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (name, code) in FIXTURES {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, code).unwrap();
    }
    std::fs::write(dir.join("style.css"), "body {}").unwrap();
    DocRoot(dir)
}

fn site() -> Site {
    let root = docroot();
    Site {
        fpm: PhpFpm::start(&root.0),
        root,
    }
}

impl Site {
    fn docroot(&self) -> &Path {
        &self.root.0
    }

    fn unix(&self) -> Client {
        self.unix_with(ClientConfig::default())
    }

    fn unix_with(&self, config: ClientConfig) -> Client {
        Client::new(Address::Unix(self.fpm.socket_path().into()), config)
    }

    fn tcp(&self) -> Client {
        Client::new(
            Address::Tcp(self.fpm.tcp_addr().to_string()),
            ClientConfig::default(),
        )
    }
}

/// Routes the request as levee would and sends it.
async fn send<B>(
    client: &Client,
    docroot: &Path,
    req: Request<B>,
) -> Result<Response<ResponseBody>, Error>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    let Route::Script {
        script_name,
        path_info,
        ..
    } = route(docroot, parts.uri.path(), "index.php")
    else {
        panic!("{} is not a script", parts.uri)
    };
    let remote: SocketAddr = "192.0.2.10:51234".parse().unwrap();
    let params = Params::cgi(&CgiRequest {
        parts: &parts,
        document_root: docroot,
        script_name: &script_name,
        path_info: &path_info,
        remote_addr: remote,
        server_addr: "127.0.0.1:8080".parse().unwrap(),
        https: true,
        server_name: "levee.test",
    });
    client.request(params, body).await
}

async fn get(client: &Client, docroot: &Path, uri: &str) -> (http::response::Parts, Bytes) {
    let req = Request::get(uri).body(Empty::<Bytes>::new()).unwrap();
    let resp = send(client, docroot, req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts, body)
}

/// Runs a test body with a deadline, so that a hang fails the test.
async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("the test hung")
}

/// A request body streamed in the given chunks, with no size hint.
struct Chunks(VecDeque<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().0.pop_front().map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

fn chunks(data: &[u8], size: usize) -> Chunks {
    Chunks(data.chunks(size).map(Bytes::copy_from_slice).collect())
}

/// A request body fed by the test as it goes.
struct ChannelBody(mpsc::Receiver<Result<Bytes, std::io::Error>>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|o| o.map(|r| r.map(Frame::data)))
    }
}

/// Pseudo-random bytes (xorshift), so that the upload is not trivially compressible.
fn noise(len: usize) -> Vec<u8> {
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

fn md5(data: &[u8]) -> String {
    let path = std::env::temp_dir().join(format!("levee-fastcgi-md5-{}", std::process::id()));
    std::fs::write(&path, data).unwrap();
    let out = std::process::Command::new("md5sum")
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    String::from_utf8(out.stdout).unwrap()[..32].to_string()
}

fn json(body: &[u8]) -> serde_like::Value {
    serde_like::parse(body)
}

/// The tests only need string and number fields of flat JSON objects: a tiny reader keeps
/// serde out of this crate's dependencies.
mod serde_like {
    use std::collections::HashMap;

    pub struct Value(pub HashMap<String, String>);

    impl Value {
        pub fn get(&self, k: &str) -> Option<&str> {
            self.0.get(k).map(String::as_str)
        }
    }

    pub fn parse(body: &[u8]) -> Value {
        let s = std::str::from_utf8(body).expect("JSON is UTF-8");
        let s = s.trim().strip_prefix('{').and_then(|s| s.strip_suffix('}'));
        let s = s.unwrap_or_else(|| panic!("not a JSON object: {}", String::from_utf8_lossy(body)));
        let mut map = HashMap::new();
        let mut chars = s.chars().peekable();
        loop {
            while matches!(chars.peek(), Some(',' | ' ')) {
                chars.next();
            }
            if chars.peek().is_none() {
                break;
            }
            let key = string(&mut chars);
            assert_eq!(chars.next(), Some(':'));
            let value = if chars.peek() == Some(&'"') {
                string(&mut chars)
            } else {
                let mut v = String::new();
                while let Some(c) = chars.peek().copied() {
                    if c == ',' {
                        break;
                    }
                    v.push(c);
                    chars.next();
                }
                v
            };
            map.insert(key, value);
        }
        Value(map)
    }

    fn string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
        assert_eq!(chars.next(), Some('"'));
        let mut out = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => return out,
                '\\' => match chars.next() {
                    Some('/') => out.push('/'),
                    Some('"') => out.push('"'),
                    Some('\\') => out.push('\\'),
                    Some('n') => out.push('\n'),
                    Some('u') => {
                        let hex: String = chars.by_ref().take(4).collect();
                        let c = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                        out.push(c.unwrap_or('?'));
                    }
                    Some(c) => out.push(c),
                    None => break,
                },
                c => out.push(c),
            }
        }
        panic!("unterminated JSON string");
    }
}

/// Warnings logged by the crate, captured for the stderr test.
fn captured_logs() -> &'static Mutex<String> {
    static LOGS: OnceLock<Mutex<String>> = OnceLock::new();
    static INIT: OnceLock<()> = OnceLock::new();
    let logs = LOGS.get_or_init(|| Mutex::new(String::new()));
    INIT.get_or_init(|| {
        struct W;
        impl Write for W {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                captured_logs()
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(buf));
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(|| W)
            .try_init();
    });
    logs
}

#[tokio::test]
async fn hello_world_over_unix_and_tcp() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    within(async {
        for client in [site.unix(), site.tcp()] {
            let (parts, body) = get(&client, site.docroot(), "/hello.php").await;
            assert_eq!(parts.status, StatusCode::OK);
            assert_eq!(parts.headers["content-type"], "text/html; charset=UTF-8");
            assert_eq!(&body[..], b"Hello, world!");
        }
    })
    .await;
}

#[tokio::test]
async fn status_headers_cookies_and_redirects() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let (parts, body) = get(&client, site.docroot(), "/status.php").await;
        assert_eq!(parts.status, StatusCode::NOT_FOUND);
        assert_eq!(parts.headers["x-one"], "1");
        let cookies: Vec<_> = parts.headers.get_all("set-cookie").iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert!(!parts.headers.contains_key("status"));
        assert_eq!(&body[..], b"missing");

        let (parts, _) = get(&client, site.docroot(), "/redirect.php").await;
        assert_eq!(parts.status, StatusCode::FOUND);
        assert_eq!(parts.headers["location"], "/elsewhere");

        let (parts, body) = get(&client, site.docroot(), "/unavailable.php").await;
        assert_eq!(parts.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(parts.headers["retry-after"], "7");
        assert!(body.is_empty());

        // The front controller sees the original URI.
        let (parts, body) = get(&client, site.docroot(), "/2024/01/post/?x=1").await;
        assert_eq!(parts.status, StatusCode::OK);
        assert_eq!(&body[..], b"front controller: /2024/01/post/?x=1");

        // HEAD: php sends the head only.
        let req = Request::head("/hello.php")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = send(&client, site.docroot(), req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .is_empty());
    })
    .await;
}

#[tokio::test]
async fn server_variables_reach_php() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let req = Request::post("/sub/page.php/extra/path?ignored=1")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let body = send(&client, site.docroot(), req)
            .await
            .unwrap()
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes();
        let v = json(&body);
        assert_eq!(v.get("SCRIPT_NAME"), Some("/sub/page.php"));
        assert_eq!(v.get("PATH_INFO"), Some("/extra/path"));
        let file = site.docroot().join("sub/page.php");
        assert_eq!(v.get("__FILE__"), Some(file.to_str().unwrap()));

        let req = Request::get("/server.php/info?a=1&b=%20two")
            .header("Host", "www.example.org")
            .header("User-Agent", "levee-test")
            .header("X-Custom-Thing", "yes")
            .header("Cookie", "one=1")
            .header("Cookie", "two=2")
            .header("Proxy", "http://evil:3128")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = send(&client, site.docroot(), req).await.unwrap();
        assert_eq!(resp.headers()["content-type"], "application/json");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let v = json(&body);
        let expect = [
            ("SCRIPT_NAME", "/server.php"),
            ("PATH_INFO", "/info"),
            ("REQUEST_URI", "/server.php/info?a=1&b=%20two"),
            ("QUERY_STRING", "a=1&b=%20two"),
            ("REQUEST_METHOD", "GET"),
            ("HTTP_HOST", "www.example.org"),
            ("HTTP_USER_AGENT", "levee-test"),
            ("HTTP_X_CUSTOM_THING", "yes"),
            ("HTTP_COOKIE", "one=1; two=2"),
            ("REMOTE_ADDR", "192.0.2.10"),
            ("REMOTE_PORT", "51234"),
            ("SERVER_PORT", "8080"),
            ("SERVER_NAME", "levee.test"),
            ("HTTPS", "on"),
            ("REQUEST_SCHEME", "https"),
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("SERVER_PROTOCOL", "HTTP/1.1"),
        ];
        for (k, want) in expect {
            assert_eq!(
                v.get(k),
                Some(want),
                "$_SERVER[{k}] in {}",
                String::from_utf8_lossy(&body)
            );
        }
        assert_eq!(v.get("HTTP_PROXY"), None, "httpoxy");
        let file = site.docroot().join("server.php");
        assert_eq!(v.get("SCRIPT_FILENAME"), Some(file.to_str().unwrap()));
        assert_eq!(
            v.get("DOCUMENT_ROOT"),
            Some(site.docroot().to_str().unwrap())
        );
    })
    .await;
}

#[tokio::test]
async fn multipart_upload_of_several_mib() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let file = noise(6 * 1024 * 1024 + 123);
        let boundary = "levee-boundary-7MA4YWxkTrZu0gW";
        let mut body = Vec::new();
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"field\"\r\n\r\nvalue \
                 ok\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
                 filename=\"data.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(&file);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let req = Request::post("/upload.php")
            .header(
                "Content-Type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .header("Content-Length", body.len().to_string())
            .body(chunks(&body, 64 * 1024))
            .unwrap();
        let resp = send(&client, site.docroot(), req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let answer = resp.into_body().collect().await.unwrap().to_bytes();
        let v = json(&answer);
        assert_eq!(
            v.get("error"),
            Some("0"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        assert_eq!(v.get("name"), Some("data.bin"));
        assert_eq!(v.get("size"), Some(file.len().to_string().as_str()));
        assert_eq!(v.get("md5"), Some(md5(&file).as_str()));
        assert_eq!(v.get("field"), Some("value ok"));

        // The connection is clean afterwards and reused.
        let (_, body) = get(&client, site.docroot(), "/hello.php").await;
        assert_eq!(&body[..], b"Hello, world!");
        assert_eq!(client.stats().connects, 1, "{:?}", client.stats());
    })
    .await;
}

#[tokio::test]
async fn twenty_mib_streamed_response() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let req = Request::get("/big.php")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let mut body = send(&client, site.docroot(), req)
            .await
            .unwrap()
            .into_body();
        let (mut len, mut frames) = (0usize, 0usize);
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            // Streamed: never the whole body at once.
            assert!(data.len() <= 64 * 1024, "{}", data.len());
            len += data.len();
            frames += 1;
        }
        assert_eq!(len, 20 * 1024 * 1024);
        assert!(frames > 100, "{frames}");
        assert_eq!(client.stats().idle, 1, "back in the pool after END_REQUEST");
    })
    .await;
}

/// php echoes what it reads while it reads: with 8 MiB each way, a client that did not
/// read while writing would deadlock once both socket buffers are full.
#[tokio::test]
async fn large_upload_echoed_while_sending_does_not_deadlock() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    for client in [site.unix(), site.tcp()] {
        within(async {
            let data = noise(8 * 1024 * 1024);
            let req = Request::put("/echo.php")
                .header("Content-Length", data.len().to_string())
                .body(chunks(&data, 100_000))
                .unwrap();
            let resp = send(&client, site.docroot(), req).await.unwrap();
            let echoed = resp.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(echoed.len(), data.len());
            assert!(echoed[..] == data[..], "echo differs");
            assert_eq!(client.stats().idle, 1);
        })
        .await;
    }
}

/// A body of unknown length (chunked from levee's client, no Content-Length) is read
/// whole first: php reads exactly CONTENT_LENGTH bytes and would see none of it without.
#[tokio::test]
async fn body_of_unknown_length_reaches_php_whole() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let data = noise(300_000);
        let req = Request::put("/echo.php")
            .body(chunks(&data, 70_000))
            .unwrap();
        let resp = send(&client, site.docroot(), req).await.unwrap();
        let echoed = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(echoed.len(), data.len());
        assert!(echoed[..] == data[..], "echo differs");

        // Beyond max_unsized_body: refused, never sent truncated.
        let small = site.unix_with(ClientConfig {
            max_unsized_body: 100_000,
            ..ClientConfig::default()
        });
        let req = Request::put("/echo.php")
            .body(chunks(&data, 70_000))
            .unwrap();
        let err = send(&small, site.docroot(), req).await.unwrap_err();
        assert!(matches!(err, Error::BodyTooLarge { .. }), "{err}");
        assert!(err.to_string().contains("Content-Length"), "{err}");
    })
    .await;
}

/// Each piece of the request body is sent when the test provides it and answered before
/// the next one exists: the body is streamed both ways, not buffered.
#[tokio::test]
async fn request_and_response_bodies_are_streamed() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let (tx, rx) = mpsc::channel(1);
        let req = Request::put("/pingpong.php")
            .header("Content-Length", "15")
            .body(ChannelBody(rx))
            .unwrap();
        tx.send(Ok(Bytes::from_static(b"ping1"))).await.unwrap();
        let resp = send(&client, site.docroot(), req).await.unwrap();
        let mut body = resp.into_body();
        let mut got = Vec::new();
        for (i, next) in [&b"ping2"[..], b"ping3", b""].into_iter().enumerate() {
            let want = format!("PING{}", i + 1);
            while got.len() < want.len() {
                let frame = body.frame().await.unwrap().unwrap();
                got.extend_from_slice(&frame.into_data().unwrap());
            }
            assert_eq!(String::from_utf8_lossy(&got), want);
            got.clear();
            if !next.is_empty() {
                tx.send(Ok(Bytes::copy_from_slice(next))).await.unwrap();
            }
        }
        drop(tx);
        assert!(body.frame().await.is_none());
    })
    .await;
}

#[tokio::test]
async fn a_failing_request_body_is_an_error_and_never_reused() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let (tx, rx) = mpsc::channel(2);
        let req = Request::put("/echo.php")
            .header("Content-Length", "1000")
            .body(ChannelBody(rx))
            .unwrap();
        tx.send(Ok(Bytes::from_static(b"some"))).await.unwrap();
        tx.send(Err(std::io::Error::other("client went away")))
            .await
            .unwrap();
        let err = match send(&client, site.docroot(), req).await {
            Err(e) => e,
            Ok(resp) => resp.into_body().collect().await.unwrap_err(),
        };
        assert!(err.is_body(), "{err}");
        assert!(err.to_string().contains("client went away"), "{err}");
        assert_eq!(client.stats().idle, 0);
        let (_, body) = get(&client, site.docroot(), "/hello.php").await;
        assert_eq!(&body[..], b"Hello, world!");
    })
    .await;
}

#[tokio::test]
async fn exit_mid_response_ends_the_body_properly() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let (parts, body) = get(&client, site.docroot(), "/die.php").await;
        assert_eq!(parts.status, StatusCode::OK);
        assert_eq!(body.len(), 100_000);

        let (_, body) = get(&client, site.docroot(), "/fatal.php").await;
        assert!(
            body.starts_with(b"partial"),
            "{:?}",
            String::from_utf8_lossy(&body)
        );

        // The connection survived both.
        let (_, body) = get(&client, site.docroot(), "/hello.php").await;
        assert_eq!(&body[..], b"Hello, world!");
        assert_eq!(client.stats().connects, 1, "{:?}", client.stats());
    })
    .await;
}

#[tokio::test]
async fn worker_killed_mid_response_is_a_body_error() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let started = Instant::now();
        let req = Request::get("/kill.php")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = send(&client, site.docroot(), req).await.unwrap();
        let mut body = resp.into_body();
        let mut len = 0;
        let err = loop {
            match body.frame().await {
                Some(Ok(f)) => len += f.into_data().unwrap().len(),
                Some(Err(e)) => break e,
                None => panic!("a killed worker must not look like a complete response"),
            }
        };
        assert!(matches!(err, Error::Closed { .. }), "{err:?}");
        assert!(err.to_string().contains("closed the connection"), "{err}");
        assert!(len <= 100_000);
        assert!(started.elapsed() < Duration::from_secs(5), "no hang");
        assert_eq!(client.stats().idle, 0);

        // The pool recovers with a new connection (php-fpm respawns the worker).
        let (_, body) = get(&client, site.docroot(), "/hello.php").await;
        assert_eq!(&body[..], b"Hello, world!");
    })
    .await;
}

#[tokio::test]
async fn read_timeout_bounds_the_head_and_the_body() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix_with(ClientConfig {
        read_timeout: Duration::from_millis(300),
        ..ClientConfig::default()
    });
    within(async {
        let started = Instant::now();
        let req = Request::get("/slowhead.php")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let err = send(&client, site.docroot(), req).await.unwrap_err();
        assert!(err.is_timeout(), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));

        let started = Instant::now();
        let req = Request::get("/slowbody.php")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = send(&client, site.docroot(), req).await.unwrap();
        let err = resp.into_body().collect().await.unwrap_err();
        assert!(err.is_timeout(), "{err}");
        assert!(err.to_string().contains("raise read_timeout"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(client.stats().idle, 0);
    })
    .await;
}

#[tokio::test]
async fn stderr_is_logged_not_mixed_into_the_body() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let logs = captured_logs();
    let site = site();
    let client = site.unix();
    within(async {
        let (_, body) = get(&client, site.docroot(), "/stderr.php").await;
        assert_eq!(&body[..], b"clean body");
        let logs = logs.lock().unwrap().clone();
        for marker in ["levee-stderr-marker one", "levee-stderr-marker two"] {
            let line = logs
                .lines()
                .find(|l| l.contains(marker))
                .unwrap_or_else(|| panic!("{marker} not logged in:\n{logs}"));
            assert!(
                line.contains("WARN") && line.contains("levee::php"),
                "{line}"
            );
            assert!(line.contains("stderr.php"), "the script is named: {line}");
        }
    })
    .await;
}

#[tokio::test]
async fn sequential_requests_reuse_few_connections() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let mut pids = std::collections::HashSet::new();
        for _ in 0..40 {
            let (_, body) = get(&client, site.docroot(), "/pid.php").await;
            pids.insert(String::from_utf8(body.to_vec()).unwrap());
        }
        // A kept-alive connection stays with its php-fpm worker.
        assert_eq!(pids.len(), 1, "{pids:?}");
        let stats = client.stats();
        assert_eq!(stats.connects, 1, "{stats:?}");
        assert_eq!(stats.reused, 39, "{stats:?}");
        assert_eq!(stats.idle, 1);

        // Concurrent requests open more connections; they are kept up to max_idle.
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let client = client.clone();
            let root = site.docroot().to_path_buf();
            tasks.push(tokio::spawn(async move {
                let (_, body) = get(&client, &root, "/pid.php").await;
                body
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let stats = client.stats();
        assert!(stats.connects <= 4, "{stats:?}");
        assert!(stats.idle >= 1 && stats.idle <= 4, "{stats:?}");
    })
    .await;
}

#[tokio::test]
async fn a_body_dropped_early_closes_its_connection() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let req = Request::get("/big.php")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let mut body = send(&client, site.docroot(), req)
            .await
            .unwrap()
            .into_body();
        body.frame().await.unwrap().unwrap();
        drop(body);
        assert_eq!(client.stats().idle, 0);
        let (_, body) = get(&client, site.docroot(), "/hello.php").await;
        assert_eq!(&body[..], b"Hello, world!");
        assert_eq!(client.stats().connects, 2);
    })
    .await;
}

/// Workers exit after 2 requests (pm.max_requests), closing their kept-alive connection:
/// the client notices before reusing it, or sends again when php cannot have seen the
/// request, so no request fails.
#[tokio::test]
async fn connections_closed_by_php_fpm_are_not_reused() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let root = docroot();
    let fpm = PhpFpm::builder(&root.0)
        .max_requests(2)
        .max_children(2)
        .start();
    let client = Client::new(
        Address::Unix(fpm.socket_path().into()),
        ClientConfig::default(),
    );
    within(async {
        for i in 0..30 {
            let req = if i % 3 == 0 {
                Request::post("/hello.php")
                    .header("Content-Length", "3")
                    .body(Full::new(Bytes::from_static(b"a=b")).boxed())
                    .unwrap()
            } else {
                Request::get("/hello.php")
                    .body(Empty::<Bytes>::new().boxed())
                    .unwrap()
            };
            let resp = send(&client, &root.0, req)
                .await
                .unwrap_or_else(|e| panic!("request {i}: {e}"));
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&body[..], b"Hello, world!", "request {i}");
        }
        let stats = client.stats();
        assert!(stats.connects >= 15, "{stats:?}");
        eprintln!("{stats:?}");
    })
    .await;
}

#[tokio::test]
async fn missing_socket_is_a_clear_connect_error() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let client = Client::new(
        Address::Unix("/nonexistent/levee/php-fpm.sock".into()),
        ClientConfig::default(),
    );
    let err = client
        .request(Params::new(), Empty::<Bytes>::new())
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "php-fpm socket /nonexistent/levee/php-fpm.sock does not exist: is php-fpm running? \
         check listen = in its pool config"
    );

    let client = Client::new(
        Address::Tcp(levee_test::ports::refused_addr().to_string()),
        ClientConfig::default(),
    );
    let err = client
        .request(Params::new(), Empty::<Bytes>::new())
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    assert!(err.to_string().contains("refused the connection"), "{err}");
}

#[tokio::test]
async fn an_http_server_is_not_php_fpm() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let origin = levee_test::Origin::fixed(|| levee_test::Reply::text("hi"));
    let client = Client::new(
        Address::Tcp(origin.addr().to_string()),
        ClientConfig::default(),
    );
    let params = Params::new().add("REQUEST_METHOD", "GET");
    let err = within(client.request(params, Empty::<Bytes>::new()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Protocol { .. }), "{err:?}");
    assert!(err.to_string().contains("not an HTTP server"), "{err}");
}

#[tokio::test]
async fn missing_script_is_php_fpms_404() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        let params = Params::new()
            .add("REQUEST_METHOD", "GET")
            .add(
                "SCRIPT_FILENAME",
                site.docroot().join("nope.php").to_str().unwrap(),
            )
            .add("SCRIPT_NAME", "/nope.php");
        let resp = client.request(params, Empty::<Bytes>::new()).await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"File not found.\n");
        // The static file next to it is routed, not sent to php.
        assert_eq!(
            route(site.docroot(), "/style.css", "index.php"),
            Route::Static(site.docroot().join("style.css"))
        );
    })
    .await;
}

/// Requests that must not be sent twice (here a POST) never go on a kept-alive
/// connection, which php-fpm may be closing: they get a new one.
#[tokio::test]
async fn posts_use_a_new_connection() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    within(async {
        get(&client, site.docroot(), "/hello.php").await;
        assert_eq!(client.stats().connects, 1);
        for i in 0..3 {
            let req = Request::post("/hello.php")
                .header("Content-Length", "3")
                .body(Full::new(Bytes::from_static(b"a=b")))
                .unwrap();
            let resp = send(&client, site.docroot(), req).await.unwrap();
            resp.into_body().collect().await.unwrap();
            assert_eq!(client.stats().connects, 2 + i, "{:?}", client.stats());
        }
        // The POST's connection, once clean, serves later GETs.
        get(&client, site.docroot(), "/hello.php").await;
        assert_eq!(client.stats().connects, 4);
    })
    .await;
}

/// A php-fpm worker stays attached to a kept-alive connection, so idle connections can
/// hold every worker while a new connection waits in the listen backlog. With a single
/// worker: a POST's new connection, and a second concurrent GET, must still be served
/// promptly (not after idle_timeout).
#[tokio::test]
async fn idle_connections_never_starve_new_ones() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let root = docroot();
    let fpm = PhpFpm::builder(&root.0).max_children(1).start();
    let client = Client::new(
        Address::Unix(fpm.socket_path().into()),
        ClientConfig {
            idle_timeout: Duration::from_secs(30),
            ..ClientConfig::default()
        },
    );
    let started = Instant::now();
    within(async {
        get(&client, &root.0, "/hello.php").await;
        assert_eq!(
            client.stats().idle,
            1,
            "the only worker now waits on the idle connection"
        );
        let req = Request::post("/hello.php")
            .header("Content-Length", "3")
            .body(Full::new(Bytes::from_static(b"a=b")))
            .unwrap();
        let resp = send(&client, &root.0, req).await.unwrap();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"Hello, world!");

        let (a, b) = tokio::join!(
            get(&client, &root.0, "/usleep.php"),
            get(&client, &root.0, "/usleep.php")
        );
        assert_eq!(a.1, b.1, "one worker served both");
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn max_idle_zero_closes_every_connection() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix_with(ClientConfig {
        max_idle: 0,
        ..ClientConfig::default()
    });
    within(async {
        for _ in 0..3 {
            let (_, body) = get(&client, site.docroot(), "/hello.php").await;
            assert_eq!(&body[..], b"Hello, world!");
        }
        let stats = client.stats();
        assert_eq!((stats.connects, stats.reused, stats.idle), (3, 0, 0));
    })
    .await;
}

/// `levee serve` runs one single-threaded runtime per worker thread, sharing the pool: a
/// connection kept by one worker and reused by another must move to the other's runtime,
/// whose reactor alone would otherwise never see it become readable while the first
/// worker is busy or gone.
#[test]
fn a_connection_kept_on_one_worker_thread_is_reused_from_another() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = site();
    let client = site.unix();
    let root = site.docroot().to_path_buf();
    let on_a_worker = |client: Client, root: PathBuf| {
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(within(async {
                let (parts, body) = get(&client, &root, "/hello.php").await;
                (parts.status, body)
            }))
        })
        .join()
        .unwrap()
    };
    let first = on_a_worker(client.clone(), root.clone());
    assert_eq!(first, (StatusCode::OK, Bytes::from("Hello, world!")));
    assert_eq!(client.stats().idle, 1, "{:?}", client.stats());
    // The first worker's runtime is gone; its connection waits in the pool.
    let second = on_a_worker(client.clone(), root);
    assert_eq!(second, (StatusCode::OK, Bytes::from("Hello, world!")));
    let stats = client.stats();
    assert_eq!((stats.connects, stats.reused), (1, 1), "{stats:?}");
}
