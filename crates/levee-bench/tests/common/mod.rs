//! Real servers on 127.0.0.1:0 for the bench tests: a small hyper server (HTTP/1.1 and
//! h2c), a server that accepts and never answers, and a closed port.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Either, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use levee_bench::BenchCommand;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub version: http::Version,
    pub body: Vec<u8>,
    pub content_type: Option<String>,
    pub cookie: Option<String>,
    pub x_test: Option<String>,
}

/// Counters and a log shared with the server.
#[derive(Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub connections: AtomicU64,
    pub log: Mutex<Vec<Seen>>,
}

/// A running test server; lives until the test process ends.
pub struct Server {
    pub addr: SocketAddr,
    pub stats: Arc<Stats>,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn requests(&self) -> u64 {
        self.stats.requests.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.stats.log.lock().unwrap().clone()
    }
}

type Body = Either<
    Full<Bytes>,
    StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>,
>;

async fn handle(
    req: Request<Incoming>,
    stats: Arc<Stats>,
    log: bool,
) -> Result<Response<Body>, Infallible> {
    stats.requests.fetch_add(1, Ordering::SeqCst);
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let version = req.version();
    let header = |n: &str| {
        req.headers()
            .get(n)
            .map(|v| v.to_str().unwrap_or("").to_string())
    };
    let content_type = header("content-type");
    let cookie = header("cookie");
    let x_test = header("x-test");
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    if log {
        stats.log.lock().unwrap().push(Seen {
            method,
            path: path.clone(),
            version,
            body,
            content_type,
            cookie,
            x_test,
        });
    }
    let resp = match path.as_str() {
        "/status/404" => Response::builder()
            .status(404)
            .body(Either::Left(Full::new(Bytes::from_static(b"not found")))),
        "/status/503" => Response::builder()
            .status(503)
            .body(Either::Left(Full::new(Bytes::from_static(b"busy")))),
        "/chunked" => {
            let frames: Vec<Result<Frame<Bytes>, Infallible>> = (0..5)
                .map(|i| Ok(Frame::data(Bytes::from(format!("chunk number {i}\n")))))
                .collect();
            Response::builder().body(Either::Right(StreamBody::new(futures_util::stream::iter(
                frames,
            ))))
        }
        _ => Response::builder()
            .header("server", "levee-test")
            .body(Either::Left(Full::new(Bytes::from(vec![b'x'; 1024])))),
    };
    Ok(resp.unwrap())
}

/// Starts the hyper server (HTTP/1.1 keep-alive and h2c prior knowledge). With `log`,
/// every request is recorded (keep it off for throughput-heavy tests).
pub fn server(log: bool) -> Server {
    let std = StdListener::bind("127.0.0.1:0").unwrap();
    std.set_nonblocking(true).unwrap();
    let addr = std.local_addr().unwrap();
    let stats = Arc::new(Stats::default());
    let st = stats.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                st.connections.fetch_add(1, Ordering::SeqCst);
                let st = st.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| handle(req, st.clone(), log));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    });
    Server { addr, stats }
}

/// A server that accepts connections and never answers (holds them open).
pub fn stalled_server() -> SocketAddr {
    let listener = StdListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
            if held.len() > 10_000 {
                break;
            }
        }
        // Holds the accepted connections open, never answering, until the test ends.
        loop {
            std::thread::park();
        }
    });
    addr
}

/// A loopback port with nothing listening: connects are refused.
pub fn closed_port() -> SocketAddr {
    levee_test::ports::refused_addr()
}

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Top,
}

#[derive(clap::Subcommand)]
enum Top {
    Bench(BenchCommand),
}

/// Parses `levee bench ARGS...` exactly as the binary does.
pub fn parse(args: &[&str]) -> Result<BenchCommand, clap::Error> {
    let mut all = vec!["levee", "bench"];
    all.extend_from_slice(args);
    Cli::try_parse_from(all).map(|c| match c.cmd {
        Top::Bench(b) => b,
    })
}

/// Parses and runs, returning the report; panics on CLI or run errors.
pub fn bench(args: &[&str]) -> (std::process::ExitCode, levee_bench::Report) {
    let cmd = parse(args).unwrap_or_else(|e| panic!("bad args {args:?}: {e}"));
    let (code, report) = levee_bench::execute(cmd).unwrap();
    (code, report.expect("a run returns a report"))
}

/// A fresh temporary directory.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "levee-bench-test-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}
