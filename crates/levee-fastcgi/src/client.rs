//! The client: the sending of one request to one php-fpm address, on a kept-alive
//! connection from its pool (`shared`) or a new one, with its retry rule.

use std::fmt;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::Response;
use http_body::Body;
use http_body_util::{BodyExt, Either, Full};
use tokio::io::AsyncWriteExt;

use crate::body::{Event, Exchange, ResponseBody, Writer};
use crate::conn::{is_closed, Address, Stream};
use crate::error::{BoxError, Error};
use crate::head;
use crate::params::Params;
use crate::record::{self, ProtocolStatus};
use crate::shared::{ClientConfig, Inner, Req, WaitingGuard};

/// Counters of a [`Client`]'s connections, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections opened.
    pub connects: u64,
    /// Requests sent on a kept-alive connection.
    pub reused: u64,
    /// Requests sent a second time, on a new connection, after a kept-alive one turned out
    /// to be closed.
    pub retries: u64,
    /// Connections idle in the pool now.
    pub idle: usize,
}

/// A FastCGI client for one php-fpm address. Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// A client for php-fpm at `addr`. Connects lazily, on the first request.
    pub fn new(addr: Address, config: ClientConfig) -> Client {
        Client {
            inner: Arc::new(Inner::new(addr, config)),
        }
    }

    pub fn address(&self) -> &Address {
        &self.inner.addr
    }

    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    pub fn stats(&self) -> PoolStats {
        let i = &self.inner;
        PoolStats {
            connects: i.connects.load(Ordering::Relaxed),
            reused: i.reused.load(Ordering::Relaxed),
            retries: i.retries.load(Ordering::Relaxed),
            idle: i.idle_count(),
        }
    }

    /// Sends one request: `params` (the CGI variables, see [`Params::cgi`]), then `body`
    /// streamed as FCGI_STDIN while the response is read, so neither a large upload nor a
    /// large response is held in memory and neither side can block the other. Resolves
    /// when the response head has been parsed; the body streams after it.
    ///
    /// php only reads as much of the body as `CONTENT_LENGTH` says. If `params` has none
    /// and the body knows its exact length, `CONTENT_LENGTH` is added; a body of unknown
    /// length (chunked) is first read whole, up to
    /// [`max_unsized_body`](ClientConfig::max_unsized_body), to learn it.
    ///
    /// Kept-alive connections and retries: php-fpm closes a kept-alive connection without
    /// notice (a worker exiting after `pm.max_requests`, reaped, or restarted), and when a
    /// request sent on it gets no answer, whether the worker died running the script or had
    /// closed the connection before reading it is not knowable. So:
    /// - an idle connection is checked (one non-blocking read) before it is reused;
    /// - a request that is safe to send twice (GET, HEAD, OPTIONS, TRACE, PUT, DELETE
    ///   without a body) uses a kept-alive connection, and is sent once more on a new
    ///   connection if that one fails before any byte of the answer;
    /// - any other request (POST, or a body that cannot be replayed since it is streamed)
    ///   uses a new connection, so it never meets a stale one, and is never sent twice.
    pub async fn request<B>(
        &self,
        mut params: Params,
        body: B,
    ) -> Result<Response<ResponseBody>, Error>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let mut empty_body = body.is_end_stream();
        let body = if params.get("CONTENT_LENGTH").is_some() || empty_body {
            Either::Left(body)
        } else if let Some(n) = body.size_hint().exact() {
            if n > 0 {
                params.push("CONTENT_LENGTH", n.to_string());
            }
            Either::Left(body)
        } else {
            // Without CONTENT_LENGTH php would read none of it.
            let data = self.read_unsized(body).await?;
            params.push("CONTENT_LENGTH", data.len().to_string());
            empty_body = data.is_empty();
            Either::Right(Full::new(data))
        };
        let declared_len = params
            .get("CONTENT_LENGTH")
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let keep_conn = self.inner.config.max_idle > 0;
        let head = record::encode_request_head(&params, keep_conn, empty_body)
            .map_err(|message| Error::Request { message })?;
        let idempotent = matches!(
            params.get("REQUEST_METHOD"),
            Some(b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE" | b"PUT" | b"DELETE")
        );
        let script: Arc<str> = params
            .get("SCRIPT_FILENAME")
            .map(|s| String::from_utf8_lossy(s).into())
            .unwrap_or_else(|| "-".into());
        let req = Req {
            head,
            declared_len,
            script,
        };
        let mut body = (!empty_body).then_some(body);
        let resendable = idempotent && empty_body;

        let (stream, reused) = self.inner.checkout(resendable).await?;
        let failure = match self.attempt(stream, reused, &req, &mut body).await {
            Ok(resp) => return Ok(resp),
            Err(f) => f,
        };
        if !(reused && resendable && failure.unanswered) {
            return Err(failure.error);
        }
        tracing::debug!(
            php = %self.inner.name,
            error = %failure.error,
            "kept-alive php-fpm connection was closed; sending the request again on a new one"
        );
        self.inner.retries.fetch_add(1, Ordering::Relaxed);
        let stream = self.inner.connect().await?;
        self.attempt(stream, false, &req, &mut body)
            .await
            .map_err(|f| f.error)
    }

    /// Reads a request body of unknown length into memory, at most `max_unsized_body`.
    async fn read_unsized<B>(&self, body: B) -> Result<Bytes, Error>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let limit = self.inner.config.max_unsized_body;
        let mut body = pin!(body);
        let mut buf = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Error::Body { source: e.into() })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if (buf.len() + data.len()) as u64 > limit {
                return Err(Error::BodyTooLarge { limit });
            }
            buf.extend_from_slice(&data);
        }
        Ok(buf.freeze())
    }

    /// One try on one connection: the head, the body in a task, the response head.
    async fn attempt<B>(
        &self,
        stream: Stream,
        reused: bool,
        req: &Req,
        body: &mut Option<B>,
    ) -> Result<Response<ResponseBody>, Failure>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let inner = &self.inner;
        let waiting = (!reused).then(|| WaitingGuard::new(inner.clone()));
        let (reader, mut writer) = stream.into_split();
        let write_timeout = inner.config.write_timeout;
        match tokio::time::timeout(write_timeout, writer.write_all(&req.head)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(Failure {
                    unanswered: is_closed(&e),
                    error: inner.io_error("sending the request", e),
                });
            }
            Err(_) => {
                return Err(Failure {
                    error: inner.timeout("sending the request", write_timeout),
                    unanswered: false,
                })
            }
        }
        let writer = match body.take() {
            None => Writer::Done(writer),
            Some(b) => Writer::spawn(writer, b, write_timeout),
        };
        let mut ex = Exchange::new(inner.clone(), reader, writer, req, waiting);

        let mut head_buf = BytesMut::new();
        loop {
            let event =
                std::future::poll_fn(|cx| ex.poll_event(cx, "waiting for the response head")).await;
            match event {
                Ok(Event::Stdout(data)) => {
                    head_buf.extend_from_slice(&data);
                    let parsed = head::parse(&head_buf).map_err(|m| Failure {
                        error: inner.protocol(m),
                        unanswered: false,
                    })?;
                    if let Some(h) = parsed {
                        let rest = head_buf.split_off(h.len).freeze();
                        let mut resp = Response::new(ResponseBody::new(ex, rest));
                        *resp.status_mut() = h.status;
                        *resp.headers_mut() = h.headers;
                        return Ok(resp);
                    }
                    if head_buf.len() > head::MAX_HEAD {
                        return Err(Failure {
                            error: inner.protocol(format!(
                                "the response headers are larger than {} KiB (or the blank \
                                 line that ends them is missing)",
                                head::MAX_HEAD / 1024
                            )),
                            unanswered: false,
                        });
                    }
                }
                Ok(Event::End(end)) => {
                    let error = match end.protocol_status {
                        ProtocolStatus::Overloaded | ProtocolStatus::CantMpxConn => {
                            Error::Overloaded {
                                addr: inner.name.clone(),
                                status: end.protocol_status.name(),
                            }
                        }
                        ProtocolStatus::RequestComplete => {
                            // The request ended cleanly; only its output was unusable.
                            ex.release();
                            inner.protocol(if head_buf.is_empty() {
                                "the request ended without any output, not even headers".into()
                            } else {
                                "the request ended before the blank line that ends the \
                                 response headers"
                                    .into()
                            })
                        }
                        other => inner.protocol(format!(
                            "the request ended with {} instead of a response",
                            other.name()
                        )),
                    };
                    return Err(Failure {
                        error,
                        unanswered: false,
                    });
                }
                Err(error) => {
                    let unanswered = ex.received() == 0 && is_closed_error(&error);
                    return Err(Failure { error, unanswered });
                }
            }
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.inner.name)
            .field("stats", &self.stats())
            .finish()
    }
}

struct Failure {
    error: Error,
    /// The connection was found closed and not a byte of an answer came: what a stale
    /// kept-alive connection looks like (and also a worker that died running the script,
    /// which is why only requests safe to send twice are sent again).
    unanswered: bool,
}

fn is_closed_error(e: &Error) -> bool {
    match e {
        Error::Closed { .. } => true,
        Error::Io { source, .. } => is_closed(source),
        _ => false,
    }
}
