//! `Vary: Accept-Encoding` for negotiated responses (RFC 9110 §12.5.5).

use http::header::{HeaderMap, HeaderValue, VARY};

use crate::coding::trim_ows;

/// Adds `Accept-Encoding` to a response's `Vary`, as any response whose coding was
/// negotiated needs (so that shared caches downstream keep one copy per coding).
///
/// Nothing changes if `Vary` already names it (in any case, in any of its field lines)
/// or is `*` (which already varies on everything). Otherwise it is appended to the
/// existing list: all `Vary` field lines become one, `existing, Accept-Encoding`, which
/// RFC 9110 §5.3 makes equivalent and which some caches read more reliably.
pub fn add_vary_accept_encoding(headers: &mut HeaderMap) {
    let mut joined: Vec<u8> = Vec::new();
    for v in headers.get_all(VARY) {
        for name in v.as_bytes().split(|&b| b == b',') {
            let name = trim_ows(name);
            if name == b"*" || name.eq_ignore_ascii_case(b"accept-encoding") {
                return;
            }
            if name.is_empty() {
                continue;
            }
            if !joined.is_empty() {
                joined.extend_from_slice(b", ");
            }
            joined.extend_from_slice(name);
        }
    }
    if joined.is_empty() {
        headers.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
        return;
    }
    joined.extend_from_slice(b", Accept-Encoding");
    match HeaderValue::from_bytes(&joined) {
        Ok(v) => {
            headers.insert(VARY, v);
        }
        // Cannot happen (the parts came from valid values), but a second field line
        // means the same thing, so fall back to it rather than fail.
        Err(_) => {
            headers.append(VARY, HeaderValue::from_static("Accept-Encoding"));
        }
    }
}
