//! Large cache hits sent with `sendfile(2)`, without copying the body into the socket.
//!
//! At 100 KiB a hit's CPU goes mostly to copying the body from memory into the kernel
//! (perf: a third of levee's time in `_copy_from_iter`), which nginx avoids by sending
//! its cache files with `sendfile`. hyper writes bodies only from memory, so levee does
//! this itself, within hyper's rules:
//!
//! - A hot large body also lives in a memfd (an anonymous in-memory file), made once and
//!   kept in a bounded cache ([`Files`]).
//! - The response body hands hyper a *placeholder*: a slice of one static region of zero
//!   bytes, as long as the body, and queues the file range on the connection
//!   ([`SendQueue`]) when hyper first polls it.
//! - The connection's stream ([`ZcStream`]) recognises placeholder slices by address in
//!   the writes hyper makes, and sends the queued file range in their place, in order.
//!
//! This relies on hyper writing body buffers as given, which its vectored ("queue") write
//! strategy does; the server forces it with `writev(true)`. Every placeholder write is
//! checked against the queue (which range, which offset): any mismatch fails the
//! connection rather than send a byte that is not the body's. HTTP/1.1 only; HTTP/2
//! copies bodies into frames and uses the plain path.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use levee_cache::{DerivedBudget, DerivedForms, Kept};
use levee_compress::Coding;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Bodies from this size on are sent with sendfile: below it the extra system call and
/// the bookkeeping cost more than the copy they save.
pub const MIN_LEN: usize = 64 << 10;

/// Longest placeholder, hence longest body sent this way (the default object limit).
pub const MAX_LEN: usize = 16 << 20;

/// The placeholder bytes: zeros in the binary's bss, never touched, so they cost no
/// memory. Their *address* is what marks a write as "send the queued file range here".
static PLACEHOLDER: [u8; MAX_LEN] = [0; MAX_LEN];

fn placeholder_offset(buf: &[u8]) -> Option<usize> {
    let start = PLACEHOLDER.as_ptr() as usize;
    let p = buf.as_ptr() as usize;
    (p >= start && p < start + MAX_LEN && !buf.is_empty()).then(|| p - start)
}

/// One body to send from a file.
struct Range {
    file: Arc<File>,
    len: u64,
    /// Bytes of it already sent.
    sent: u64,
}

/// The file ranges a connection's responses still have to send, in response order.
#[derive(Default)]
pub struct SendQueue(Mutex<VecDeque<Range>>);

impl SendQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Range>> {
        // The queue holds plain data: a panic elsewhere cannot leave it half-updated.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A response body sent from a memfd: yields one placeholder frame of its length, and
/// queues the range the first time hyper asks for it.
pub struct ZcBody {
    queue: Arc<SendQueue>,
    file: Option<Arc<File>>,
    len: usize,
}

impl ZcBody {
    pub fn new(queue: Arc<SendQueue>, file: Arc<File>, len: usize) -> ZcBody {
        ZcBody {
            queue,
            file: Some(file),
            len,
        }
    }

    /// The frame to hand hyper: queued now, in the order hyper writes bodies.
    pub fn next_frame(&mut self) -> Option<Bytes> {
        let file = self.file.take()?;
        self.queue.lock().push_back(Range {
            file,
            len: self.len as u64,
            sent: 0,
        });
        Some(Bytes::from_static(&PLACEHOLDER[..self.len]))
    }

    pub fn is_end_stream(&self) -> bool {
        self.file.is_none()
    }

    pub fn body_len(&self) -> usize {
        self.len
    }
}

/// The bound on memfd copies of large bodies. The copies themselves are kept with their
/// entry (`DerivedForms::file`) and go with it: a refreshed or purged page leaves none.
pub struct Files {
    budget: Arc<DerivedBudget>,
}

impl Files {
    pub fn new(capacity: u64) -> Files {
        Files {
            budget: DerivedBudget::new(capacity),
        }
    }

    /// The memfd holding `body` (an entry's body in `coding`), made on first use. `None`
    /// if the system refuses one (then the body is sent from memory, as usual).
    pub fn get(&self, forms: &DerivedForms, coding: Coding, body: &Bytes) -> Option<Arc<File>> {
        let cell = forms.file(coding);
        if let Some(k) = cell.get() {
            return Some(k.get().clone());
        }
        match make_memfd(body) {
            Ok(f) => match Kept::keep(Arc::new(f), body.len(), &self.budget) {
                Ok(kept) => {
                    // Another request may have made one meanwhile: use whichever is kept.
                    let _ = cell.set(kept);
                    cell.get().map(|k| k.get().clone())
                }
                // No room: this response only.
                Err(f) => Some(f),
            },
            Err(e) => {
                tracing::debug!(error = %e, "no memfd for a large body; sending it from memory");
                None
            }
        }
    }

    /// Bytes held now by memfd copies, and their bound (metrics).
    pub fn held(&self) -> (u64, u64) {
        (self.budget.used(), self.budget.max())
    }
}

fn make_memfd(body: &[u8]) -> io::Result<File> {
    use rustix::fs::{memfd_create, MemfdFlags};
    let fd = memfd_create("levee-body", MemfdFlags::CLOEXEC)?;
    let mut file = File::from(fd);
    file.write_all(body)?;
    Ok(file)
}

/// The client connection's TCP stream, sending placeholder writes from their files.
pub struct ZcStream {
    inner: TcpStream,
    queue: Arc<SendQueue>,
}

impl ZcStream {
    pub fn new(inner: TcpStream, queue: Arc<SendQueue>) -> ZcStream {
        ZcStream { inner, queue }
    }

    /// The connection itself, once no response is to be sent on it (a WebSocket took it
    /// over): no placeholder can come any more.
    pub fn into_inner(self) -> TcpStream {
        self.inner
    }

    /// Sends up to `buf.len()` bytes of the front range for the placeholder slice `buf`.
    fn poll_send_range(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let Some(at) = placeholder_offset(buf) else {
            return Poll::Ready(Err(mismatch("not a placeholder")));
        };
        loop {
            let (file, offset, count) = {
                let q = self.queue.lock();
                let Some(front) = q.front() else {
                    return Poll::Ready(Err(mismatch("no queued body")));
                };
                // hyper writes each placeholder from its start, in order: the slice must
                // begin exactly where the range stands.
                if at as u64 != front.sent || front.sent + buf.len() as u64 > front.len {
                    return Poll::Ready(Err(mismatch("out of step with the queued body")));
                }
                (front.file.clone(), front.sent, buf.len())
            };
            ready!(self.inner.poll_write_ready(cx))?;
            let sent = self.inner.try_io(Interest::WRITABLE, || {
                let mut off = offset;
                rustix::fs::sendfile(&self.inner, &*file, Some(&mut off), count)
                    .map_err(io::Error::from)
            });
            match sent {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    let mut q = self.queue.lock();
                    if let Some(front) = q.front_mut() {
                        front.sent += n as u64;
                        if front.sent >= front.len {
                            q.pop_front();
                        }
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

fn mismatch(what: &str) -> io::Error {
    // Never expected: fail the connection rather than send bytes that are not the body.
    tracing::error!("zero-copy send {what}; closing the connection");
    io::Error::other(format!("zero-copy send {what}"))
}

impl AsyncRead for ZcStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ZcStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if placeholder_offset(buf).is_some() {
            return this.poll_send_range(cx, buf);
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // Ordinary slices up to the first placeholder go out in one writev; a placeholder
        // first goes out by itself with sendfile. Either way a short count is fine: hyper
        // calls again with what is left.
        let plain = bufs
            .iter()
            .take_while(|b| placeholder_offset(b).is_none())
            .count();
        if plain > 0 && plain == bufs.len() {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        if plain > 0 {
            // The head goes out on its own, as nginx's writev before its sendfile. Not
            // corked with MSG_MORE to share a segment with the body: that made every
            // sendfile push the held head too, 16% fewer 100 KiB hits and a 40% longer
            // p99 on loopback (BENCHMARKS.md, issue 35), for one packet saved per body.
            return Pin::new(&mut this.inner).poll_write_vectored(cx, &bufs[..plain]);
        }
        match bufs.iter().find(|b| !b.is_empty()) {
            Some(first) => this.poll_send_range(cx, first),
            None => Poll::Ready(Ok(0)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_recognised_by_address_only() {
        let p = Bytes::from_static(&PLACEHOLDER[..100]);
        assert_eq!(placeholder_offset(&p), Some(0));
        assert_eq!(placeholder_offset(&p[10..]), Some(10));
        let zeros = vec![0u8; 100];
        assert_eq!(placeholder_offset(&zeros), None, "same bytes, other memory");
        assert_eq!(placeholder_offset(&p[..0]), None);
    }

    #[test]
    fn memfds_hold_the_body_and_go_with_their_entry() {
        use std::io::Read;
        let body = Bytes::from(vec![7u8; 100_000]);
        let files = Files::new(1 << 20);
        let forms = DerivedForms::default();
        let f = files.get(&forms, Coding::Identity, &body).unwrap();
        let mut back = Vec::new();
        let mut r: &File = &f;
        std::io::Seek::seek(&mut r, std::io::SeekFrom::Start(0)).unwrap();
        r.read_to_end(&mut back).unwrap();
        assert_eq!(back, body);
        assert!(Arc::ptr_eq(
            &f,
            &files.get(&forms, Coding::Identity, &body).unwrap()
        ));
        assert_eq!(files.held().0, 100_000 + 64);
        drop(forms);
        assert_eq!(files.held().0, 0, "the copy went with its entry");
        // Over the bound: made for one response, not kept.
        let small = Files::new(1000);
        let forms = DerivedForms::default();
        assert!(small.get(&forms, Coding::Identity, &body).is_some());
        assert_eq!(small.held().0, 0);
    }
}
