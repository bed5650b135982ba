//! The backend: a pooled keep-alive HTTP/1.1 client, and the overload limiter that
//! guarantees the backend never sees more than its configured concurrency.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use levee_config::{Backend, Settings};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::body::BoxError;

/// Request bodies sent to the backend: empty for fills, streamed for pass.
pub type UpBody = UnsyncBoxBody<bytes::Bytes, BoxError>;

/// Why the backend gave no response. Decides the status levee answers with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    #[error("levee could not connect to the backend {backend}: {detail}")]
    Connect { backend: String, detail: String },
    #[error("the backend {backend} did not start its response within {timeout:?}")]
    Timeout { backend: String, timeout: Duration },
    #[error("the backend {backend} is at its limit of {limit} concurrent requests and the wait queue is full or timed out")]
    Overloaded { backend: String, limit: usize },
    #[error("the backend {backend} failed: {detail}")]
    Protocol { backend: String, detail: String },
}

impl UpstreamError {
    pub fn status(&self) -> http::StatusCode {
        match self {
            UpstreamError::Connect { .. } | UpstreamError::Protocol { .. } => {
                http::StatusCode::BAD_GATEWAY
            }
            UpstreamError::Timeout { .. } => http::StatusCode::GATEWAY_TIMEOUT,
            UpstreamError::Overloaded { .. } => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Bounded admission to the backend: a semaphore for the concurrency limit and a
/// counted, time-limited wait queue in front of it.
pub struct Limiter {
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    limit: usize,
    max_waiting: usize,
    queue_timeout: Duration,
}

impl Limiter {
    pub fn new(limit: usize, max_waiting: usize, queue_timeout: Duration) -> Limiter {
        Limiter {
            slots: Arc::new(Semaphore::new(limit)),
            waiting: AtomicUsize::new(0),
            limit,
            max_waiting,
            queue_timeout,
        }
    }

    /// A backend slot, or `None` when the queue is full or the wait timed out.
    pub async fn acquire(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Some(p);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_waiting {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let r = tokio::time::timeout(self.queue_timeout, self.slots.clone().acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        r.ok().and_then(|r| r.ok())
    }

    pub fn in_use(&self) -> usize {
        self.limit - self.slots.available_permits()
    }
}

/// The backend connection pool and its limits.
pub struct Upstream {
    client: Client<HttpConnector, UpBody>,
    pub backend: Backend,
    backend_name: String,
    pub limiter: Limiter,
    first_byte_timeout: Duration,
}

impl Upstream {
    pub fn new(settings: &Settings) -> Upstream {
        let l = &settings.limits;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(l.backend_connect_timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(l.backend_max_concurrency)
            .build(connector);
        Upstream {
            client,
            backend_name: settings.backend.to_string(),
            backend: settings.backend.clone(),
            limiter: Limiter::new(
                l.backend_max_concurrency,
                l.backend_queue,
                l.backend_queue_timeout,
            ),
            first_byte_timeout: l.backend_first_byte_timeout,
        }
    }

    /// Waits for a backend slot.
    pub async fn slot(&self) -> Result<OwnedSemaphorePermit, UpstreamError> {
        self.limiter
            .acquire()
            .await
            .ok_or_else(|| UpstreamError::Overloaded {
                backend: self.backend_name.clone(),
                limit: self.limiter.limit,
            })
    }

    /// Sends `req` (whose URI is origin-form) and waits for the response head.
    pub async fn send(
        &self,
        mut req: Request<UpBody>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let Backend::Http { authority } = &self.backend;
        let pq = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let uri = http::Uri::builder()
            .scheme("http")
            .authority(authority.clone())
            .path_and_query(pq)
            .build()
            .map_err(|e| UpstreamError::Protocol {
                backend: self.backend_name.clone(),
                detail: format!("cannot build the backend URL: {e}"),
            })?;
        *req.uri_mut() = uri;
        *req.version_mut() = http::Version::HTTP_11;
        match tokio::time::timeout(self.first_byte_timeout, self.client.request(req)).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(self.classify(e)),
            Err(_) => Err(UpstreamError::Timeout {
                backend: self.backend_name.clone(),
                timeout: self.first_byte_timeout,
            }),
        }
    }

    fn classify(&self, e: hyper_util::client::legacy::Error) -> UpstreamError {
        let detail = error_chain(&e);
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

/// "outer: inner: innermost", the way people read nested errors.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}
