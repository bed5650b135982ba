//! Evaluating a client's preconditions against a stored response (RFC 9110 §13.2.2).

use std::time::SystemTime;

use http::header::{
    HeaderMap, HeaderValue, ETAG, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_UNMODIFIED_SINCE,
    LAST_MODIFIED,
};
use http::{Method, StatusCode};

/// The answer to a conditional request, if it is not the full response.
pub fn evaluate(method: &Method, request: &HeaderMap, response: &HeaderMap) -> Option<StatusCode> {
    let etag = response.get(ETAG);
    let last_modified = date(response.get(LAST_MODIFIED));
    if let Some(if_match) = request.get(IF_MATCH) {
        if !etag_list_matches(if_match, etag, false) {
            return Some(StatusCode::PRECONDITION_FAILED);
        }
    } else if let Some(ius) = date(request.get(IF_UNMODIFIED_SINCE)) {
        if last_modified.is_none_or(|lm| lm > ius) {
            return Some(StatusCode::PRECONDITION_FAILED);
        }
    }
    let safe = method == Method::GET || method == Method::HEAD;
    if let Some(inm) = request.get(IF_NONE_MATCH) {
        if etag_list_matches(inm, etag, true) {
            return Some(if safe {
                StatusCode::NOT_MODIFIED
            } else {
                StatusCode::PRECONDITION_FAILED
            });
        }
    } else if safe {
        if let (Some(ims), Some(lm)) = (date(request.get(IF_MODIFIED_SINCE)), last_modified) {
            if lm <= ims {
                return Some(StatusCode::NOT_MODIFIED);
            }
        }
    }
    None
}

fn date(v: Option<&HeaderValue>) -> Option<SystemTime> {
    v.and_then(|v| v.to_str().ok())
        .and_then(|s| httpdate::parse_http_date(s).ok())
}

/// `*` or a comma-separated list of entity tags; `weak` selects weak comparison.
fn etag_list_matches(list: &HeaderValue, etag: Option<&HeaderValue>, weak: bool) -> bool {
    let Ok(list) = list.to_str() else {
        return false;
    };
    if list.trim() == "*" {
        return etag.is_some();
    }
    let Some(etag) = etag.and_then(|e| e.to_str().ok()) else {
        return false;
    };
    let (etag_weak, etag_opaque) = split_weak(etag.trim());
    list.split(',').any(|candidate| {
        let (cand_weak, cand_opaque) = split_weak(candidate.trim());
        if weak {
            cand_opaque == etag_opaque
        } else {
            !cand_weak && !etag_weak && cand_opaque == etag_opaque
        }
    })
}

fn split_weak(tag: &str) -> (bool, &str) {
    match tag.strip_prefix("W/") {
        Some(rest) => (true, rest),
        None => (false, tag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(http::header::HeaderName, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(k.clone(), HeaderValue::from_str(v).unwrap());
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
    }
}
