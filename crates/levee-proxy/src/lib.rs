//! `levee serve`: the caching reverse proxy.
//!
//! [`Server`] owns the listener and connections; [`handler`] walks one request through
//! its phases; [`upstream`] talks to the backend under the overload limit; [`encoding`]
//! picks and makes each response's content coding.

pub mod body;
pub mod encoding;
pub mod handler;
pub mod headers;
pub mod server;
pub mod upstream;
pub mod zerocopy;

pub use server::{serve_workers, BindError, ServeError, Server};
