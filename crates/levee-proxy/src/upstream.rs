//! The backend: a pooled keep-alive HTTP/1.1 client or a FastCGI client (php-fpm), and
//! the overload limiter that guarantees the backend never sees more than its configured
//! concurrency.

use std::path::PathBuf;
use std::pin::Pin;

use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use levee_config::{Backend, BackendLimit, FastCgiAddress, Settings};
use levee_fastcgi::{CgiRequest, Params, Route};
use levee_limits::{BackendSlot, Class, LaneConfig, Limiter, Mode, Refusal};

mod app;
mod servers;
mod wire;

pub(crate) use app::app_config;
pub use app::AppBody;
use app::AppFailure;
use servers::{ServerGuard, Servers};
use wire::error_chain;
pub use wire::{BoxError, ClientBodyError, UpBody, UpstreamError};

use crate::server::client::ConnInfo;

/// A backend response body: from an HTTP backend, from php-fpm, or made by levee when the
/// request never reached the application (404 for a missing script, 403, 405).
pub enum BackendBody {
    /// With its server's hold, which counts the request as outstanding on that server
    /// until the body ends or is dropped.
    Http {
        body: Incoming,
        _server: ServerGuard,
    },
    /// From a process of the app pool, which stays leased to this request until the body
    /// has ended (or is dropped).
    App(AppBody),
    FastCgi(levee_fastcgi::ResponseBody),
    Local(Option<Bytes>),
}

impl BackendBody {
    /// Lets the body pause up to `pause` between two reads where the backend's client
    /// has a read timeout of its own (FastCGI); the other bodies' pauses are bounded by
    /// whoever reads them.
    pub fn allow_pauses(&mut self, pause: Duration) {
        if let BackendBody::FastCgi(b) = self {
            b.allow_pauses(pause);
        }
    }
}

impl Body for BackendBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            BackendBody::Http { body: b, .. } => Pin::new(b)
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map_err(|e| Box::new(e) as BoxError))),
            BackendBody::App(app) => {
                let frame = Pin::new(&mut app.body)
                    .poll_frame(cx)
                    .map(|o| o.map(|r| r.map_err(|e| Box::new(e) as BoxError)));
                match frame {
                    Poll::Ready(None) => app.finish(true),
                    Poll::Ready(Some(Err(_))) => app.finish(false),
                    _ => {}
                }
                frame
            }
            BackendBody::FastCgi(b) => Pin::new(b)
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map_err(|e| Box::new(e) as BoxError))),
            BackendBody::Local(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            BackendBody::Http { body: b, .. } => b.is_end_stream(),
            BackendBody::App(app) => app.body.is_end_stream(),
            BackendBody::FastCgi(b) => b.is_end_stream(),
            BackendBody::Local(b) => b.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            BackendBody::Http { body: b, .. } => b.size_hint(),
            BackendBody::App(app) => app.body.size_hint(),
            BackendBody::FastCgi(b) => b.size_hint(),
            BackendBody::Local(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}

// One per process: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
enum Transport {
    Http {
        /// One pool per worker thread (`levee serve`'s workers, see server.rs): a pooled
        /// connection is driven by a task on the runtime that opened it, so sharing one
        /// pool would send every request across threads.
        clients: Vec<Client<HttpConnector, UpBody>>,
        servers: std::sync::Arc<Servers>,
    },
    FastCgi {
        client: levee_fastcgi::Client,
        root: PathBuf,
        index: String,
        /// Recent routing decisions (path → script), like nginx's open_file_cache: a
        /// front controller's every pretty URL would otherwise cost a few stat calls on
        /// the blocking pool, two thread switches per request.
        routes: moka::sync::Cache<String, Route>,
        /// `[fastcgi] params`: set on every request, over levee's own.
        params: Vec<(String, String)>,
    },
    /// levee's own application processes (levee-app), spoken to over HTTP/1.1 on
    /// connections kept with each process (`AppConn`).
    App {
        pool: levee_app::Pool,
        request_timeout: Duration,
    },
}

/// How long a routing decision is trusted: a new or deleted script shows up within it.
const ROUTE_TTL: Duration = Duration::from_secs(1);
/// Paths whose FastCGI route is remembered, at most.
const ROUTES_KEPT: u64 = 10_000;
/// An idle kept-alive HTTP connection to the backend is closed after this long; one the
/// backend closes first is dropped from the pool when its close arrives.
const BACKEND_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The backend connection pool and its limits.
pub struct Upstream {
    transport: Transport,
    backend_name: String,
    pub limiter: Limiter,
    limit_source: String,
    first_byte_timeout: Duration,
}

/// An adaptive limit starts here and moves within these bounds.
const ADAPTIVE_INITIAL: usize = 16;
const ADAPTIVE_MIN: usize = 2;
const ADAPTIVE_MAX: usize = 256;

/// Why the backend cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    App(#[from] levee_app::AppError),
    #[error("[fastcgi] pool_config: {0}")]
    FpmPool(String),
}

impl Upstream {
    /// Fails when the app pool's thread cannot start, or when the php-fpm
    /// configuration levee was given has no pool on the backend's address.
    /// `backend`: the site's, or one of its routes' (`health` with it).
    pub fn new(
        settings: &Settings,
        site: &levee_config::Site,
        backend: &Backend,
        health: Option<&str>,
    ) -> Result<Upstream, StartError> {
        let l = &settings.limits;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(l.backend_connect_timeout));
        connector.set_nodelay(true);
        let fixed = match l.backend_max_concurrency {
            BackendLimit::Fixed(n) => Some(n),
            BackendLimit::Auto => None,
        };
        // Idle connections worth keeping: as many as may be busy at once.
        let idle_per_host = fixed.unwrap_or(ADAPTIVE_MAX);
        let http_clients = || -> Vec<Client<HttpConnector, UpBody>> {
            (0..settings.workers.max(1))
                .map(|_| {
                    Client::builder(TokioExecutor::new())
                        .pool_idle_timeout(BACKEND_IDLE_TIMEOUT)
                        .pool_max_idle_per_host(idle_per_host)
                        .build(connector.clone())
                })
                .collect()
        };
        let adaptive = Mode::Adaptive {
            initial: ADAPTIVE_INITIAL,
            min: ADAPTIVE_MIN,
            max: ADAPTIVE_MAX,
        };
        let mut mode = fixed.map_or(adaptive, Mode::Fixed);
        let mut limit_source = match fixed {
            Some(_) => "backend_max_concurrency".to_string(),
            None => "adapted to the backend's latency".to_string(),
        };
        let transport = match backend {
            Backend::Http { servers } => {
                let servers = Servers::new(servers);
                if let Some(path) = health {
                    // The site's first plain name as the Host (a pattern is no host).
                    let host = site.hosts.iter().find(|h| !h.starts_with('*')).cloned();
                    servers::start_checks(&servers, path.to_string(), host);
                }
                Transport::Http {
                    clients: http_clients(),
                    servers,
                }
            }
            Backend::App(a) => {
                // More requests than the processes can take at once wait in levee's
                // bounded queue, where they can be shed, not in the pool.
                let capacity = a.processes.saturating_mul(a.concurrency).max(1);
                mode = Mode::Fixed(fixed.map_or(capacity, |n| n.min(capacity)));
                limit_source = "the app pool's processes x concurrency".into();
                Transport::App {
                    pool: levee_app::Pool::start(app_config(a))?,
                    request_timeout: a.request_timeout,
                }
            }
            Backend::FastCgi(addr) => {
                let address = match addr {
                    FastCgiAddress::Tcp(a) => levee_fastcgi::Address::Tcp(a.clone()),
                    FastCgiAddress::Unix(p) => levee_fastcgi::Address::Unix(p.clone()),
                };
                let mut max_idle = site.fastcgi.keep_alive;
                let mut within_pool_size = false;
                if fixed.is_none() {
                    // php-fpm serves pm.max_children connections at once; one more
                    // waits in its listen backlog, where it can be neither seen nor
                    // shed, and makes php-fpm close a kept-alive connection. So: that
                    // many, all kept alive, and the rest wait in levee's queue.
                    let found = levee_fastcgi::pool::discover(
                        &address,
                        site.fastcgi.pool_config.as_deref(),
                    )
                    .map_err(StartError::FpmPool)?;
                    match found {
                        Some(p) => {
                            mode = Mode::Fixed(p.max_children);
                            max_idle = max_idle.max(p.max_children);
                            within_pool_size = true;
                            limit_source = format!(
                                "pm.max_children of php-fpm's pool [{}] in {}",
                                p.name,
                                p.file.display()
                            );
                        }
                        None => {
                            eprintln!("levee: found no php-fpm configuration with a pool listening on {address}: the backend limit adapts to its latency; set [fastcgi] pool_config, or [limits] backend_max_concurrency to pm.max_children");
                        }
                    }
                }
                let config = levee_fastcgi::ClientConfig {
                    connect_timeout: l.backend_connect_timeout,
                    read_timeout: l.backend_read_timeout,
                    write_timeout: l.backend_read_timeout,
                    max_idle,
                    max_unsized_body: site.fastcgi.max_unsized_body,
                    within_pool_size,
                    ..levee_fastcgi::ClientConfig::default()
                };
                Transport::FastCgi {
                    client: levee_fastcgi::Client::new(address, config),
                    // Resolve already checked that a FastCGI backend has a root.
                    root: site.root.clone().unwrap_or_default(),
                    index: site.fastcgi.index.clone(),
                    params: site.fastcgi.params.clone(),
                    routes: moka::sync::Cache::builder()
                        .max_capacity(ROUTES_KEPT)
                        .time_to_live(ROUTE_TTL)
                        .build(),
                }
            }
        };
        Ok(Upstream {
            transport,
            backend_name: backend.to_string(),
            limiter: Limiter::new(
                mode,
                l.backend_session_share,
                l.backend_queue,
                l.backend_queue_timeout,
                LaneConfig {
                    share: l.backend_anonymous_share,
                    network_share: l.backend_network_share,
                    // Never longer than anyone waits.
                    wait: l.backend_anonymous_wait.min(l.backend_queue_timeout),
                    people_linger: match l.backend_anonymous_adaptive {
                        true => LaneConfig::PEOPLE_LINGER,
                        false => Duration::ZERO,
                    },
                    // The share is the most; people's latency decides how much of it.
                    governed: l.backend_anonymous_adaptive && l.backend_anonymous_share < 1.0,
                },
            ),
            limit_source,
            first_byte_timeout: l.backend_first_byte_timeout,
        })
    }

    /// Whether a WebSocket can go through: HTTP servers and app processes, not FastCGI.
    pub fn carries_upgrades(&self) -> bool {
        !matches!(self.transport, Transport::FastCgi { .. })
    }

    /// Whether a long response keeps a process of the backend busy all along (php-fpm,
    /// app processes), rather than a connection to a server that multiplexes them.
    pub fn streams_hold_a_process(&self) -> bool {
        !matches!(self.transport, Transport::Http { .. })
    }

    /// The backend as the logs name it (its address or servers).
    pub fn backend_name(&self) -> &str {
        &self.backend_name
    }

    /// Where the backend limit comes from, for the startup line.
    pub fn limit_source(&self) -> &str {
        &self.limit_source
    }

    /// Each server of an HTTP backend: its address, whether it takes requests, requests
    /// outstanding, failures so far (`/metrics`).
    pub fn servers(&self) -> Vec<(String, bool, usize, u64)> {
        match &self.transport {
            Transport::Http { servers, .. } => servers
                .list
                .iter()
                .map(|s| {
                    (
                        s.authority.to_string(),
                        s.is_up(servers),
                        s.outstanding(),
                        s.failures_total.load(std::sync::atomic::Ordering::Relaxed),
                    )
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The app pool, when levee runs the application itself.
    pub fn app_pool(&self) -> Option<&levee_app::Pool> {
        match &self.transport {
            Transport::App { pool, .. } => Some(pool),
            _ => None,
        }
    }

    /// php-fpm connection counters, when the backend is FastCGI.
    pub fn fastcgi_stats(&self) -> Option<levee_fastcgi::PoolStats> {
        match &self.transport {
            Transport::FastCgi { client, .. } => Some(client.stats()),
            _ => None,
        }
    }

    /// Waits for a backend slot, or says at once why there is none.
    /// Would `class` be refused at once (`Limiter::refuses_now`)?
    pub fn refuses_now(&self, class: Class) -> bool {
        self.limiter.refuses_now(class)
    }

    pub async fn slot(&self, class: Class) -> Result<BackendSlot, UpstreamError> {
        self.limiter.acquire(class).await.map_err(|r| match r.why {
            Refusal::QueueFull | Refusal::QueueTimeout => UpstreamError::Overloaded {
                backend: self.backend_name.clone(),
                limit: self.limiter.limit(),
            },
            why => UpstreamError::Refused {
                backend: self.backend_name.clone(),
                why,
                retry_after: r.retry_after,
            },
        })
    }

    /// Sends `req` (whose URI is origin-form) and waits for the response head.
    pub async fn send(
        &self,
        req: Request<UpBody>,
        conn: ConnInfo,
    ) -> Result<Response<BackendBody>, UpstreamError> {
        let sent = async {
            match &self.transport {
                Transport::Http { clients, servers } => {
                    let client = &clients[levee_limits::worker::id() % clients.len()];
                    self.send_http(client, servers, req).await
                }
                Transport::App {
                    pool,
                    request_timeout,
                } => {
                    let name = &self.backend_name;
                    let sent = match app::send(pool, name, *request_timeout, req, conn).await {
                        // Refused at connect: nothing reached the application, so any
                        // request may go to another process, a POST too.
                        Err(AppFailure::Refused(_, req)) => {
                            app::send(pool, name, *request_timeout, *req, conn).await
                        }
                        r => r,
                    };
                    sent.map(|r| r.map(BackendBody::App))
                        .map_err(AppFailure::into_inner)
                }
                fastcgi @ Transport::FastCgi { .. } => self.send_fastcgi(fastcgi, req, conn).await,
            }
        };
        match tokio::time::timeout(self.first_byte_timeout, sent).await {
            Ok(r) => r,
            Err(_) => Err(UpstreamError::Timeout {
                backend: self.backend_name.clone(),
                timeout: self.first_byte_timeout,
            }),
        }
    }

    /// Sends to the server with the fewest requests outstanding. One that refuses the
    /// connection or does not answer in time is taken out for a while; a request
    /// without a body then goes to another server (nothing reached the application).
    async fn send_http(
        &self,
        client: &Client<HttpConnector, UpBody>,
        servers: &std::sync::Arc<Servers>,
        req: Request<UpBody>,
    ) -> Result<Response<BackendBody>, UpstreamError> {
        let (parts, body) = req.into_parts();
        let again = (servers.list.len() > 1 && body.is_end_stream()).then(|| parts.clone());
        let server = servers.pick(None);
        let first = server.index();
        match self
            .send_to(client, server, Request::from_parts(parts, body))
            .await
        {
            Err(e @ (UpstreamError::Connect { .. } | UpstreamError::Timeout { .. })) => match again
            {
                Some(parts) => {
                    use http_body_util::BodyExt;
                    let empty = http_body_util::Empty::<Bytes>::new()
                        .map_err(|never| match never {})
                        .boxed_unsync();
                    let req = Request::from_parts(parts, empty);
                    self.send_to(client, servers.pick(Some(first)), req).await
                }
                None => Err(e),
            },
            r => r,
        }
    }

    async fn send_to(
        &self,
        client: &Client<HttpConnector, UpBody>,
        server: ServerGuard,
        mut req: Request<UpBody>,
    ) -> Result<Response<BackendBody>, UpstreamError> {
        let pq = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let uri = http::Uri::builder()
            .scheme("http")
            .authority(server.authority().clone())
            .path_and_query(pq)
            .build()
            .map_err(|e| UpstreamError::Protocol {
                backend: self.backend_name.clone(),
                detail: format!("cannot build the backend URL: {e}"),
            })?;
        *req.uri_mut() = uri;
        *req.version_mut() = http::Version::HTTP_11;
        match tokio::time::timeout(self.first_byte_timeout, client.request(req)).await {
            Ok(Ok(resp)) => {
                server.succeeded();
                Ok(resp.map(|body| BackendBody::Http {
                    body,
                    _server: server,
                }))
            }
            Ok(Err(e)) => {
                let e = self.classify(e);
                if matches!(e, UpstreamError::Connect { .. }) {
                    server.failed();
                }
                Err(e)
            }
            Err(_) => {
                server.failed();
                Err(UpstreamError::Timeout {
                    backend: self.backend_name.clone(),
                    timeout: self.first_byte_timeout,
                })
            }
        }
    }

    /// Finds the script the way nginx's usual PHP setup does (`try_files` to the front
    /// controller) and runs it; a request no script answers never reaches php-fpm.
    async fn send_fastcgi(
        &self,
        transport: &Transport,
        req: Request<UpBody>,
        conn: ConnInfo,
    ) -> Result<Response<BackendBody>, UpstreamError> {
        let Transport::FastCgi {
            client,
            root,
            index,
            routes,
            params: extra,
        } = transport
        else {
            return Err(UpstreamError::Protocol {
                backend: self.backend_name.clone(),
                detail: "not a FastCGI backend".into(),
            });
        };
        let (parts, body) = req.into_parts();
        let path = parts.uri.path();
        let route = match routes.get(path) {
            Some(r) => r,
            None => {
                let (root, index, p) = (root.clone(), index.to_string(), path.to_string());
                // route() stats files: keep it off the async workers.
                let r =
                    tokio::task::spawn_blocking(move || levee_fastcgi::route(&root, &p, &index))
                        .await
                        .unwrap_or(Route::Forbidden);
                routes.insert(path.to_string(), r.clone());
                r
            }
        };
        let (script_name, path_info) = match route {
            Route::Script {
                script_name,
                path_info,
                ..
            } => (script_name, path_info),
            Route::Static(_) => {
                // GET and HEAD of files are served before the backend is asked; other
                // methods have nothing to do with a file.
                let mut r = local_response(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "this is a static file: only GET and HEAD are allowed\n",
                );
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
                return Ok(r);
            }
            Route::Forbidden => {
                return Ok(local_response(StatusCode::FORBIDDEN, "403 Forbidden\n"));
            }
            Route::NotFound => {
                return Ok(local_response(StatusCode::NOT_FOUND, "404 Not Found\n"));
            }
        };
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let server_name = match host.rsplit_once(':') {
            // Not an IPv6 literal's colon: "[::1]:8080" ends with "]:8080".
            Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host,
        };
        let mut params = Params::cgi(&CgiRequest {
            parts: &parts,
            document_root: root,
            script_name: &script_name,
            path_info: &path_info,
            remote_addr: conn.peer,
            server_addr: conn.local,
            https: conn.tls,
            server_name,
        });
        for (name, value) in extra {
            params.set(name, value);
        }
        match client.request(params, body).await {
            Ok(resp) => Ok(resp.map(BackendBody::FastCgi)),
            Err(e) => Err(self.classify_fastcgi(e)),
        }
    }

    fn classify_fastcgi(&self, e: levee_fastcgi::Error) -> UpstreamError {
        let backend = self.backend_name.clone();
        if e.is_connect() {
            UpstreamError::Connect {
                backend,
                detail: e.to_string(),
            }
        } else if e.is_timeout() {
            UpstreamError::Timeout {
                backend,
                timeout: self.first_byte_timeout,
            }
        } else if e.is_overloaded() {
            UpstreamError::Overloaded {
                backend,
                limit: self.limiter.limit(),
            }
        } else if e.is_request() || e.is_body() {
            let status = if matches!(e, levee_fastcgi::Error::BodyTooLarge { .. }) {
                http::StatusCode::PAYLOAD_TOO_LARGE
            } else {
                http::StatusCode::BAD_REQUEST
            };
            UpstreamError::BadRequest {
                status,
                detail: e.to_string(),
            }
        } else {
            UpstreamError::Protocol {
                backend,
                detail: e.to_string(),
            }
        }
    }

    fn classify(&self, e: hyper_util::client::legacy::Error) -> UpstreamError {
        let detail = error_chain(&e);
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = source {
            if err.is::<ClientBodyError>() {
                // The client's body broke off or was malformed (bad chunk sizes): its
                // fault, not the backend's; the connection to the backend is dropped.
                return UpstreamError::BadRequest {
                    status: http::StatusCode::BAD_REQUEST,
                    detail: err.to_string(),
                };
            }
            source = err.source();
        }
        if e.is_connect() {
            UpstreamError::Connect {
                backend: self.backend_name.clone(),
                detail,
            }
        } else {
            UpstreamError::Protocol {
                backend: self.backend_name.clone(),
                detail,
            }
        }
    }
}

/// A response levee makes itself in the backend's place.
fn local_response(status: StatusCode, text: &'static str) -> Response<BackendBody> {
    let mut r = Response::new(BackendBody::Local(Some(Bytes::from_static(
        text.as_bytes(),
    ))));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    r
}
