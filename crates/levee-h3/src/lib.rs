//! HTTP/3 for levee: QUIC on the UDP port of an HTTPS listener (quinn) and HTTP/3's
//! framing and QPACK (h3), with the bounds an open port needs, and nothing of what a
//! request means: each request goes to the caller's service, as hyper's connections
//! give theirs, and its response comes back as an `http::Response` with any body.
//!
//! - 0-RTT is off: early data is replayable, and levee's requests may change state.
//! - Address validation: while more handshakes are under way than `Limits::handshakes`,
//!   a client whose address is not yet validated is sent a Retry (a token it must echo
//!   from the address it claims), so a flood of spoofed Initial packets costs levee one
//!   small packet each, not a handshake.
//! - Connections per client network (`Limits::per_network`, a /24 or /56) and in all
//!   (the caller's semaphore, shared with TCP), streams per connection, header bytes,
//!   an idle timeout and a handshake timeout.
//!
//! quinn and h3 are the maintained QUIC and HTTP/3 crates of the tokio and hyper
//! ecosystem (h3 is hyper's); written by hand here is only the glue: a request body as
//! an `http_body::Body`, a response body written frame by frame, and the bounds.

#[doc(hidden)]
#[path = "fuzz.rs"]
pub mod __fuzz;
mod body;
mod limits;
mod serve;

pub use body::RecvBody;
pub use limits::Limits;
pub use serve::{bind, Endpoint, Error, Peer, Stats};
