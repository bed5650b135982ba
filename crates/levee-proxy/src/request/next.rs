//! What a phase decided should happen next. Every phase returns one; the driver
//! (`request::drive`) carries it out, so the order of a request's life is read in one
//! place and no phase calls another sideways.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderMap, StatusCode};
use levee_cache::{CacheKey, Entry, NotStored, Reader, VaryKey};

use crate::outcome::{Answer, CacheResult, Reason};
use crate::upstream::UpstreamError;

pub(crate) enum Next {
    /// Serve a file of the document root, if there is one for the path.
    Files,
    /// Decide between the cache (under its key) and a pass.
    Classify,
    /// Look the key up in the cache.
    Lookup(CacheKey),
    /// Respond from the cache.
    Serve(Serve),
    /// Serve a stale entry now and revalidate it in the background, once.
    ServeAndRevalidate { key: CacheKey, serve: Serve },
    /// Fetch through the key's fill (shared with concurrent requests for it); `stale`
    /// is the stored response it validates and stands in for a failure.
    Fill {
        key: CacheKey,
        stale: Option<Arc<Entry>>,
    },
    /// Respond with a fill's response as it streams in.
    Stream(Stream),
    /// A range request on a miss: the whole body first (at most `max` bytes), then the
    /// range from the entry the fill stored; the whole response if it was not.
    StreamForRange { stream: Stream, max: usize },
    /// To the backend as the client sent it, never stored. `marked`: the key is marked
    /// hit-for-pass, and the response renews or clears the mark.
    Pass {
        reason: Reason,
        marked: Option<CacheKey>,
    },
    /// A response levee made: an error, a local answer, a file.
    Respond(Answer),
    /// A WebSocket: to the backend, then relayed; never the cache.
    Upgrade,
}

impl Next {
    pub fn pass(reason: impl Into<Reason>) -> Next {
        Next::Pass {
            reason: reason.into(),
            marked: None,
        }
    }
}

/// A stored response to send, and what it counts as.
pub(crate) struct Serve {
    pub entry: Arc<Entry>,
    pub result: CacheResult,
    /// The time its age is computed at.
    pub now: Instant,
    /// How long the request waited for the backend, when it did (a range miss answered
    /// from the entry its fill stored).
    pub waited: Option<Duration>,
    /// Why it is served so, when not simply "stored" (`backend-busy`: stale while the
    /// backend is saturated).
    pub reason: Option<&'static str>,
}

/// A fill's response head and a reader of its body.
pub(crate) struct Stream {
    pub head: Arc<FillHead>,
    pub reader: Reader,
    pub now: Instant,
    /// How long the request waited for the head.
    pub waited: Duration,
}

/// What waiting requests learn from a fill once the backend answered.
pub(crate) enum FillHead {
    /// A full response is streaming in.
    Stream(StreamHead),
    /// The backend confirmed (304) a stale entry; here it is, refreshed.
    Refreshed(Arc<Entry>),
    /// A tier below memory (disk, another node through Redis) had it: a hit.
    Found(Arc<Entry>),
    /// No response: connect failure, timeout, overload, or the filler went away.
    Failed(UpstreamError),
    /// The backend answered 500, 502, 503 or 504 while a stale copy may stand in for it
    /// (RFC 5861 §4). Waiters with such a copy serve it; the others ask the backend.
    ErrorStatus(StatusCode),
}

impl FillHead {
    /// Published by the [`FillGuard`] when a filler ends without a head (a bug or a
    /// panic): waiters answer 502 or serve stale instead of waiting forever.
    pub fn abandoned() -> FillHead {
        FillHead::Failed(UpstreamError::Protocol {
            backend: "fill".into(),
            detail: "levee's fetch ended without a response".into(),
        })
    }
}

pub(crate) struct StreamHead {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub vary: VaryKey,
    pub storable: Result<(), NotStored>,
    pub initial_age: Duration,
    pub received: Instant,
    /// The entry the filler stored, once it did (`None` until then); closed without one
    /// when the filler ends without storing. A range request on a miss is answered from
    /// it (`range_miss::after_fill`).
    pub stored: tokio::sync::watch::Receiver<Option<Arc<Entry>>>,
}

impl StreamHead {
    /// `current_age` (RFC 9111 §4.2.3) at `now`.
    pub fn age(&self, now: Instant) -> Duration {
        self.initial_age + now.saturating_duration_since(self.received)
    }
}
