//! levee-tls against real files and real handshakes: certificates made by rcgen in a
//! temporary directory, a rustls client (or openssl) on the other end of each
//! connection. One test binary, one module per subject.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixtures;
mod handshake;
mod issued;
mod load;
mod openssl;
mod reload;
