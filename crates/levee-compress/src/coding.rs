//! The content codings levee can produce or undo, how hard to compress, and the token
//! syntax the header parsers share.

use http::header::{HeaderMap, HeaderValue, CONTENT_ENCODING};

/// The error type of the streaming bodies, the same as levee-proxy's `BoxError`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A content coding levee can produce or undo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coding {
    /// No transformation (RFC 9110 §8.4.1: "identity" is never sent in Content-Encoding).
    Identity,
    /// RFC 1952 gzip (RFC 9110 §8.4.1.3), also accepted as `x-gzip`.
    Gzip,
    /// RFC 7932 brotli.
    Br,
    /// RFC 8878 Zstandard, with the 8 MiB window limit of RFC 9659.
    Zstd,
}

impl Coding {
    /// Every coding, identity first.
    pub const ALL: [Coding; 4] = [Coding::Identity, Coding::Gzip, Coding::Br, Coding::Zstd];

    /// The token as it appears in `Accept-Encoding` and `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Identity => "identity",
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The coding named by one token, case-insensitively; `x-gzip` is gzip (RFC 9110
    /// §8.4.1.3 asks recipients to treat them as equivalent). Unknown tokens are `None`.
    pub fn from_token(token: &str) -> Option<Coding> {
        Coding::from_token_bytes(token.as_bytes())
    }

    pub(crate) fn from_token_bytes(t: &[u8]) -> Option<Coding> {
        if t.eq_ignore_ascii_case(b"gzip") || t.eq_ignore_ascii_case(b"x-gzip") {
            Some(Coding::Gzip)
        } else if t.eq_ignore_ascii_case(b"br") {
            Some(Coding::Br)
        } else if t.eq_ignore_ascii_case(b"zstd") {
            Some(Coding::Zstd)
        } else if t.eq_ignore_ascii_case(b"identity") {
            Some(Coding::Identity)
        } else {
            None
        }
    }

    /// The coding of a response from one `Content-Encoding` field value.
    ///
    /// An empty value or `identity` is [`Coding::Identity`]. A list of codings (`gzip, br`:
    /// applied one after the other) is `None` unless all but one are identity, because one
    /// [`DecompressBody`] undoes exactly one coding; unknown codings are `None`. `None`
    /// means "levee cannot undo this": pass it through only to clients that accept it as
    /// sent, or not at all.
    pub fn from_content_encoding(v: &HeaderValue) -> Option<Coding> {
        Coding::fold_list(Coding::Identity, v.as_bytes())
    }

    /// The coding of a response from all its `Content-Encoding` field lines (RFC 9110
    /// §5.3: several lines are one comma-separated list); no field at all is identity.
    pub fn from_headers(headers: &HeaderMap) -> Option<Coding> {
        headers
            .get_all(CONTENT_ENCODING)
            .iter()
            .try_fold(Coding::Identity, |acc, v| {
                Coding::fold_list(acc, v.as_bytes())
            })
    }

    /// Adds the codings of one comma-separated list to `acc`: identity adds nothing, a
    /// second real coding or an unknown one makes the whole `None`.
    fn fold_list(mut acc: Coding, list: &[u8]) -> Option<Coding> {
        for part in list.split(|&b| b == b',') {
            let t = trim_ows(part);
            if t.is_empty() {
                continue;
            }
            acc = match (acc, Coding::from_token_bytes(t)?) {
                (c, Coding::Identity) | (Coding::Identity, c) => c,
                _ => return None,
            };
        }
        Some(acc)
    }
}

impl std::fmt::Display for Coding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.token())
    }
}

/// How hard to compress. Levels were chosen by measuring a real 100 KiB HTML page; the
/// figures are in `codec.rs` (`params`), reproducible with `examples/levels.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Level {
    /// For streaming while the client waits: cheap per byte, so a busy proxy on a small
    /// machine does not become CPU-bound compressing pass-through traffic.
    Fast,
    /// For stored objects, compressed once and served many times: spend more CPU once
    /// for smaller transfers on every hit, short of the levels whose cost explodes.
    #[default]
    Default,
}

/// Strips optional whitespace (RFC 9110 §5.6.3: spaces and horizontal tabs).
pub(crate) fn trim_ows(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ' && b != b'\t');
    let Some(start) = start else {
        return &[];
    };
    let end = s
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .unwrap_or(start);
    &s[start..=end]
}
