//! `levee serve`: the caching reverse proxy.
//!
//! [`Server`] and [`serve_workers`] (server.rs) own the listeners and connections;
//! `request/` walks one request through its phases (classify → lookup → fill or pass →
//! respond); `upstream` talks to the backend under the overload limit; `encoding` makes
//! each response's content coding; `stats` counts what the admin listener exports.

mod admin;
mod body;
mod encoding;
mod headers;
mod request;
mod server;
mod stats;
mod upstream;
mod worker;
mod zerocopy;

pub use server::{serve_workers, BindError, Bound, ServeError, Server};
