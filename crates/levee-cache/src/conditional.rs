//! Evaluating a client's preconditions against a stored response (RFC 9110 §13.2.2), and
//! deciding which stored response a 304 from the backend applies to (RFC 9111 §4.3.4).

use std::time::SystemTime;

use http::header::{
    HeaderMap, HeaderValue, DATE, ETAG, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH,
    IF_UNMODIFIED_SINCE, LAST_MODIFIED,
};
use http::{Method, StatusCode};

/// The answer to a conditional request, if it is not the full response.
///
/// `response` is the header section of a stored 200 (RFC 9111 §4.3.2: only a stored 200
/// or 206 is evaluated against; a redirect or an error takes precedence over
/// preconditions, RFC 9110 §13.2.1), so there is a current representation.
pub fn evaluate(method: &Method, request: &HeaderMap, response: &HeaderMap) -> Option<StatusCode> {
    let etag = response
        .get(ETAG)
        .and_then(|e| parse_tags(e.as_bytes()).next());
    let last_modified = date(response.get(LAST_MODIFIED));
    if request.contains_key(IF_MATCH) {
        // RFC 9110 §13.1.1: `*` is true when there is a current representation (there
        // is); a list needs a strong match.
        if !list_matches(request, IF_MATCH, etag, false) {
            return Some(StatusCode::PRECONDITION_FAILED);
        }
    } else if let Some(ius) = date(request.get(IF_UNMODIFIED_SINCE)) {
        // RFC 9110 §13.1.4: ignored when the representation has no modification date.
        if last_modified.is_some_and(|lm| lm > ius) {
            return Some(StatusCode::PRECONDITION_FAILED);
        }
    }
    let safe = method == Method::GET || method == Method::HEAD;
    if request.contains_key(IF_NONE_MATCH) {
        // RFC 9110 §13.1.2: `*` is false when there is a current representation; a list
        // uses weak comparison.
        if list_matches(request, IF_NONE_MATCH, etag, true) {
            return Some(if safe {
                StatusCode::NOT_MODIFIED
            } else {
                StatusCode::PRECONDITION_FAILED
            });
        }
    } else if safe {
        // RFC 9111 §4.3.2: without Last-Modified, a cache evaluates If-Modified-Since
        // against the stored Date (levee adds one to responses that arrive without).
        let modified = last_modified.or_else(|| date(response.get(DATE)));
        if let (Some(ims), Some(lm)) = (date(request.get(IF_MODIFIED_SINCE)), modified) {
            if lm <= ims {
                return Some(StatusCode::NOT_MODIFIED);
            }
        }
    }
    None
}

/// RFC 9111 §4.3.4: does a 304 answering a validation of the stored response with these
/// validators apply to it?
///
/// - A strong `ETag` in the 304 must be the stored strong `ETag`; a weak one must match
///   it weakly. Otherwise the 304 is about a representation levee does not have and
///   MUST NOT update the stored one.
/// - Without an `ETag`, a `Last-Modified` in the 304 must be the stored one.
/// - A 304 with no validator at all answers the one stored response levee nominated in
///   its request (levee's reading: §4.3.3 says a 304 means the stored response "can be
///   updated and reused", and only one was nominated), so it applies.
pub fn not_modified_applies(
    stored_etag: Option<&HeaderValue>,
    stored_last_modified: Option<&HeaderValue>,
    not_modified: &HeaderMap,
) -> bool {
    if let Some(new) = not_modified.get(ETAG) {
        let Some((new_weak, new_tag)) = parse_tags(new.as_bytes()).next() else {
            return false;
        };
        let Some((old_weak, old_tag)) = stored_etag.and_then(|e| parse_tags(e.as_bytes()).next())
        else {
            return false;
        };
        return if new_weak {
            new_tag == old_tag
        } else {
            !old_weak && new_tag == old_tag
        };
    }
    if let Some(new) = not_modified.get(LAST_MODIFIED) {
        return match (date(Some(new)), date(stored_last_modified)) {
            (Some(new), Some(old)) => new == old,
            _ => false,
        };
    }
    true
}

pub(crate) fn date(v: Option<&HeaderValue>) -> Option<SystemTime> {
    v.and_then(|v| v.to_str().ok())
        .and_then(crate::date::parse_http_date)
}

/// Whether the `If-Match` / `If-None-Match` list (every field line of `name`) matches
/// `etag`: `*` always does (the stored response is a current representation); `weak`
/// selects weak comparison (RFC 9110 §8.8.3.2).
fn list_matches(
    request: &HeaderMap,
    name: http::header::HeaderName,
    etag: Option<(bool, &[u8])>,
    weak: bool,
) -> bool {
    let lines = request.get_all(name);
    if lines.iter().any(|l| l.as_bytes().trim_ascii() == b"*") {
        return true;
    }
    let Some((etag_weak, etag_tag)) = etag else {
        return false;
    };
    lines.iter().any(|line| {
        parse_tags(line.as_bytes()).any(|(cand_weak, cand_tag)| {
            cand_tag == etag_tag && (weak || (!cand_weak && !etag_weak))
        })
    })
}

/// The entity-tags of a list, as (weak, opaque-tag without its quotes), working on bytes
/// so that tags with obs-text compare too. A quoted tag may contain commas. Malformed
/// members (unquoted, `w/`) are kept whole, so that they match only the same bytes.
pub(crate) fn parse_tags(list: &[u8]) -> impl Iterator<Item = (bool, &[u8])> {
    let mut rest = list;
    std::iter::from_fn(move || {
        loop {
            rest = rest.trim_ascii_start();
            match rest.first() {
                None => return None,
                Some(b',') => rest = &rest[1..],
                Some(_) => break,
            }
        }
        let (weak, tagged) = match rest.strip_prefix(b"W/") {
            Some(t) if t.first() == Some(&b'"') => (true, t),
            _ => (false, rest),
        };
        if let Some(inner) = tagged.strip_prefix(b"\"") {
            let end = inner.iter().position(|b| *b == b'"').unwrap_or(inner.len());
            rest = inner.get(end + 1..).unwrap_or(&[]);
            return Some((weak, &inner[..end]));
        }
        let end = rest.iter().position(|b| *b == b',').unwrap_or(rest.len());
        let member = rest[..end].trim_ascii();
        rest = &rest[end..];
        // An unquoted tag compares as if it were quoted.
        Some((false, member))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(http::header::HeaderName, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        m
    }

    #[test]
    fn if_none_match_uses_weak_comparison() {
        let resp = h(&[(ETAG, "W/\"abc\"")]);
        assert_eq!(
            evaluate(
                &Method::GET,
                &h(&[(IF_NONE_MATCH, "\"x\", \"abc\"")]),
                &resp
            ),
            Some(StatusCode::NOT_MODIFIED)
        );
        assert_eq!(
            evaluate(&Method::GET, &h(&[(IF_NONE_MATCH, "\"x\"")]), &resp),
            None
        );
        assert_eq!(
            evaluate(&Method::GET, &h(&[(IF_NONE_MATCH, "*")]), &resp),
            Some(StatusCode::NOT_MODIFIED)
        );
    }

    #[test]
    fn entity_tag_lists_are_parsed_not_split() {
        let resp = h(&[(ETAG, "\"a,b\"")]);
        let req = h(&[(IF_NONE_MATCH, "\"x\", \"a,b\"")]);
        assert_eq!(
            evaluate(&Method::GET, &req, &resp),
            Some(StatusCode::NOT_MODIFIED)
        );
        // Several field lines form one list.
        let req = h(&[(IF_NONE_MATCH, "\"x\""), (IF_NONE_MATCH, "W/\"a,b\"")]);
        assert_eq!(
            evaluate(&Method::GET, &req, &resp),
            Some(StatusCode::NOT_MODIFIED)
        );
        // obs-text in a tag.
        let mut resp = HeaderMap::new();
        resp.insert(ETAG, HeaderValue::from_bytes(b"\"caf\xc3\xa9\"").unwrap());
        let mut req = HeaderMap::new();
        req.insert(
            IF_NONE_MATCH,
            HeaderValue::from_bytes(b"\"caf\xc3\xa9\"").unwrap(),
        );
        assert_eq!(
            evaluate(&Method::GET, &req, &resp),
            Some(StatusCode::NOT_MODIFIED)
        );
        // Unquoted tags (invalid) match the same bytes, quoted or not.
        let resp = h(&[(ETAG, "abc")]);
        for inm in ["abc", "\"abc\""] {
            let req = h(&[(IF_NONE_MATCH, inm)]);
            assert_eq!(
                evaluate(&Method::GET, &req, &resp),
                Some(StatusCode::NOT_MODIFIED),
                "{inm}"
            );
        }
        let req = h(&[(IF_NONE_MATCH, "\"abcd\"")]);
        assert_eq!(evaluate(&Method::GET, &req, &resp), None);
    }

    #[test]
    fn star_means_any_current_representation() {
        // No ETag at all: `*` still matches the stored representation.
        let resp = h(&[(LAST_MODIFIED, "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(
            evaluate(&Method::GET, &h(&[(IF_NONE_MATCH, "*")]), &resp),
            Some(StatusCode::NOT_MODIFIED)
        );
        assert_eq!(evaluate(&Method::GET, &h(&[(IF_MATCH, "*")]), &resp), None);
        assert_eq!(
            evaluate(&Method::GET, &h(&[(IF_MATCH, "\"a\"")]), &resp),
            Some(StatusCode::PRECONDITION_FAILED)
        );
    }

    #[test]
    fn if_match_uses_strong_comparison() {
        let resp = h(&[(ETAG, "W/\"abc\"")]);
        assert_eq!(
            evaluate(&Method::GET, &h(&[(IF_MATCH, "W/\"abc\"")]), &resp),
            Some(StatusCode::PRECONDITION_FAILED)
        );
        let resp = h(&[(ETAG, "\"abc\"")]);
        assert_eq!(
            evaluate(&Method::GET, &h(&[(IF_MATCH, "\"abc\"")]), &resp),
            None
        );
    }

    #[test]
    fn if_unmodified_since_needs_a_modification_date() {
        let ius = h(&[(IF_UNMODIFIED_SINCE, "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(evaluate(&Method::GET, &ius, &h(&[(ETAG, "\"a\"")])), None);
        let newer = h(&[(LAST_MODIFIED, "Mon, 07 Nov 1994 08:49:37 GMT")]);
        assert_eq!(
            evaluate(&Method::GET, &ius, &newer),
            Some(StatusCode::PRECONDITION_FAILED)
        );
        let same = h(&[(LAST_MODIFIED, "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(evaluate(&Method::GET, &ius, &same), None);
    }

    #[test]
    fn if_modified_since_is_ignored_when_if_none_match_present() {
        let resp = h(&[
            (ETAG, "\"a\""),
            (LAST_MODIFIED, "Sun, 06 Nov 1994 08:49:37 GMT"),
        ]);
        let req = h(&[
            (IF_NONE_MATCH, "\"b\""),
            (IF_MODIFIED_SINCE, "Sun, 06 Nov 1994 08:49:37 GMT"),
        ]);
        assert_eq!(evaluate(&Method::GET, &req, &resp), None);
        let req = h(&[(IF_MODIFIED_SINCE, "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(
            evaluate(&Method::GET, &req, &resp),
            Some(StatusCode::NOT_MODIFIED)
        );
        let req = h(&[(IF_MODIFIED_SINCE, "Sat, 05 Nov 1994 08:49:37 GMT")]);
        assert_eq!(evaluate(&Method::GET, &req, &resp), None);
        // Only for GET and HEAD.
        let req = h(&[(IF_MODIFIED_SINCE, "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(evaluate(&Method::POST, &req, &resp), None);
    }

    #[test]
    fn if_modified_since_falls_back_to_date() {
        let resp = h(&[(DATE, "Sun, 06 Nov 1994 08:49:37 GMT")]);
        let later = h(&[(IF_MODIFIED_SINCE, "Mon, 07 Nov 1994 08:49:37 GMT")]);
        assert_eq!(
            evaluate(&Method::GET, &later, &resp),
            Some(StatusCode::NOT_MODIFIED)
        );
        let earlier = h(&[(IF_MODIFIED_SINCE, "Sat, 05 Nov 1994 08:49:37 GMT")]);
        assert_eq!(evaluate(&Method::GET, &earlier, &resp), None);
    }

    #[test]
    fn a_304_applies_only_to_the_response_its_validators_name() {
        let strong = HeaderValue::from_static("\"v1\"");
        let weak = HeaderValue::from_static("W/\"v1\"");
        let lm = HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT");
        let applies = |etag, last_modified, resp: &[(http::header::HeaderName, &str)]| {
            not_modified_applies(etag, last_modified, &h(resp))
        };
        assert!(applies(Some(&strong), None, &[(ETAG, "\"v1\"")]));
        assert!(!applies(Some(&strong), None, &[(ETAG, "\"v2\"")]));
        assert!(applies(Some(&strong), None, &[(ETAG, "W/\"v1\"")]));
        // A strong validator the stored response does not have (weakly equal is not it).
        assert!(!applies(Some(&weak), None, &[(ETAG, "\"v1\"")]));
        assert!(!applies(None, Some(&lm), &[(ETAG, "\"v1\"")]));
        assert!(applies(Some(&weak), None, &[(ETAG, "W/\"v1\"")]));
        // Last-Modified decides when there is no ETag.
        assert!(applies(
            Some(&strong),
            Some(&lm),
            &[(LAST_MODIFIED, "Sun, 06 Nov 1994 08:49:37 GMT")]
        ));
        assert!(!applies(
            None,
            Some(&lm),
            &[(LAST_MODIFIED, "Mon, 07 Nov 1994 08:49:37 GMT")]
        ));
        // No validator: it answers the one response levee asked about.
        assert!(applies(Some(&strong), Some(&lm), &[]));
    }
}
