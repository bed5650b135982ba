//! What became of a request, as a value: where its response came from, why, for which
//! site, how long it waited for the backend. Made by `request::respond` with the
//! response (an [`Answer`]); `X-Cache` and `X-Cache-Reason` are written from it, and
//! the metrics, the access log and the dashboard read it. Nothing parses a header levee
//! wrote.

use std::borrow::Cow;
use std::time::Duration;

use crate::body::Resp;

/// Why a response was not stored or a request passed (`X-Cache-Reason`).
pub(crate) type Reason = Cow<'static, str>;

/// Where a response came from (`X-Cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheResult {
    /// Fresh from the cache.
    Hit,
    /// From the backend through a fill (stored or not).
    Miss,
    /// From the cache, stale (client's max-stale, stale-while-revalidate, or the backend
    /// failed).
    Stale,
    /// From the backend, never stored.
    Pass,
    /// From the cache after the backend confirmed it (304).
    Revalidated,
    /// A file of the document root.
    Static,
    /// An error levee made (backend down, overloaded, bad request).
    Error,
    /// Answered by levee as the last recipient (`Max-Forwards: 0`, `PURGE`); reads
    /// `PASS`, as it is not a cached response.
    Answered,
}

impl CacheResult {
    /// Every value, in the order of [`CacheResult::index`] (the metrics' array).
    pub const COUNTED: [CacheResult; 7] = [
        CacheResult::Hit,
        CacheResult::Miss,
        CacheResult::Stale,
        CacheResult::Pass,
        CacheResult::Revalidated,
        CacheResult::Static,
        CacheResult::Error,
    ];

    /// What `X-Cache` and the access log say.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheResult::Hit => "HIT",
            CacheResult::Miss => "MISS",
            CacheResult::Stale => "STALE",
            CacheResult::Pass | CacheResult::Answered => "PASS",
            CacheResult::Revalidated => "REVALIDATED",
            CacheResult::Static => "STATIC",
            CacheResult::Error => "ERROR",
        }
    }

    /// The `cache` label of `levee_requests_total`.
    pub fn label(self) -> &'static str {
        match self {
            CacheResult::Hit => "hit",
            CacheResult::Miss => "miss",
            CacheResult::Stale => "stale",
            CacheResult::Pass | CacheResult::Answered => "pass",
            CacheResult::Revalidated => "revalidated",
            CacheResult::Static => "static",
            CacheResult::Error => "error",
        }
    }

    /// Position in [`CacheResult::COUNTED`].
    pub fn index(self) -> usize {
        match self {
            CacheResult::Hit => 0,
            CacheResult::Miss => 1,
            CacheResult::Stale => 2,
            CacheResult::Pass | CacheResult::Answered => 3,
            CacheResult::Revalidated => 4,
            CacheResult::Static => 5,
            CacheResult::Error => 6,
        }
    }

    /// Whether the response went through levee as an intermediary (RFC 9110 §7.6.3:
    /// `Via`), rather than being made by it.
    pub fn forwarded(self) -> bool {
        matches!(
            self,
            CacheResult::Hit
                | CacheResult::Miss
                | CacheResult::Stale
                | CacheResult::Pass
                | CacheResult::Revalidated
        )
    }

    /// A response the dashboard's table of URLs not served from the cache wants.
    pub fn went_to_backend(self) -> bool {
        matches!(self, CacheResult::Miss | CacheResult::Pass)
    }
}

/// A response and what it is: what every phase that answers returns.
pub(crate) struct Answer {
    pub resp: Resp,
    pub outcome: Outcome,
}

/// What became of one request; travels with its response ([`Answer`]), not in the
/// response's extensions, which would cost an allocation per hit.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    pub result: CacheResult,
    /// Why it was not stored, or passed ("stored" for a MISS that was).
    pub reason: Option<Reason>,
    /// The site that served it, by its place in `Shared::sites` (an index, not a name:
    /// nothing shared is touched per request). None when no site answers the host.
    pub site: Option<usize>,
    /// How long it waited for the backend's response head, if it asked the backend.
    pub backend_wait: Option<Duration>,
    /// Its access log line is written later, by what it became (a WebSocket, at close).
    pub logged_later: bool,
}

impl Outcome {
    pub fn new(result: CacheResult, reason: Option<Reason>) -> Outcome {
        Outcome {
            result,
            reason,
            site: None,
            backend_wait: None,
            logged_later: false,
        }
    }
}
