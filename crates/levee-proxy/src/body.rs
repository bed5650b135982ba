//! The one response body type levee sends, so that no response is boxed.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use levee_cache::Reader;

use crate::upstream::{BackendBody, BoxError};
use levee_limits::BackendSlot;
use tokio::time::{Instant, Sleep};

/// A response body: empty, from memory (cache hits), from a coalesced fill, or streamed
/// straight from the backend (pass), holding its backend slot until done.
pub enum ProxyBody {
    Empty,
    Full(Option<Bytes>),
    Fill(Reader),
    Pass(Box<PassBody>),
    /// A static file from the document root.
    File(levee_static::FileBody),
    /// Another body compressed on the fly.
    Coded(Box<levee_compress::CompressBody<ProxyBody>>),
    /// A backend body in a coding the client does not accept, decoded on the fly.
    Decoded(Box<levee_compress::DecompressBody<ProxyBody>>),
    /// A large cached body sent from a memfd with sendfile (see zerocopy.rs).
    Zc(levee_sendfile::ZcBody),
    /// Pieces sent one after the other: a multipart/byteranges body, whose ranges are
    /// slices of the stored body (request/partial.rs).
    Parts(std::collections::VecDeque<Bytes>),
}

/// A backend body streamed through. The backend slot is released when it is dropped,
/// and a backend that pauses longer than the read timeout ends the response.
pub struct PassBody {
    pub(crate) inner: BackendBody,
    pub(crate) _permit: Option<BackendSlot>,
    pub(crate) timeout: Duration,
    pub(crate) deadline: Pin<Box<Sleep>>,
}

#[derive(Debug, thiserror::Error)]
#[error("the backend paused longer than the read timeout ({0:?}) in the middle of a response")]
pub struct ReadTimeout(Duration);

impl ProxyBody {
    pub fn full(b: Bytes) -> ProxyBody {
        ProxyBody::Full(Some(b))
    }

    pub fn pass(inner: BackendBody, permit: Option<BackendSlot>, timeout: Duration) -> ProxyBody {
        ProxyBody::Pass(Box::new(PassBody {
            inner,
            _permit: permit,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }))
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ProxyBody::Empty => Poll::Ready(None),
            ProxyBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Fill(r) => r
                .poll_chunk(cx)
                .map(|o| o.map(|r| r.map(Frame::data).map_err(|e| Box::new(e) as BoxError))),
            ProxyBody::File(f) => Pin::new(f)
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map_err(|e| Box::new(e) as BoxError))),
            ProxyBody::Coded(c) => Pin::new(c.as_mut()).poll_frame(cx),
            ProxyBody::Decoded(d) => Pin::new(d.as_mut()).poll_frame(cx),
            ProxyBody::Zc(z) => Poll::Ready(z.next_frame().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Parts(p) => Poll::Ready(p.pop_front().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Pass(p) => match Pin::new(&mut p.inner).poll_frame(cx) {
                Poll::Ready(r) => {
                    let t = p.timeout;
                    p.deadline.as_mut().reset(Instant::now() + t);
                    Poll::Ready(r)
                }
                Poll::Pending => match p.deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(ReadTimeout(p.timeout))))),
                    Poll::Pending => Poll::Pending,
                },
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Empty => true,
            ProxyBody::Full(b) => b.is_none(),
            ProxyBody::Fill(_) => false,
            ProxyBody::Pass(p) => p.inner.is_end_stream(),
            ProxyBody::File(f) => f.is_end_stream(),
            ProxyBody::Coded(c) => c.is_end_stream(),
            ProxyBody::Decoded(d) => d.is_end_stream(),
            ProxyBody::Zc(z) => z.is_end_stream(),
            ProxyBody::Parts(p) => p.is_empty(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Empty => SizeHint::with_exact(0),
            ProxyBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            ProxyBody::Fill(_) => SizeHint::default(),
            ProxyBody::Pass(p) => p.inner.size_hint(),
            ProxyBody::File(f) => f.size_hint(),
            ProxyBody::Coded(c) => c.size_hint(),
            ProxyBody::Decoded(d) => d.size_hint(),
            ProxyBody::Parts(p) => SizeHint::with_exact(p.iter().map(|b| b.len() as u64).sum()),
            ProxyBody::Zc(z) => SizeHint::with_exact(if z.is_end_stream() {
                0
            } else {
                z.body_len() as u64
            }),
        }
    }
}

/// A request body as the client sends it: over HTTP/1.1 or HTTP/2 (hyper's, `Left`), or
/// over HTTP/3 (levee-h3's, `Right`).
pub type ClientBody = http_body_util::Either<hyper::body::Incoming, levee_h3::RecvBody>;

/// A response as levee sends it.
pub(crate) type Resp = http::Response<ProxyBody>;

/// The body's length when known at the head: the body's own, or its `Content-Length`.
pub(crate) fn body_len(resp: &Resp) -> Option<u64> {
    http_body::Body::size_hint(resp.body()).exact().or_else(|| {
        resp.headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    })
}
