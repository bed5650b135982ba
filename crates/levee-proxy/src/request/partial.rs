//! Range requests answered from stored full responses (RFC 9110 §14; RFC 9111 §3.3–3.4).
//! What to send is decided by [`levee_cache::range`] (pure, unit-tested against the
//! RFC's examples); this module makes the 206 or 416, and gets a miss its whole body
//! first.
//!
//! - A hit, stale or revalidated entry: [`answer`], called by `respond::entry` after the
//!   client's other preconditions (a 304 comes first, RFC 9110 §13.2.2), cuts the range
//!   from the body in the coding the client gets (the stored one or a derived form; a
//!   slice of `Bytes`, no copy). Ranges apply to that representation: `Content-Encoding:
//!   gzip` with a range of the gzip bytes. Several ranges make a multipart/byteranges
//!   body, except over a content coding (what a part's bytes would be is ambiguous to
//!   clients): the whole response then, always a correct answer.
//! - A miss (`range_miss.rs`): the fill asks the backend for the whole response (it
//!   never forwards `Range`), shared by concurrent requests as any fill. A range request
//!   whose response is to be stored waits for the whole body, then is answered from the
//!   entry the filler stored, here, with the same bytes later hits get.
//! - levee never stores a 206 nor combines partial responses (ARCHITECTURE.md): a 206
//!   only reaches a client through a pass.

use super::next::StreamHead;
use std::collections::VecDeque;
use std::hash::BuildHasher;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Method, Response, StatusCode};
use levee_cache::range::{self, ByteRange, Ranges, Representation};

use crate::body::{ProxyBody, Resp};

/// The 206 or 416 a GET with `Range` gets from a stored 200 whose client form has
/// `headers` and `body`, or `None` for the whole 200. `origin_bytes`: the body is the
/// origin's bytes (not a coding levee made), so its dates can be strong validators.
pub(crate) fn answer(
    request: &HeaderMap,
    headers: &HeaderMap,
    body: &Bytes,
    origin_bytes: bool,
) -> Option<Resp> {
    let total = body.len() as u64;
    let rep = Representation {
        headers,
        len: total,
        origin_bytes,
    };
    match range::decide(request, rep) {
        Ranges::Full => None,
        Ranges::One(r) => {
            let mut headers = headers.clone();
            set(&mut headers, header::CONTENT_RANGE, r.content_range(total));
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(r.len()));
            Some(partial(headers, ProxyBody::full(slice(body, r))))
        }
        Ranges::Many(_) if headers.contains_key(header::CONTENT_ENCODING) => None,
        Ranges::Many(parts) => Some(multipart(headers, body, &parts)),
        Ranges::Unsatisfiable => {
            // RFC 9110 §15.5.17; none of the representation's caching fields, so that no
            // downstream cache keeps the 416 for the URL.
            let mut resp = Response::new(ProxyBody::Empty);
            *resp.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            let h = resp.headers_mut();
            set(h, header::CONTENT_RANGE, format!("bytes */{total}"));
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
            for name in [header::DATE, header::VARY] {
                for v in headers.get_all(&name) {
                    h.append(name.clone(), v.clone());
                }
            }
            Some(resp)
        }
    }
}

fn partial(headers: HeaderMap, body: ProxyBody) -> Resp {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::PARTIAL_CONTENT;
    *resp.headers_mut() = headers;
    resp
}

/// RFC 9110 §14.6: each part with the representation's `Content-Type` and its
/// `Content-Range`, the ranges as slices of the body.
fn multipart(headers: &HeaderMap, body: &Bytes, parts: &[ByteRange]) -> Resp {
    let total = body.len() as u64;
    let boundary = boundary();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let mut pieces = VecDeque::with_capacity(2 * parts.len() + 1);
    for (i, r) in parts.iter().enumerate() {
        let mut head = String::with_capacity(128);
        if i > 0 {
            head.push_str("\r\n");
        }
        head.push_str("--");
        head.push_str(&boundary);
        head.push_str("\r\n");
        if let Some(ct) = content_type {
            head.push_str("Content-Type: ");
            head.push_str(ct);
            head.push_str("\r\n");
        }
        head.push_str("Content-Range: ");
        head.push_str(&r.content_range(total));
        head.push_str("\r\n\r\n");
        pieces.push_back(Bytes::from(head));
        pieces.push_back(slice(body, *r));
    }
    pieces.push_back(Bytes::from(format!("\r\n--{boundary}--\r\n")));
    let len: usize = pieces.iter().map(Bytes::len).sum();
    let mut headers = headers.clone();
    // The parts carry theirs (a stray one on the stored 200 would contradict them).
    headers.remove(header::CONTENT_RANGE);
    set(
        &mut headers,
        header::CONTENT_TYPE,
        format!("multipart/byteranges; boundary={boundary}"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    partial(headers, ProxyBody::Parts(pieces))
}

/// A boundary no body is likely to contain: 128 random bits (RFC 2046 §5.1.1: at most
/// 70 characters).
fn boundary() -> String {
    let state = std::collections::hash_map::RandomState::new();
    let a = state.hash_one(0u8);
    let b = state.hash_one(1u8);
    format!("levee-{a:016x}{b:016x}")
}

fn slice(body: &Bytes, r: ByteRange) -> Bytes {
    // `decide` keeps ranges within the body; the clamp is for the compiler's sake.
    let end = usize::try_from(r.end).map_or(body.len(), |e| (e + 1).min(body.len()));
    let start = usize::try_from(r.start).map_or(end, |s| s.min(end));
    body.slice(start..end)
}

fn set(headers: &mut HeaderMap, name: header::HeaderName, value: String) {
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(name, v);
    }
}

/// Whether a request that gets `head` from a fill waits for the whole body to be
/// answered with a range: a GET with a valid `Range`, for a 200 that will be stored
/// (it fits `max`, as far as its `Content-Length` says).
pub(crate) fn waits_for_whole_body(parts: &request::Parts, head: &StreamHead, max: usize) -> bool {
    if parts.method != Method::GET || head.status != StatusCode::OK || head.storable.is_err() {
        return false;
    }
    let Some(value) = parts.headers.get(header::RANGE) else {
        return false;
    };
    let fits = head
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_none_or(|len| len <= max as u64);
    fits && range::parse(value).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn req(range: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::RANGE, HeaderValue::from_str(range).unwrap());
        h
    }

    fn stored() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("260"));
        h.insert(header::ETAG, HeaderValue::from_static("\"v1\""));
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=60"),
        );
        h
    }

    async fn body(resp: Resp) -> Bytes {
        resp.into_body().collect().await.unwrap().to_bytes()
    }

    /// The alphabet ten times: 260 bytes, long enough for parts that do not coalesce.
    fn abc() -> Bytes {
        Bytes::from(b"abcdefghijklmnopqrstuvwxyz".repeat(10))
    }

    #[tokio::test]
    async fn one_range_keeps_the_representation_headers() {
        let resp = answer(&req("bytes=2-4"), &stored(), &abc(), true).unwrap();
        assert_eq!(resp.status(), 206);
        let h = resp.headers().clone();
        assert_eq!(h[header::CONTENT_RANGE], "bytes 2-4/260");
        assert_eq!(h[header::CONTENT_LENGTH], "3");
        assert_eq!(h[header::ETAG], "\"v1\"");
        assert_eq!(h[header::CACHE_CONTROL], "max-age=60");
        assert_eq!(h[header::CONTENT_TYPE], "text/plain");
        assert_eq!(body(resp).await, "cde");
    }

    #[tokio::test]
    async fn several_ranges_are_a_multipart_body() {
        let resp = answer(&req("bytes=0-1,-2"), &stored(), &abc(), true).unwrap();
        assert_eq!(resp.status(), 206);
        let ct = resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_string();
        let boundary = ct
            .strip_prefix("multipart/byteranges; boundary=")
            .unwrap()
            .to_string();
        let len: usize = resp.headers()[header::CONTENT_LENGTH]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let b = body(resp).await;
        assert_eq!(b.len(), len);
        let want = format!(
            "--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/260\r\n\r\nab\
             \r\n--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes 258-259/260\r\n\r\nyz\
             \r\n--{boundary}--\r\n"
        );
        assert_eq!(b, want.as_bytes());
        assert_ne!(
            boundary,
            super::boundary(),
            "boundaries differ per response"
        );
    }

    #[tokio::test]
    async fn several_ranges_of_a_coded_body_get_everything() {
        let mut h = stored();
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        let abc = abc();
        assert!(answer(&req("bytes=0-1,-2"), &h, &abc, true).is_none());
        // One range is a range of the coded bytes.
        let resp = answer(&req("bytes=0-1"), &h, &abc, true).unwrap();
        assert_eq!(resp.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(body(resp).await, "ab");
    }

    #[tokio::test]
    async fn unsatisfiable_is_416_with_the_length() {
        let resp = answer(&req("bytes=260-"), &stored(), &abc(), true).unwrap();
        assert_eq!(resp.status(), 416);
        assert_eq!(resp.headers()[header::CONTENT_RANGE], "bytes */260");
        assert!(!resp.headers().contains_key(header::CACHE_CONTROL));
        assert!(body(resp).await.is_empty());
    }

    #[test]
    fn no_or_invalid_range_is_the_whole_response() {
        let abc = abc();
        assert!(answer(&HeaderMap::new(), &stored(), &abc, true).is_none());
        assert!(answer(&req("bytes=5-1"), &stored(), &abc, true).is_none());
    }
}
