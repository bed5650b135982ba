//! Why a request got no backend slot, and what its client is told.

/// Why a request got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// People's queue was full.
    QueueFull,
    /// People's wait ran out (`backend_queue_timeout`).
    QueueTimeout,
    /// The client's network already has its share in flight and waiting.
    NetworkOverShare,
    /// The anonymous lane cannot serve it within its wait.
    LaneFull,
    /// It waited `backend_anonymous_wait` in the lane.
    LaneWait,
}

impl Refusal {
    pub const ALL: [Refusal; 5] = [
        Refusal::QueueFull,
        Refusal::QueueTimeout,
        Refusal::NetworkOverShare,
        Refusal::LaneFull,
        Refusal::LaneWait,
    ];

    /// `X-Cache-Reason`, the access log and the metrics' `reason` label.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::QueueFull => "backend-queue-full",
            Refusal::QueueTimeout => "backend-queue-timeout",
            Refusal::NetworkOverShare => "network-over-share",
            Refusal::LaneFull => "anonymous-lane-full",
            Refusal::LaneWait => "anonymous-wait",
        }
    }

    pub fn status(self) -> http::StatusCode {
        match self {
            Refusal::NetworkOverShare => http::StatusCode::TOO_MANY_REQUESTS,
            _ => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// No slot: why, and when to come back (`Retry-After`, seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub why: Refusal,
    pub retry_after: u64,
}
