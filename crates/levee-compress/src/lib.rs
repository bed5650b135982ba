//! HTTP content-coding for levee (RFC 9110 §8.4, §12.5.3): which coding a client accepts,
//! whether a response is worth compressing, and the gzip, brotli and zstd codecs, both
//! whole-buffer (for stored objects, compressed once) and streaming (for responses that
//! are passed through or filled while the client waits).
//!
//! Nothing here touches sockets or the cache: the proxy decides *when* to compress, this
//! crate only says *what* is acceptable and does the work with bounded memory.
//!
//! - [`Accepted`]: a parsed `Accept-Encoding`, [`Accepted::choose`] picks the coding to send.
//! - [`compressible`]: is this `Content-Type` worth compressing.
//! - [`compress`] / [`decompress`]: whole-buffer codecs; `decompress` has an output limit.
//! - [`CompressBody`] / [`DecompressBody`]: streaming `http_body::Body` wrappers.
//! - [`add_vary_accept_encoding`]: the `Vary` a negotiated response needs.
//!
//! ```
//! use http::header::{HeaderMap, HeaderValue, ACCEPT_ENCODING, CONTENT_ENCODING};
//! use levee_compress::{add_vary_accept_encoding, compress, compressible, Accepted, Coding, Level};
//!
//! let mut request = HeaderMap::new();
//! request.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip, br;q=0.9"));
//! let html = HeaderValue::from_static("text/html; charset=utf-8");
//! assert!(compressible(Some(&html)));
//!
//! // Smallest first among equals; identity when nothing else is acceptable, and also
//! // when the client refused even identity (RFC 9110 allows ignoring the header).
//! let coding = Accepted::parse(&request)
//!     .choose(&[Coding::Br, Coding::Zstd, Coding::Gzip, Coding::Identity])
//!     .unwrap_or(Coding::Identity);
//! assert_eq!(coding, Coding::Gzip);
//!
//! let content = compress(coding, b"<!DOCTYPE html><p>hello</p>", Level::Default)?;
//! let mut response = HeaderMap::new();
//! if coding != Coding::Identity {
//!     response.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.token()));
//! }
//! add_vary_accept_encoding(&mut response);
//! # assert!(!content.is_empty());
//! # Ok::<(), std::io::Error>(())
//! ```

mod accept;
mod codec;
mod coding;
mod media;
mod stream;
mod vary;

pub use accept::Accepted;
pub use codec::{compress, compress_chunks, decompress, is_too_large, TooLarge};
pub use coding::{BoxError, Coding, Level};
pub use media::compressible;
pub use stream::{CompressBody, DecompressBody};
pub use vary::add_vary_accept_encoding;
