//! The body of a static response: nothing, one `Bytes` shared with the memory cache, or a
//! file read in bounded chunks.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncReadExt, Take};

/// Bytes read from disk per frame: large enough that a 100 MiB video costs ~800 reads,
/// small enough that a thousand slow downloads hold ~128 MiB, not the files.
pub(crate) const CHUNK: usize = 128 * 1024;

/// A response body. `Data = Bytes`, `Error = std::io::Error` (a file that shrank or
/// failed while being read: the connection must then be cut, as `Content-Length` was
/// already promised).
pub struct FileBody {
    inner: Inner,
}

enum Inner {
    Empty,
    Memory(Option<Bytes>),
    File(Box<Stream>),
}

struct Stream {
    /// Limited to the bytes still owed, so a file that grew is not over-read.
    file: Take<tokio::fs::File>,
    remaining: u64,
    /// Kept across `Pending` so a read in progress is not restarted into a new buffer.
    buf: BytesMut,
}

impl FileBody {
    /// No body: HEAD, 304, 412, 416, redirects.
    pub fn empty() -> FileBody {
        FileBody {
            inner: Inner::Empty,
        }
    }

    /// A body from memory; cloning `Bytes` shares it, nothing is copied.
    pub fn bytes(b: Bytes) -> FileBody {
        FileBody {
            inner: Inner::Memory(Some(b)),
        }
    }

    /// The whole body when it is in memory (a small file), for callers that transform it
    /// (compression) without reading it again.
    pub fn memory(&self) -> Option<&Bytes> {
        match &self.inner {
            Inner::Memory(b) => b.as_ref(),
            _ => None,
        }
    }

    /// `len` bytes from the current position of `file`.
    pub(crate) fn file(file: tokio::fs::File, len: u64) -> FileBody {
        if len == 0 {
            return FileBody::empty();
        }
        FileBody {
            inner: Inner::File(Box::new(Stream {
                file: file.take(len),
                remaining: len,
                buf: BytesMut::new(),
            })),
        }
    }
}

impl fmt::Debug for FileBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Inner::Empty => f.write_str("FileBody::Empty"),
            Inner::Memory(b) => write!(
                f,
                "FileBody::Memory({} bytes)",
                b.as_ref().map_or(0, Bytes::len)
            ),
            Inner::File(s) => write!(f, "FileBody::File({} bytes left)", s.remaining),
        }
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match &mut self.get_mut().inner {
            Inner::Empty => Poll::Ready(None),
            Inner::Memory(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Inner::File(s) => {
                if s.remaining == 0 {
                    return Poll::Ready(None);
                }
                if s.buf.capacity() == 0 {
                    // `remaining` is at least 1 here and at most CHUNK after min().
                    let want = usize::try_from(s.remaining).map_or(CHUNK, |r| r.min(CHUNK));
                    s.buf.reserve(want);
                }
                match tokio_util::io::poll_read_buf(Pin::new(&mut s.file), cx, &mut s.buf) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Err(e)) => {
                        s.remaining = 0;
                        Poll::Ready(Some(Err(e)))
                    }
                    Poll::Ready(Ok(0)) => {
                        s.remaining = 0;
                        Poll::Ready(Some(Err(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "the file shrank while it was being sent",
                        ))))
                    }
                    Poll::Ready(Ok(n)) => {
                        s.remaining = s.remaining.saturating_sub(n as u64);
                        // split() hands the filled bytes out and leaves an empty buffer;
                        // a fresh allocation per chunk, as the frame may outlive us.
                        let chunk = s.buf.split().freeze();
                        s.buf = BytesMut::new();
                        Poll::Ready(Some(Ok(Frame::data(chunk))))
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Empty => true,
            Inner::Memory(b) => b.is_none(),
            Inner::File(s) => s.remaining == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Empty => SizeHint::with_exact(0),
            Inner::Memory(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Inner::File(s) => SizeHint::with_exact(s.remaining),
        }
    }
}
