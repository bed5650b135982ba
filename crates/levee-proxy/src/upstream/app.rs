//! The app pool's transport: requests to levee's own application processes over
//! HTTP/1.1, on connections kept with each process (at most its concurrency over all
//! worker threads), the client's connection told in `x-levee-*` headers, a request
//! refused at connect handed back for another process.

use std::net::SocketAddr;
use std::time::Duration;

use http::header::{self, HeaderName, HeaderValue};
use http::{Request, Response};
use http_body::Body;
use hyper::body::Incoming;

use super::wire::{error_chain, UpBody, UpstreamError};
use crate::server::client::ConnInfo;

/// A kept-alive HTTP/1.1 connection to one app process, parked with the process (not
/// with a worker thread) between requests: a process gets at most `concurrency`
/// connections from all of levee's threads together.
struct AppConn {
    sender: hyper::client::conn::http1::SendRequest<UpBody>,
}

/// An app process's response body. When it has been read to its end the connection goes
/// back to the process, and only then is the process free for another request; a body
/// dropped before its end closes the connection instead.
pub struct AppBody {
    pub(super) body: Incoming,
    lease: Option<levee_app::Lease>,
    conn: Option<AppConn>,
    /// The response allows another request on its connection.
    reusable: bool,
}

impl AppBody {
    pub(super) fn finish(&mut self, complete: bool) {
        if let (Some(lease), Some(conn)) = (&self.lease, self.conn.take()) {
            if complete && self.reusable {
                lease.put_conn(Box::new(conn));
            }
        }
        self.lease.take();
    }
}

impl Drop for AppBody {
    fn drop(&mut self) {
        let complete = self.body.is_end_stream();
        self.finish(complete);
    }
}

/// Why one try at an app process failed.
pub(super) enum AppFailure {
    /// The process refused the connection (it exited, after a PHP exit() for one): the
    /// request, given back untouched, never reached the application, whatever its
    /// method, and may go to another process. The process is out of rotation.
    Refused(UpstreamError, Box<Request<UpBody>>),
    Other(UpstreamError),
}

impl AppFailure {
    pub(super) fn into_inner(self) -> UpstreamError {
        match self {
            AppFailure::Refused(e, _) | AppFailure::Other(e) => e,
        }
    }
}

/// Request headers levee sets for its app processes (runtime/levee-worker.php turns them
/// into REMOTE_ADDR, SERVER_PORT, HTTPS...). A client's own are removed first: only
/// levee speaks for the connection.
const APP_REMOTE: HeaderName = HeaderName::from_static("x-levee-remote");
const APP_LOCAL: HeaderName = HeaderName::from_static("x-levee-local");
const APP_SCHEME: HeaderName = HeaderName::from_static("x-levee-scheme");

/// One try on the least busy app process, on a connection kept with that process or a
/// new one. `backend` names the pool in errors.
pub(super) async fn send(
    pool: &levee_app::Pool,
    backend: &str,
    request_timeout: Duration,
    mut req: Request<UpBody>,
    conn: ConnInfo,
) -> Result<Response<AppBody>, AppFailure> {
    let lease = pool.lease().await.map_err(|e| {
        AppFailure::Other(UpstreamError::Connect {
            backend: backend.to_string(),
            detail: e.to_string(),
        })
    })?;
    app_request(&mut req, conn);
    let exchange = async {
        let mut sender = None;
        while let Some(kept) = lease.take_conn() {
            if let Ok(kept) = kept.downcast::<AppConn>() {
                let mut s = kept.sender;
                // Waits for the connection to be idle; fails if the process closed it.
                if s.ready().await.is_ok() {
                    sender = Some(s);
                    break;
                }
            }
        }
        let mut sender = match sender {
            Some(s) => s,
            None => match app_connect(backend, &lease).await {
                Ok(s) => s,
                Err(e) => return Err(AppFailure::Refused(e, Box::new(req))),
            },
        };
        match sender.send_request(req).await {
            Ok(resp) => Ok((resp, sender)),
            Err(e) => Err(AppFailure::Other(UpstreamError::Protocol {
                backend: backend.to_string(),
                detail: format!("app process {}: {}", lease.addr(), error_chain(&e)),
            })),
        }
    };
    // A process that does not answer in time is stuck (an endless loop, a lock):
    // kill it, a fresh one takes its place.
    match tokio::time::timeout(request_timeout, exchange).await {
        Ok(Ok((resp, sender))) => {
            let reusable = resp.version() == http::Version::HTTP_11
                && !resp.headers().get_all(header::CONNECTION).iter().any(|v| {
                    v.to_str()
                        .is_ok_and(|v| v.to_ascii_lowercase().contains("close"))
                });
            Ok(resp.map(|body| AppBody {
                body,
                lease: Some(lease),
                conn: Some(AppConn { sender }),
                reusable,
            }))
        }
        Ok(Err(AppFailure::Refused(e, req))) => {
            lease.refused();
            Err(AppFailure::Refused(e, req))
        }
        Ok(Err(e)) => Err(e),
        Err(_) => {
            lease.kill();
            Err(AppFailure::Other(UpstreamError::Timeout {
                backend: backend.to_string(),
                timeout: request_timeout,
            }))
        }
    }
}

/// A new connection to the leased process, driven by this thread's runtime.
async fn app_connect(
    backend: &str,
    lease: &levee_app::Lease,
) -> Result<hyper::client::conn::http1::SendRequest<UpBody>, UpstreamError> {
    let refused = |detail: String| UpstreamError::Connect {
        backend: backend.to_string(),
        detail,
    };
    let stream = tokio::net::TcpStream::connect(lease.addr())
        .await
        .map_err(|e| refused(format!("app process {}: {e}", lease.addr())))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| refused(format!("app process {}: {e}", lease.addr())))?;
    tokio::spawn(async move {
        // Ends when the process closes it, or when levee drops the sender.
        let _ = connection.with_upgrades().await;
    });
    Ok(sender)
}

/// The request as an app process gets it: origin-form, a `Host`, and levee's word on the
/// client's connection in place of anything the client said about it.
fn app_request(req: &mut Request<UpBody>, conn: ConnInfo) {
    if !req.headers().contains_key(header::HOST) {
        if let Some(host) = req
            .uri()
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        {
            req.headers_mut().insert(header::HOST, host);
        }
    }
    let pq = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    if let Ok(uri) = http::Uri::try_from(pq) {
        *req.uri_mut() = uri;
    }
    *req.version_mut() = http::Version::HTTP_11;
    let h = req.headers_mut();
    let theirs: Vec<HeaderName> = h
        .keys()
        .filter(|n| n.as_str().starts_with("x-levee-"))
        .cloned()
        .collect();
    for n in theirs {
        h.remove(n);
    }
    let addr = |a: SocketAddr| {
        HeaderValue::from_str(&SocketAddr::new(a.ip().to_canonical(), a.port()).to_string())
    };
    if let Ok(v) = addr(conn.peer) {
        h.insert(APP_REMOTE, v);
    }
    if let Ok(v) = addr(conn.local) {
        h.insert(APP_LOCAL, v);
    }
    h.insert(
        APP_SCHEME,
        HeaderValue::from_static(if conn.tls { "https" } else { "http" }),
    );
}

/// The app pool, from a site's `[app]` settings.
pub(crate) fn app_config(a: &levee_config::AppSettings) -> levee_app::AppConfig {
    levee_app::AppConfig {
        command: a.command.clone(),
        processes: a.processes,
        concurrency: a.concurrency,
        ready_timeout: a.ready_timeout,
        max_requests: a.max_requests,
        max_memory: a.max_memory,
        max_age: a.max_age,
        drain_timeout: a.request_timeout,
        watch: a.watch.clone(),
        cwd: a.cwd.clone(),
        env: a.env.clone(),
    }
}
