//! Over real HTTP/1.1: a hyper server on 127.0.0.1:0 answering from `StaticFiles`, and a
//! raw TCP client, so request lines are sent exactly as written (no client-side path
//! normalisation) and responses are seen exactly as hyper frames them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;

use http::{Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use levee_static::{FileBody, Outcome, StaticFiles};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use common::*;

/// What a caller does with the outcomes; PHP answers 502 here, there is no PHP-FPM.
async fn handle(
    files: StaticFiles,
    req: http::Request<Incoming>,
) -> Result<Response<FileBody>, Infallible> {
    let (parts, _body) = req.into_parts();
    let status = match files.serve(&parts).await {
        Outcome::Response(r) => return Ok(r),
        Outcome::NotFound => StatusCode::NOT_FOUND,
        Outcome::Forbidden => StatusCode::FORBIDDEN,
        Outcome::Php { .. } => StatusCode::BAD_GATEWAY,
    };
    let mut r = Response::new(FileBody::empty());
    *r.status_mut() = status;
    Ok(r)
}

async fn serve(files: StaticFiles) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let files = files.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| handle(files.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

struct Raw {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Sends `request_line` plus headers with `Connection: close` and reads to the end.
async fn raw(addr: SocketAddr, request_line: &str, headers: &[&str]) -> Raw {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{request_line}\r\nHost: test\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(out[..split].to_vec()).unwrap();
    let status = head[9..12].parse().unwrap();
    Raw {
        status,
        head,
        body: out[split + 4..].to_vec(),
    }
}

#[tokio::test]
async fn traversal_over_the_wire_never_reaches_the_secret() {
    let s = site();
    let addr = serve(s.files.clone()).await;
    for target in [
        "/../secret.txt",
        "/../../../../etc/passwd",
        "/%2e%2e/secret.txt",
        "/a/%2e%2e/%2e%2e/secret.txt",
        "/..%2f..%2fsecret.txt",
        "/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/style.css%00",
        "/..\\secret.txt",
        "/%5c..%5csecret.txt",
        "/leak.txt",
        "/etc-link/passwd",
    ] {
        let r = raw(addr, &format!("GET {target} HTTP/1.1"), &[]).await;
        // 403 from us, or 400 if hyper refused the request line first.
        assert!(matches!(r.status, 400 | 403), "{target}: {}", r.head);
        assert!(
            !String::from_utf8_lossy(&r.body).contains("secret"),
            "{target}"
        );
    }
    let r = raw(addr, "GET /wp-config.php HTTP/1.1", &[]).await;
    assert_eq!(r.status, 502, "PHP goes to the caller's PHP backend");
    assert!(!String::from_utf8_lossy(&r.body).contains("DB_PASSWORD"));
}

#[tokio::test]
async fn head_over_the_wire_has_the_full_length_and_no_body() {
    let s = site();
    let addr = serve(s.files.clone()).await;
    let r = raw(addr, "HEAD /style.css HTTP/1.1", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("22"));
    assert_eq!(r.header("etag"), Some("\"6553f100-16\""));
    assert!(r.body.is_empty());
    assert!(r.header("date").is_some(), "hyper adds Date");
}

#[tokio::test]
async fn not_modified_over_the_wire_has_no_body() {
    let s = site();
    let addr = serve(s.files.clone()).await;
    let r = raw(
        addr,
        "GET /style.css HTTP/1.1",
        &["If-None-Match: \"6553f100-16\""],
    )
    .await;
    assert_eq!(r.status, 304, "{}", r.head);
    assert_eq!(r.header("etag"), Some("\"6553f100-16\""));
    assert!(r.body.is_empty());
}

#[tokio::test]
async fn a_big_file_over_the_wire_arrives_intact() {
    let s = site();
    let data = pattern(6 * 1024 * 1024 + 7);
    write(&s.root().join("archive.pdf"), &data);
    let addr = serve(s.files.clone()).await;
    let r = raw(addr, "GET /archive.pdf HTTP/1.1", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-length"),
        Some(data.len().to_string().as_str())
    );
    assert!(r.body == data, "the body differs from the file");

    let r = raw(
        addr,
        "GET /archive.pdf HTTP/1.1",
        &["Range: bytes=4194304-"],
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 4194304-{}/{}", data.len() - 1, data.len()).as_str())
    );
    assert!(r.body[..] == data[4_194_304..]);
}

#[tokio::test]
async fn a_directory_redirect_over_the_wire() {
    let s = site();
    let addr = serve(s.files.clone()).await;
    let r = raw(addr, "GET /blog?x=1 HTTP/1.1", &[]).await;
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/blog/?x=1"));
    let r = raw(addr, "GET /blog/ HTTP/1.1", &[]).await;
    assert_eq!(r.body, b"<h1>blog</h1>");
}
