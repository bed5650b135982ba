//! Request coalescing: one backend fetch per key, streamed to every waiting client as it
//! arrives and collected for storage at the same time.
//!
//! The fetch runs in its own task (the *filler*), so a client that goes away does not
//! cancel it. Clients are *readers*: a reader that joins late first replays the chunks
//! already received, then follows the live stream. The filler waits on the slowest
//! reader (backpressure, like Varnish streaming) but drops a reader that stalls longer
//! than the read timeout, so one slow client cannot hold the fill.
//!
//! The filler holds a [`FillGuard`]: however the filler ends (it returns early, fails,
//! panics, or its task is dropped), the guard's `Drop` publishes a failure to requests
//! still waiting for the head, fails readers of an unfinished body and unregisters the
//! key, so no request waits on a fill that nobody drives. A reader whose stream closes
//! before the fill [finished](Fill::finish) sees an error, never a clean end: a
//! truncated body is never passed off as complete.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, Notify};

use crate::key::CacheKey;

/// What a reader learns when the backend's response head arrives.
pub type Head<H> = Arc<H>;

enum HeadState<H> {
    Pending,
    Ready(Head<H>),
}

struct State<H> {
    head: HeadState<H>,
    /// Chunks kept for late readers and for storage, while `buffering`.
    chunks: Vec<Bytes>,
    buffered: usize,
    buffering: bool,
    /// New readers may join (false once the body outgrew the buffer limit).
    joinable: bool,
    done: bool,
    failed: bool,
    readers: Vec<ReaderTx>,
}

enum Chunk {
    Data(Bytes),
    Error,
}

/// One in-flight fetch shared by every request for the same key.
pub struct Fill<H> {
    state: Mutex<State<H>>,
    head_ready: Notify,
    max_buffer: usize,
}

/// The fill's end of one reader.
struct ReaderTx {
    tx: mpsc::Sender<Chunk>,
    /// Set by [`Fill::finish`] only, for readers still attached: the body reached this
    /// reader whole.
    complete: Arc<AtomicBool>,
}

/// The body stream of one client attached to a [`Fill`].
pub struct Reader {
    replay: std::vec::IntoIter<Bytes>,
    failed_at_join: bool,
    rx: mpsc::Receiver<Chunk>,
    complete: Arc<AtomicBool>,
    /// The end (or the error) was reported.
    ended: bool,
}

/// The body could not be completed (the backend failed mid-stream, or this reader was
/// too slow and was dropped).
#[derive(Debug, Clone, Copy)]
pub struct Incomplete;

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the backend response ended before it was complete")
    }
}

impl std::error::Error for Incomplete {}

const READER_CHANNEL: usize = 64;

impl<H> Fill<H> {
    /// A new fill that keeps at most `max_buffer` bytes for late readers and storage.
    pub fn new(max_buffer: usize) -> Arc<Fill<H>> {
        Arc::new(Fill {
            state: Mutex::new(State {
                head: HeadState::Pending,
                chunks: Vec::new(),
                buffered: 0,
                buffering: true,
                joinable: true,
                done: false,
                failed: false,
                readers: Vec::new(),
            }),
            head_ready: Notify::new(),
            max_buffer,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<H>> {
        // A poisoned lock means a panic elsewhere while holding it; the state is still
        // plain data, so keep going rather than cascade the panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the response head.
    pub async fn head(&self) -> Head<H> {
        loop {
            let notified = self.head_ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let HeadState::Ready(h) = &self.lock().head {
                return h.clone();
            }
            notified.await;
        }
    }

    /// Publishes the response head to every waiting request.
    pub fn set_head(&self, head: H) {
        self.lock().head = HeadState::Ready(Arc::new(head));
        self.head_ready.notify_waiters();
    }

    /// Attaches a reader, or `None` when the body is no longer kept for late readers.
    pub fn join(&self) -> Option<Reader> {
        let mut s = self.lock();
        if !s.joinable {
            return None;
        }
        let (tx, rx) = mpsc::channel(READER_CHANNEL);
        let replay = s.chunks.clone().into_iter();
        let failed_at_join = s.failed;
        // Joining a finished fill: the replay is the whole body.
        let complete = Arc::new(AtomicBool::new(s.done && !s.failed));
        if !s.done {
            s.readers.push(ReaderTx {
                tx,
                complete: complete.clone(),
            });
        }
        Some(Reader {
            replay,
            failed_at_join,
            rx,
            complete,
            ended: false,
        })
    }

    /// Sends one chunk to every reader and keeps it for storage if it still fits.
    /// Returns false when no reader is left and nothing is being buffered (the fetch
    /// may stop).
    pub async fn push(&self, chunk: Bytes, stall_timeout: Duration) -> bool {
        let mut readers = {
            let mut s = self.lock();
            if s.buffering {
                if s.buffered + chunk.len() <= self.max_buffer {
                    s.buffered += chunk.len();
                    s.chunks.push(chunk.clone());
                } else {
                    s.buffering = false;
                    s.joinable = false;
                    s.chunks = Vec::new();
                }
            }
            std::mem::take(&mut s.readers)
        };
        send_all(&mut readers, Chunk::Data(chunk), stall_timeout).await;
        let mut s = self.lock();
        readers.append(&mut s.readers);
        s.readers = readers;
        !s.readers.is_empty() || s.buffering
    }

    /// The body is complete: readers see the end of the stream.
    pub fn finish(&self) {
        let mut s = self.lock();
        s.done = true;
        for r in s.readers.drain(..) {
            r.complete.store(true, Ordering::Release);
        }
    }

    /// The filler is gone (see [`FillGuard`]): requests waiting for the head get
    /// `abandoned`, readers of an unfinished body an error. Never blocks.
    fn abandon(&self, abandoned: impl FnOnce() -> H) {
        let mut s = self.lock();
        if matches!(s.head, HeadState::Pending) {
            s.head = HeadState::Ready(Arc::new(abandoned()));
            self.head_ready.notify_waiters();
        }
        if !s.done {
            s.done = true;
            s.failed = true;
            s.buffering = false;
            s.chunks = Vec::new();
            // Dropping the senders ends every reader's stream; `complete` is unset, so
            // they see it as an error.
            s.readers.clear();
        }
    }

    /// Whether the response head was published.
    pub fn has_head(&self) -> bool {
        matches!(self.lock().head, HeadState::Ready(_))
    }

    /// The backend failed mid-body: readers see an error, nothing is stored.
    pub async fn fail(&self, stall_timeout: Duration) {
        let mut readers = {
            let mut s = self.lock();
            s.done = true;
            s.failed = true;
            s.buffering = false;
            s.chunks = Vec::new();
            std::mem::take(&mut s.readers)
        };
        send_all(&mut readers, Chunk::Error, stall_timeout).await;
    }

    /// The complete body, if it was kept (it fit the buffer and did not fail).
    pub fn take_body(&self) -> Option<Vec<Bytes>> {
        let s = self.lock();
        if s.done && s.buffering && !s.failed {
            Some(s.chunks.clone())
        } else {
            None
        }
    }

    /// The response will not be stored: keep nothing and let no one else join.
    pub fn stop_buffering(&self) {
        let mut s = self.lock();
        s.buffering = false;
        s.joinable = false;
        s.chunks = Vec::new();
    }

    /// Whether the body is still being kept (it fits the storage limit so far).
    pub fn is_buffering(&self) -> bool {
        self.lock().buffering
    }
}

async fn send_all(readers: &mut Vec<ReaderTx>, chunk: Chunk, stall_timeout: Duration) {
    let mut i = 0;
    while i < readers.len() {
        let c = match &chunk {
            Chunk::Data(b) => Chunk::Data(b.clone()),
            Chunk::Error => Chunk::Error,
        };
        let ok = match readers[i].tx.try_send(c) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Closed(_)) => false,
            Err(mpsc::error::TrySendError::Full(c)) => {
                matches!(
                    tokio::time::timeout(stall_timeout, readers[i].tx.send(c)).await,
                    Ok(Ok(()))
                )
            }
        };
        if ok {
            i += 1;
        } else {
            readers.swap_remove(i);
        }
    }
}

impl Reader {
    /// The next piece of the body; `None` at the end.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Incomplete>>> {
        if let Some(b) = self.replay.next() {
            return Poll::Ready(Some(Ok(b)));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        if self.failed_at_join {
            self.ended = true;
            return Poll::Ready(Some(Err(Incomplete)));
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Chunk::Data(b))) => Poll::Ready(Some(Ok(b))),
            Poll::Ready(Some(Chunk::Error)) => {
                self.ended = true;
                Poll::Ready(Some(Err(Incomplete)))
            }
            Poll::Ready(None) => {
                self.ended = true;
                // Closed without `finish`: the filler failed, was dropped, or dropped
                // this reader for stalling.
                if self.complete.load(Ordering::Acquire) {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Err(Incomplete)))
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }

    pub async fn next_chunk(&mut self) -> Option<Result<Bytes, Incomplete>> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// Puts chunks already read back in front of what is left, so that the reader
    /// yields them again (a request that read ahead, then sends the body after all).
    pub fn unread(&mut self, mut chunks: Vec<Bytes>) {
        chunks.extend(self.replay.by_ref());
        self.replay = chunks.into_iter();
    }
}

/// The fills in flight, by cache key.
pub struct Coalescer<H> {
    inflight: Mutex<HashMap<CacheKey, Arc<Fill<H>>>>,
    /// What waiters get when a filler ends without publishing a head.
    abandoned: fn() -> H,
}

impl<H> Coalescer<H> {
    /// `abandoned` makes the head published when a filler goes away without one.
    pub fn new(abandoned: fn() -> H) -> Arc<Coalescer<H>> {
        Arc::new(Coalescer {
            inflight: Mutex::new(HashMap::new()),
            abandoned,
        })
    }

    fn map(&self) -> MutexGuard<'_, HashMap<CacheKey, Arc<Fill<H>>>> {
        self.inflight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fill for `key`, and the guard of a new one when this call created it (the
    /// caller must then drive the fetch, holding the guard until it is done).
    pub fn get_or_create(
        self: &Arc<Self>,
        key: &CacheKey,
        max_buffer: usize,
    ) -> (Arc<Fill<H>>, Option<FillGuard<H>>) {
        let mut map = self.map();
        if let Some(f) = map.get(key) {
            return (f.clone(), None);
        }
        let f = Fill::new(max_buffer);
        map.insert(key.clone(), f.clone());
        let guard = FillGuard {
            fill: f.clone(),
            coalescer: self.clone(),
            key: key.clone(),
            registered: true,
        };
        (f, Some(guard))
    }

    /// The fill for `key`, if one is running.
    pub fn get(&self, key: &CacheKey) -> Option<Arc<Fill<H>>> {
        self.map().get(key).cloned()
    }

    /// Keys with a fill that new requests may join.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes `fill` from the map if it is still the one registered for `key`.
    fn remove(&self, key: &CacheKey, fill: &Arc<Fill<H>>) {
        let mut map = self.map();
        if map.get(key).is_some_and(|f| Arc::ptr_eq(f, fill)) {
            map.remove(key);
        }
    }
}

/// The filler's ownership of a fill (see the module documentation): dropping it ends the
/// fill for everyone, whatever state it was left in.
pub struct FillGuard<H> {
    fill: Arc<Fill<H>>,
    coalescer: Arc<Coalescer<H>>,
    key: CacheKey,
    registered: bool,
}

impl<H> FillGuard<H> {
    pub fn fill(&self) -> &Arc<Fill<H>> {
        &self.fill
    }

    pub fn key(&self) -> &CacheKey {
        &self.key
    }

    /// New requests for the key stop joining this fill (its response will not be
    /// shared); the fill goes on for those already attached.
    pub fn unregister(&mut self) {
        if std::mem::take(&mut self.registered) {
            self.coalescer.remove(&self.key, &self.fill);
        }
    }
}

impl<H> Drop for FillGuard<H> {
    fn drop(&mut self) {
        self.unregister();
        self.fill.abandon(self.coalescer.abandoned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn late_reader_replays_then_follows() {
        let fill: Arc<Fill<u16>> = Fill::new(1024);
        let mut early = fill.join().unwrap();
        fill.set_head(200);
        assert_eq!(*fill.head().await, 200);
        let t = Duration::from_secs(1);
        fill.push(Bytes::from_static(b"a"), t).await;
        let mut late = fill.join().unwrap();
        fill.push(Bytes::from_static(b"b"), t).await;
        fill.finish();
        let mut got = Vec::new();
        while let Some(c) = late.next_chunk().await {
            got.push(c.unwrap());
        }
        assert_eq!(
            got,
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]
        );
        assert_eq!(early.next_chunk().await.unwrap().unwrap(), "a");
        assert_eq!(early.next_chunk().await.unwrap().unwrap(), "b");
        assert!(early.next_chunk().await.is_none());
        assert_eq!(fill.take_body().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn unread_chunks_come_again_before_the_rest() {
        let fill: Arc<Fill<u16>> = Fill::new(1024);
        let mut r = fill.join().unwrap();
        let t = Duration::from_secs(1);
        fill.push(Bytes::from_static(b"a"), t).await;
        let a = r.next_chunk().await.unwrap().unwrap();
        r.unread(vec![a]);
        fill.push(Bytes::from_static(b"b"), t).await;
        fill.finish();
        assert_eq!(r.next_chunk().await.unwrap().unwrap(), "a");
        assert_eq!(r.next_chunk().await.unwrap().unwrap(), "b");
        assert!(r.next_chunk().await.is_none());
        // After the end, too: the chunks, then the end again.
        r.unread(vec![Bytes::from_static(b"ab")]);
        assert_eq!(r.next_chunk().await.unwrap().unwrap(), "ab");
        assert!(r.next_chunk().await.is_none());
    }

    #[tokio::test]
    async fn oversize_body_stops_buffering_and_joining() {
        let fill: Arc<Fill<u16>> = Fill::new(3);
        let mut r = fill.join().unwrap();
        let t = Duration::from_secs(1);
        fill.push(Bytes::from_static(b"ab"), t).await;
        fill.push(Bytes::from_static(b"cd"), t).await;
        assert!(fill.join().is_none());
        fill.finish();
        assert!(fill.take_body().is_none());
        assert_eq!(r.next_chunk().await.unwrap().unwrap(), "ab");
        assert_eq!(r.next_chunk().await.unwrap().unwrap(), "cd");
    }

    #[tokio::test]
    async fn failure_reaches_readers() {
        let fill: Arc<Fill<u16>> = Fill::new(10);
        let mut r = fill.join().unwrap();
        fill.push(Bytes::from_static(b"ab"), Duration::from_secs(1))
            .await;
        fill.fail(Duration::from_secs(1)).await;
        assert!(r.next_chunk().await.unwrap().is_ok());
        assert!(r.next_chunk().await.unwrap().is_err());
        assert!(fill.take_body().is_none());
    }

    fn key(path: &str) -> CacheKey {
        CacheKey::for_request(
            crate::Scheme::Http,
            &path.parse().unwrap(),
            &http::HeaderMap::new(),
        )
    }

    #[tokio::test]
    async fn dropped_filler_releases_head_waiters_and_the_key() {
        let fills: Arc<Coalescer<u16>> = Coalescer::new(|| 599);
        let (fill, guard) = fills.get_or_create(&key("/a"), 10);
        let guard = guard.unwrap();
        let (same, none) = fills.get_or_create(&key("/a"), 10);
        assert!(none.is_none() && Arc::ptr_eq(&fill, &same));
        let waiter = tokio::spawn({
            let fill = fill.clone();
            async move { *fill.head().await }
        });
        drop(guard);
        assert_eq!(waiter.await.unwrap(), 599);
        assert!(fills.is_empty());
        let (_, leader) = fills.get_or_create(&key("/a"), 10);
        assert!(leader.is_some(), "the next request starts a new fill");
    }

    #[tokio::test]
    async fn dropped_filler_mid_body_fails_its_readers() {
        let fills: Arc<Coalescer<u16>> = Coalescer::new(|| 599);
        let (fill, guard) = fills.get_or_create(&key("/b"), 10);
        let mut r = fill.join().unwrap();
        fill.set_head(200);
        fill.push(Bytes::from_static(b"ab"), Duration::from_secs(1))
            .await;
        drop(guard);
        assert_eq!(*fill.head().await, 200, "a published head stays");
        assert_eq!(r.next_chunk().await.unwrap().unwrap(), "ab");
        assert!(r.next_chunk().await.unwrap().is_err());
        assert!(r.next_chunk().await.is_none());
        assert!(fill.take_body().is_none());
    }

    #[tokio::test]
    async fn finished_fill_ends_cleanly_after_its_guard_drops() {
        let fills: Arc<Coalescer<u16>> = Coalescer::new(|| 599);
        let (fill, guard) = fills.get_or_create(&key("/c"), 10);
        let mut r = fill.join().unwrap();
        fill.set_head(200);
        fill.push(Bytes::from_static(b"ab"), Duration::from_secs(1))
            .await;
        fill.finish();
        drop(guard);
        assert_eq!(r.next_chunk().await.unwrap().unwrap(), "ab");
        assert!(r.next_chunk().await.is_none());
        assert_eq!(fill.take_body().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_reader_dropped_for_stalling_sees_an_error_not_an_end() {
        let fill: Arc<Fill<u16>> = Fill::new(1 << 20);
        let mut slow = fill.join().unwrap();
        let t = Duration::from_millis(1);
        // More chunks than the reader's channel holds: the filler gives up on it.
        for _ in 0..READER_CHANNEL + 1 {
            fill.push(Bytes::from_static(b"x"), t).await;
        }
        fill.finish();
        let mut got = 0;
        let end = loop {
            match slow.next_chunk().await {
                Some(Ok(_)) => got += 1,
                other => break other,
            }
        };
        assert_eq!(got, READER_CHANNEL);
        assert!(matches!(end, Some(Err(Incomplete))), "truncated, not ended");
    }
}
