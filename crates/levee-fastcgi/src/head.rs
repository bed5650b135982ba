//! The CGI response head (RFC 3875 §6): header lines up to a blank line, where `Status:`
//! carries the status and `Location:` alone means a redirect.

use http::header::{HeaderMap, HeaderName, HeaderValue, LOCATION};
use http::StatusCode;

/// A head larger than this is refused, so a script that never ends its headers cannot make
/// levee buffer without bound.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

#[derive(Debug)]
pub(crate) struct Head {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// How many bytes of the input the head took, blank line included.
    pub len: usize,
}

/// Parses the head at the start of `buf`: `Ok(None)` if the blank line that ends it has not
/// arrived yet, `Err` (a description for a protocol error) if a line is malformed. Lines may
/// end in CRLF (what php sends) or a bare LF.
pub(crate) fn parse(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut lines = Vec::new();
    let mut pos = 0;
    let len = loop {
        let Some(nl) = buf[pos..].iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let line = &buf[pos..pos + nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        pos += nl + 1;
        if line.is_empty() {
            break pos;
        }
        lines.push(line);
    };

    let mut status = None;
    let mut headers = HeaderMap::with_capacity(lines.len());
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(format!(
                "malformed header line in the script's output (no colon): {}",
                escape(line)
            ));
        };
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.eq_ignore_ascii_case(b"status") {
            status = Some(parse_status(value)?);
            continue;
        }
        let name = HeaderName::from_bytes(name).map_err(|_| {
            format!(
                "invalid header name in the script's output: {}",
                escape(line)
            )
        })?;
        let value = HeaderValue::from_bytes(value).map_err(|_| {
            format!(
                "invalid header value in the script's output: {}",
                escape(line)
            )
        })?;
        headers.append(name, value);
    }
    let status = match status {
        Some(s) => s,
        // RFC 3875 §6.2.3: a client redirect carries Location and no Status.
        None if headers.contains_key(LOCATION) => StatusCode::FOUND,
        None => StatusCode::OK,
    };
    Ok(Some(Head {
        status,
        headers,
        len,
    }))
}

/// `404 Not Found` → 404. The reason phrase is not kept: HTTP/2 has none and HTTP/1.1
/// clients must ignore it.
fn parse_status(value: &[u8]) -> Result<StatusCode, String> {
    let code = value
        .split(|&b| b == b' ' || b == b'\t')
        .next()
        .unwrap_or(b"");
    let status = (code.len() == 3 && code.iter().all(u8::is_ascii_digit))
        .then(|| StatusCode::from_bytes(code).ok())
        .flatten()
        // A 1xx is not a final response: passing it on would leave the client waiting.
        .filter(|s| !s.is_informational());
    status.ok_or_else(|| {
        format!(
            "invalid Status header in the script's output: {}",
            escape(value)
        )
    })
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// A line for an error message: escaped, at most 120 bytes.
fn escape(line: &[u8]) -> String {
    let cut = &line[..line.len().min(120)];
    let mut s: String = cut.escape_ascii().to_string();
    if cut.len() < line.len() {
        s.push_str("...");
    }
    format!("\"{s}\"")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn head(s: &str) -> Head {
        parse(s.as_bytes()).unwrap().unwrap()
    }

    #[test]
    fn plain_php_head() {
        let input = "X-Powered-By: PHP/8.2\r\nContent-type: text/html; charset=UTF-8\r\n\r\nhello";
        let h = head(input);
        assert_eq!(h.status, StatusCode::OK);
        assert_eq!(h.headers["content-type"], "text/html; charset=UTF-8");
        assert_eq!(h.headers["x-powered-by"], "PHP/8.2");
        assert_eq!(&input[h.len..], "hello");
    }

    #[test]
    fn status_sets_the_status_and_is_not_a_header() {
        let h = head("Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\n");
        assert_eq!(h.status, StatusCode::NOT_FOUND);
        assert!(!h.headers.contains_key("status"));
        assert_eq!(head("status:503\n\n").status, 503);
        assert_eq!(head("Status: 299 Custom\n\n").status, 299);
    }

    #[test]
    fn location_without_status_is_a_302() {
        let h = head("Location: https://example.org/next\r\n\r\n");
        assert_eq!(h.status, StatusCode::FOUND);
        assert_eq!(h.headers["location"], "https://example.org/next");
        let h = head("Status: 301 Moved Permanently\r\nLocation: /new\r\n\r\n");
        assert_eq!(h.status, StatusCode::MOVED_PERMANENTLY);
        let h = head("Status: 201 Created\r\nLocation: /item/7\r\n\r\n");
        assert_eq!(h.status, StatusCode::CREATED);
    }

    #[test]
    fn repeated_headers_are_all_kept() {
        let h = head("Set-Cookie: a=1; path=/\r\nSet-Cookie: b=2\r\nVary: Accept\r\n\r\n");
        let cookies: Vec<_> = h.headers.get_all("set-cookie").iter().collect();
        assert_eq!(cookies, ["a=1; path=/", "b=2"]);
    }

    #[test]
    fn values_are_trimmed_and_may_be_empty_or_contain_colons() {
        let h = head("X-A:   spaced \t\r\nX-Empty:\r\nX-Time: 12:30:00\r\n\r\n");
        assert_eq!(h.headers["x-a"], "spaced");
        assert_eq!(h.headers["x-empty"], "");
        assert_eq!(h.headers["x-time"], "12:30:00");
    }

    #[test]
    fn lf_only_and_partial_heads() {
        let h = head("A: 1\nB: 2\n\nbody\n\nmore");
        assert_eq!(h.headers.len(), 2);
        assert_eq!(h.len, "A: 1\nB: 2\n\n".len());
        assert!(parse(b"A: 1\r\nB: 2\r\n").unwrap().is_none());
        assert!(parse(b"A: 1\r\nB: 2\r\n\r").unwrap().is_none());
        assert!(parse(b"").unwrap().is_none());
        assert!(parse(b"Content-Type: text/ht").unwrap().is_none());
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        for bad in [
            "no colon here\r\n\r\n",
            ": empty name\r\n\r\n",
            "Bad Name: x\r\n\r\n",
            " folded: x\r\n\r\n",
            "X: a\rb\r\n\r\n",
            "X: nul\0\r\n\r\n",
            "Status: abc\r\n\r\n",
            "Status: 99\r\n\r\n",
            "Status: 1000 Too Big\r\n\r\n",
            "Status: 100 Continue\r\n\r\n",
            "Status:\r\n\r\n",
        ] {
            let err = parse(bad.as_bytes()).unwrap_err();
            assert!(err.contains("script's output"), "{bad:?}: {err}");
        }
        let err = parse(format!("{}\n\n", "x".repeat(500)).as_bytes()).unwrap_err();
        assert!(err.len() < 250, "the line is cut in the message: {err}");
    }

    #[test]
    fn non_ascii_values_are_kept_as_bytes() {
        let h = parse(b"X-Name: caf\xc3\xa9\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.headers["x-name"].as_bytes(), b"caf\xc3\xa9");
    }
}
