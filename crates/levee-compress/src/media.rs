//! Which media types are worth compressing.

use http::HeaderValue;

use crate::coding::trim_ows;

/// Whether a response with this `Content-Type` is worth compressing: text and the
/// text-like formats a PHP site serves (HTML, CSS, JavaScript, JSON, XML, SVG, feeds),
/// WebAssembly and the uncompressed font and icon formats.
///
/// Not: formats that are compressed already (images other than SVG/ICO/BMP, audio,
/// video, archives, PDF, `font/woff*`), because a second pass costs CPU and saves
/// nothing; `text/event-stream`, because each event would need a flush of its own and
/// a long-lived stream would hold an encoder's memory for its whole life; and a
/// missing or unparsable `Content-Type`, because the content could be anything.
/// Parameters such as `charset` are ignored; comparison is case-insensitive.
pub fn compressible(content_type: Option<&HeaderValue>) -> bool {
    let Some(v) = content_type else {
        return false;
    };
    let bytes = v.as_bytes();
    let essence = trim_ows(bytes.split(|&b| b == b';').next().unwrap_or(bytes));
    let Some(slash) = essence.iter().position(|&b| b == b'/') else {
        return false;
    };
    let top = &essence[..slash];
    let sub = &essence[slash + 1..];
    if !is_token(top) || !is_token(sub) {
        return false;
    }
    // Structured syntax suffixes (RFC 6839): application/ld+json, application/rss+xml,
    // image/svg+xml, application/problem+json...
    if ends_with_ignore_case(sub, b"+json") || ends_with_ignore_case(sub, b"+xml") {
        return true;
    }
    let is = |t: &[u8]| sub.eq_ignore_ascii_case(t);
    if top.eq_ignore_ascii_case(b"text") {
        return !is(b"event-stream");
    }
    if top.eq_ignore_ascii_case(b"application") {
        return [
            &b"json"[..],
            b"javascript",
            b"x-javascript",
            b"ecmascript",
            b"x-ecmascript",
            b"xml",
            b"xml-dtd",
            b"x-ndjson",
            b"yaml",
            b"x-yaml",
            b"wasm",
            b"graphql",
            b"x-httpd-php",
            b"vnd.ms-fontobject",
            b"x-font-ttf",
            b"x-font-truetype",
            b"x-font-otf",
            b"x-font-opentype",
            b"font-sfnt",
        ]
        .iter()
        .any(|t| is(t));
    }
    if top.eq_ignore_ascii_case(b"font") {
        // woff and woff2 carry their own compression.
        return [&b"ttf"[..], b"otf", b"sfnt", b"collection"]
            .iter()
            .any(|t| is(t));
    }
    if top.eq_ignore_ascii_case(b"image") {
        // Icons and bitmaps are usually stored uncompressed and shrink a lot.
        return [&b"x-icon"[..], b"vnd.microsoft.icon", b"bmp", b"x-ms-bmp"]
            .iter()
            .any(|t| is(t));
    }
    false
}

fn ends_with_ignore_case(s: &[u8], suffix: &[u8]) -> bool {
    s.len() >= suffix.len() && s[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

/// RFC 9110 §5.6.2 `token`: one or more `tchar`.
fn is_token(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
