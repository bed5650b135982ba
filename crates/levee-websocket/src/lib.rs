//! WebSockets through levee (RFC 6455): the upgrade's bytes relayed both ways as they
//! come, never re-framed, so every extension (permessage-deflate) and subprotocol passes
//! untouched; levee reads only where frames begin and end ([`frames`]), so that it can
//! close a connection the way the RFC asks, with a Close frame between two frames
//! (`1001 Going Away` when it stops). Bounded per client network and in all
//! ([`tunnels`]), idle ones closed ([`relay`]).
//!
//! The HTTP side (which requests are upgrades, the backend's answer, the access log and
//! the metrics) is levee-proxy's upgrade step.

pub mod frames;
pub mod relay;
pub mod tunnels;

pub use relay::{relay, Closed, Ended};
pub use tunnels::{Full, Open, Tunnels};
