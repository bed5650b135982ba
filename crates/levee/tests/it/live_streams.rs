//! Server-sent events and other live streams through levee (issue 44): each event as it
//! is sent, never compressed nor stored, pauses between events not taken for a stuck
//! backend, and no backend slot held by a stream from an HTTP server; from an HTTP
//! server, from php-fpm, from an app process, over HTTPS and HTTP/2.

use std::time::Duration;

use levee_test::{levee, Origin, Reply};
use tokio::net::TcpStream;

use super::websockets::{https_for, tls_client, WAIT};

/// Server-sent events from an HTTP server: each event reaches the client as it is sent,
/// pauses longer than `backend_read_timeout` are not taken for a stuck backend, and an
/// open stream holds no slot of the backend limit (requests go on beside it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_pass_as_they_come_and_hold_no_backend_slot() {
    use http_body_util::BodyExt;
    let events = |n: usize, pause: Duration| {
        (0..n)
            .map(|i| (pause, bytes::Bytes::from(format!("data: event {i}\n\n"))))
            .collect::<Vec<_>>()
    };
    let origin = Origin::start(move |r| match r.uri.as_str() {
        "/events" => Reply::ok()
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .chunks(events(3, Duration::from_millis(1500))),
        _ => Reply::text("a page").header("cache-control", "no-store"),
    });
    let levee = levee!()
        .backend(&origin.url())
        .config(
            "[limits]\nbackend_max_concurrency = 1\nbackend_read_timeout = \"1s\"\n\
             backend_queue_timeout = \"1s\"\n",
        )
        .start();
    let resp = levee_test::Req::get("/events")
        .header("accept", "text/event-stream")
        .header("accept-encoding", "gzip, br")
        .send_streaming(levee.addr())
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers().get("content-encoding"),
        None,
        "never compressed"
    );
    let mut body = resp.into_body();
    // The first event arrives alone, before the next is even sent.
    let first = tokio::time::timeout(WAIT, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .into_data()
        .unwrap();
    assert_eq!(&first[..], b"data: event 0\n\n");
    // The stream is open, the backend limit is 1: a page is still served at once.
    let page = levee.get("/page").await;
    assert_eq!((page.status.as_u16(), page.text()), (200, "a page".into()));
    // The rest of the events, 1.5 s apart (beyond the 1 s read timeout), all of them.
    let mut rest = Vec::new();
    while let Some(frame) = tokio::time::timeout(WAIT, body.frame()).await.unwrap() {
        rest.extend_from_slice(&frame.unwrap().into_data().unwrap_or_default());
    }
    assert_eq!(
        String::from_utf8(rest).unwrap(),
        "data: event 1\n\ndata: event 2\n\n"
    );
}

/// An event stream from PHP (real php-fpm): each event as PHP flushes it, and a pause
/// longer than `backend_read_timeout` between two is not taken for a stuck php-fpm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_php_event_stream_passes_as_it_comes_and_may_pause() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("events.php"),
        "<?php header('Content-Type: text/event-stream'); header('Cache-Control: no-cache');\n\
         while (ob_get_level()) { ob_end_flush(); }\n\
         echo \"data: one\\n\\n\"; flush(); sleep(2); echo \"data: two\\n\\n\"; flush();\n",
    )
    .unwrap();
    let php = levee_test::PhpFpm::start(root.path());
    let levee = levee!()
        .backend(&format!("fastcgi+unix:{}", php.socket_path().display()))
        .args(&["--root", &root.path().display().to_string()])
        .config("[limits]\nbackend_read_timeout = \"1s\"\n")
        .start();
    let resp = levee_test::Req::get("/events.php")
        .send_streaming(levee.addr())
        .await;
    assert_eq!(resp.status(), 200);
    one_then_after_a_pause_two(resp.into_body()).await;
}

/// Server-sent events over HTTPS and HTTP/2: each event as it is sent, the pauses beyond
/// `backend_read_timeout` kept, never compressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_over_tls_and_http2() {
    use http_body_util::BodyExt;
    let origin = Origin::start(|_| {
        Reply::ok()
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .chunks(vec![
                (Duration::ZERO, bytes::Bytes::from("data: one\n\n")),
                (
                    Duration::from_millis(1500),
                    bytes::Bytes::from("data: two\n\n"),
                ),
            ])
    });
    let dir = tempfile::tempdir().unwrap();
    let (cert, tls_config) = https_for(dir.path(), "sse.levee.test");
    let levee = levee!()
        .backend(&origin.url())
        .config(&format!(
            "{tls_config}[limits]\nbackend_read_timeout = \"1s\"\n"
        ))
        .start();
    let addr = levee.tls_addr().await;
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("sse.levee.test").unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = tls_client(cert.der(), b"h2")
        .connect(name, tcp)
        .await
        .unwrap();
    let (mut send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .uri(format!("https://sse.levee.test:{}/events", addr.port()))
        .header("accept-encoding", "gzip, br, zstd")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(
        resp.headers().get("content-encoding"),
        None,
        "never compressed"
    );
    let mut body = resp.into_body();
    let first = tokio::time::timeout(Duration::from_millis(1200), body.frame())
        .await
        .expect("the first event before the second is sent")
        .unwrap()
        .unwrap()
        .into_data()
        .unwrap();
    assert_eq!(&first[..], b"data: one\n\n");
    let mut rest = Vec::new();
    while let Some(frame) = tokio::time::timeout(WAIT, body.frame()).await.unwrap() {
        rest.extend_from_slice(
            &frame
                .expect("not cut by the read timeout")
                .into_data()
                .unwrap_or_default(),
        );
    }
    assert_eq!(String::from_utf8(rest).unwrap(), "data: two\n\n");
}

/// An event stream from an app process levee starts (`--app`, Python's own HTTP server
/// here, as a Node or Mercure process would be): each event as it is written, a pause
/// longer than `backend_read_timeout` kept, never compressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_process_event_stream_passes_as_it_comes_and_may_pause() {
    levee_test::require!(levee_test::tools::PYTHON3);
    const SCRIPT: &str = r#"
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"data: one\n\n"); self.wfile.flush()
        time.sleep(2)
        self.wfile.write(b"data: two\n\n"); self.wfile.flush()
        self.close_connection = True
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("events.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let levee = levee!()
        .args(&[
            "--app",
            &format!("python3 {} {{port}}", script.display()),
            "--app-processes",
            "1",
        ])
        .config("[limits]\nbackend_read_timeout = \"1s\"\n")
        .start();
    let resp = levee_test::Req::get("/events")
        .header("accept-encoding", "gzip, br")
        .send_streaming(levee.addr())
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers().get("content-encoding"), None);
    one_then_after_a_pause_two(resp.into_body()).await;
}

/// Reads an event stream that sends `data: one`, pauses 2 s (past a 1 s
/// `backend_read_timeout`), then sends `data: two` and ends: the first event must arrive
/// before the pause ends, and the rest must not be cut by the read timeout.
async fn one_then_after_a_pause_two(mut body: hyper::body::Incoming) {
    use http_body_util::BodyExt;
    let first = tokio::time::timeout(Duration::from_millis(1500), body.frame())
        .await
        .expect("the first event came before the pause ended")
        .unwrap()
        .unwrap()
        .into_data()
        .unwrap();
    assert_eq!(&first[..], b"data: one\n\n");
    let mut rest = Vec::new();
    while let Some(frame) = tokio::time::timeout(WAIT, body.frame()).await.unwrap() {
        rest.extend_from_slice(
            &frame
                .expect("not cut by the read timeout")
                .into_data()
                .unwrap_or_default(),
        );
    }
    assert_eq!(String::from_utf8(rest).unwrap(), "data: two\n\n");
}
