//! A real origin server whose behaviour the test controls precisely.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// One request as the origin received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// 1 for the first request this origin received, 2 for the second, ...
    pub n: usize,
    pub method: Method,
    /// Path and query, as in the request line.
    pub uri: String,
    pub path: String,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Recorded {
    /// The first value of `name`, if it is present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Every value of `name`, joined with ", ".
    pub fn header_joined(&self, name: &str) -> Option<String> {
        let values: Vec<&str> = self
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        (!values.is_empty()).then(|| values.join(", "))
    }

    /// The value of the cookie `name` in the request's `Cookie` header(s).
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|s| s.split(';'))
            .find_map(|pair| {
                let (n, v) = pair.split_once('=')?;
                (n.trim() == name).then(|| v.trim().to_string())
            })
    }
}

enum ReplyBody {
    Full(Bytes),
    /// Each chunk is sent after its delay.
    Chunks(Vec<(Duration, Bytes)>),
}

/// What the origin answers to one request.
pub struct Reply {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: ReplyBody,
    delay: Duration,
}

impl Reply {
    /// `200 OK` with an empty body.
    pub fn ok() -> Reply {
        Reply::status(200)
    }

    pub fn status(code: u16) -> Reply {
        Reply {
            status: StatusCode::from_u16(code).expect("valid status code"),
            headers: Vec::new(),
            body: ReplyBody::Full(Bytes::new()),
            delay: Duration::ZERO,
        }
    }

    /// `200 OK` with this body.
    pub fn text(body: impl Into<Bytes>) -> Reply {
        Reply::ok().body(body)
    }

    /// Adds a header line (repeatable, e.g. for several `Set-Cookie`).
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((
            HeaderName::from_bytes(name.as_bytes()).expect("valid header name"),
            HeaderValue::from_str(value).expect("valid header value"),
        ));
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Reply {
        self.body = ReplyBody::Full(body.into());
        self
    }

    /// A body sent piece by piece, each piece after its delay.
    pub fn chunks(mut self, chunks: Vec<(Duration, Bytes)>) -> Reply {
        self.body = ReplyBody::Chunks(chunks);
        self
    }

    /// Waits this long before sending the response head.
    pub fn delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// Never answers (well, not within any test).
    pub fn hang(self) -> Reply {
        self.delay(Duration::from_secs(3600))
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

struct State {
    handler: Box<Handler>,
    recorded: Mutex<Vec<Recorded>>,
    count: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    connections: AtomicUsize,
    /// How far this origin's clock (its `Date` fields) runs ahead of the real one, in
    /// milliseconds: moved with levee's by `Origin::advance_clock`.
    clock_ahead_ms: AtomicU64,
}

/// Counts a request as in flight from its arrival until its response body is dropped
/// (sent completely, or abandoned).
struct InFlight(Arc<State>);

impl InFlight {
    fn enter(state: Arc<State>) -> InFlight {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(state)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

enum Kind {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Bytes>),
}

struct OriginBody {
    kind: Kind,
    _in_flight: InFlight,
}

impl Body for OriginBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.get_mut().kind {
            Kind::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Kind::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(&self.kind, Kind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Stream(_) => SizeHint::default(),
        }
    }
}

/// A running origin on `127.0.0.1:<ephemeral>`, in its own thread and runtime so that it
/// keeps answering whatever the test's runtime is doing. Stopped when dropped.
pub struct Origin {
    addr: SocketAddr,
    state: Arc<State>,
    running: Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
}

impl Origin {
    /// Starts an origin answering every request with `handler`'s reply.
    pub fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Origin {
        Origin::start_on("127.0.0.1:0".parse().expect("an address"), handler)
    }

    /// [`Origin::start`] on `addr`: a server that was stopped comes back where it was.
    pub fn start_on(
        addr: SocketAddr,
        handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> Origin {
        let state = Arc::new(State {
            handler: Box::new(handler),
            recorded: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            clock_ahead_ms: AtomicU64::new(0),
        });
        let std_listener = std::net::TcpListener::bind(addr).expect("bind the origin's port");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("local addr");
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread_state = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("origin-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .expect("origin runtime");
                rt.block_on(async move {
                    let listener = TcpListener::from_std(std_listener).expect("tokio listener");
                    tokio::select! {
                        _ = accept_loop(listener, thread_state) => {}
                        _ = stop_rx => {}
                    }
                });
                // Dropping the runtime cancels every connection task: sockets close.
                rt.shutdown_timeout(Duration::from_millis(100));
            })
            .expect("spawn origin thread");
        Origin {
            addr,
            state,
            running: Mutex::new(Some((stop_tx, thread))),
        }
    }

    /// Moves this origin's clock forward: the `Date` of its replies (unless a reply sets
    /// one) is that much later, as levee's is after `Levee::advance_clock`. Without it a
    /// response stored after levee's clock moved would look `by` old on arrival
    /// (RFC 9111 §4.2.3's apparent age).
    pub fn advance_clock(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.state.clock_ahead_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Every request gets the same reply, built fresh each time.
    pub fn fixed(reply: impl Fn() -> Reply + Send + Sync + 'static) -> Origin {
        Origin::start(move |_| reply())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, as `--backend` wants it.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.state.count.load(Ordering::SeqCst)
    }

    /// Requests received so far whose path (without query) is `path`.
    pub fn requests_for(&self, path: &str) -> usize {
        self.recorded().iter().filter(|r| r.path == path).count()
    }

    /// Every request received so far, in arrival order.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.state.recorded.lock().unwrap().clone()
    }

    /// The most recent request.
    pub fn last(&self) -> Recorded {
        self.recorded()
            .pop()
            .expect("the origin has received no request")
    }

    /// The most requests that were in flight at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    pub fn in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::SeqCst)
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Forgets the requests recorded and the concurrency peak so far.
    pub fn reset(&self) {
        self.state.recorded.lock().unwrap().clear();
        self.state.count.store(0, Ordering::SeqCst);
        self.state.max_in_flight.store(
            self.state.in_flight.load(Ordering::SeqCst),
            Ordering::SeqCst,
        );
    }

    /// Stops listening and closes every connection: the backend is down. Idempotent.
    pub fn stop(&self) {
        let running = self.running.lock().unwrap().take();
        if let Some((tx, thread)) = running {
            let _ = tx.send(());
            let _ = thread.join();
        }
    }

    /// Waits until the origin has received at least `n` requests.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) {
        let ok = crate::wait::eventually(timeout, || self.requests() >= n).await;
        assert!(
            ok,
            "the origin received {} requests, expected at least {n} within {timeout:?}",
            self.requests()
        );
    }

    /// A backend URL on which nothing listens (connections are refused).
    pub fn refusing_url() -> String {
        format!("http://{}", crate::ports::refused_addr())
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        state.connections.fetch_add(1, Ordering::SeqCst);
        let state = state.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| respond(req, state.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn respond(
    req: Request<Incoming>,
    state: Arc<State>,
) -> Result<Response<OriginBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let in_flight = InFlight::enter(state.clone());
    let n = state.count.fetch_add(1, Ordering::SeqCst) + 1;
    let rec = Recorded {
        n,
        method: parts.method,
        uri: parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string(),
        path: parts.uri.path().to_string(),
        version: parts.version,
        headers: parts.headers,
        body,
    };
    state.recorded.lock().unwrap().push(rec.clone());
    let reply = (state.handler)(&rec);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let kind = match reply.body {
        ReplyBody::Full(b) => Kind::Full(Some(b)),
        ReplyBody::Chunks(chunks) => {
            let (tx, rx) = mpsc::channel(4);
            tokio::spawn(async move {
                for (delay, chunk) in chunks {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    if tx.send(chunk).await.is_err() {
                        return;
                    }
                }
            });
            Kind::Stream(rx)
        }
    };
    let mut resp = Response::new(OriginBody {
        kind,
        _in_flight: in_flight,
    });
    *resp.status_mut() = reply.status;
    for (k, v) in reply.headers {
        resp.headers_mut().append(k, v);
    }
    if !resp.headers().contains_key(http::header::DATE) {
        let ahead = Duration::from_millis(state.clock_ahead_ms.load(Ordering::SeqCst));
        let date = httpdate::fmt_http_date(std::time::SystemTime::now() + ahead);
        if let Ok(v) = http::HeaderValue::from_str(&date) {
            resp.headers_mut().insert(http::header::DATE, v);
        }
    }
    Ok(resp)
}
