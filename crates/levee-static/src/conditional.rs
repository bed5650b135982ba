//! Preconditions (RFC 9110 §13) against a file's validators, in the order of §13.2.2.

use std::time::SystemTime;

use http::header::{HeaderMap, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_UNMODIFIED_SINCE};
use http::{Method, StatusCode};

/// A file's validators: its entity tag (strong, without quotes) and its modification
/// time at one-second precision, as sent in `Last-Modified`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Validators<'a> {
    pub etag: Option<&'a str>,
    pub modified: Option<SystemTime>,
}

/// `Some(304 or 412)` when a precondition decides the answer, `None` for the full
/// (or partial) response.
pub(crate) fn evaluate(
    method: &Method,
    request: &HeaderMap,
    v: Validators<'_>,
) -> Option<StatusCode> {
    // Step 1 and 2: the state-changing preconditions; for GET they still apply.
    if request.contains_key(IF_MATCH) {
        if !list_matches(request, IF_MATCH, v.etag, Comparison::Strong) {
            return Some(StatusCode::PRECONDITION_FAILED);
        }
    } else if let (Some(since), Some(modified)) =
        (single_date(request, IF_UNMODIFIED_SINCE), v.modified)
    {
        // §13.1.4: ignored when the resource has no modification date.
        if modified > since {
            return Some(StatusCode::PRECONDITION_FAILED);
        }
    }
    let safe = method == Method::GET || method == Method::HEAD;
    // Step 3 and 4: If-None-Match wins over If-Modified-Since, which is only looked at
    // without it (§13.1.3: it is less precise).
    if request.contains_key(IF_NONE_MATCH) {
        if list_matches(request, IF_NONE_MATCH, v.etag, Comparison::Weak) {
            return Some(if safe {
                StatusCode::NOT_MODIFIED
            } else {
                StatusCode::PRECONDITION_FAILED
            });
        }
    } else if safe {
        if let (Some(since), Some(modified)) = (single_date(request, IF_MODIFIED_SINCE), v.modified)
        {
            if modified <= since {
                return Some(StatusCode::NOT_MODIFIED);
            }
        }
    }
    None
}

/// Whether an `If-Range` value still names this file (§13.1.5): an entity tag by strong
/// comparison, or a date equal to `Last-Modified`. Anything else means "send it all".
pub(crate) fn if_range_matches(value: &str, v: Validators<'_>) -> bool {
    let value = value.trim();
    if value.starts_with('"') || value.starts_with("W/") {
        let mut tags = EntityTags::new(value);
        return match (tags.next(), tags.next(), v.etag) {
            (
                Some(Ok(Tag::Tag {
                    weak: false,
                    opaque,
                })),
                None,
                Some(etag),
            ) => opaque == etag,
            _ => false,
        };
    }
    match (httpdate::parse_http_date(value), v.modified) {
        (Ok(date), Some(modified)) => date == modified,
        _ => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Strong,
    Weak,
}

/// `*` or a list of entity tags, over every line of the field. A malformed list matches
/// nothing, so If-Match fails (412) and If-None-Match sends the full response: both the
/// safe reading.
fn list_matches(
    request: &HeaderMap,
    name: http::header::HeaderName,
    etag: Option<&str>,
    comparison: Comparison,
) -> bool {
    let mut matched = false;
    for line in request.get_all(name) {
        let Ok(line) = line.to_str() else {
            return false;
        };
        for tag in EntityTags::new(line) {
            match tag {
                Err(()) => return false,
                // `*` matches any current representation; a file we serve is one.
                Ok(Tag::Star) => matched |= etag.is_some(),
                Ok(Tag::Tag { weak, opaque }) => {
                    let ok = match comparison {
                        // Our tags are strong, so only the candidate's weakness counts.
                        Comparison::Strong => !weak,
                        Comparison::Weak => true,
                    };
                    matched |= ok && Some(opaque) == etag;
                }
            }
        }
    }
    matched
}

/// A date field with exactly one valid HTTP-date; otherwise it is ignored (§13.1.3,
/// §13.1.4).
fn single_date(request: &HeaderMap, name: http::header::HeaderName) -> Option<SystemTime> {
    let mut values = request.get_all(name).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    httpdate::parse_http_date(value.to_str().ok()?).ok()
}

#[derive(Debug, PartialEq, Eq)]
enum Tag<'a> {
    Star,
    /// `opaque` is the text between the quotes.
    Tag {
        weak: bool,
        opaque: &'a str,
    },
}

/// Entity tags of a comma-separated list. They are scanned, not split on commas, because
/// a comma is a legal character inside the quotes (RFC 9110 §8.8.3).
struct EntityTags<'a> {
    rest: &'a str,
}

impl<'a> EntityTags<'a> {
    fn new(s: &'a str) -> Self {
        EntityTags { rest: s }
    }
}

impl<'a> Iterator for EntityTags<'a> {
    type Item = Result<Tag<'a>, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        // Empty list elements are allowed (§5.6.1).
        self.rest = self.rest.trim_start_matches([' ', '\t', ',']);
        if self.rest.is_empty() {
            return None;
        }
        if let Some(rest) = self.rest.strip_prefix('*') {
            self.rest = rest;
            return Some(Ok(Tag::Star));
        }
        let (weak, quoted) = match self.rest.strip_prefix("W/") {
            Some(q) => (true, q),
            None => (false, self.rest),
        };
        let parsed = quoted
            .strip_prefix('"')
            .and_then(|q| q.find('"').map(|end| (&q[..end], &q[end + 1..])));
        match parsed {
            Some((opaque, rest)) => {
                let rest_trimmed = rest.trim_start_matches([' ', '\t']);
                if !(rest_trimmed.is_empty() || rest_trimmed.starts_with(',')) {
                    self.rest = "";
                    return Some(Err(()));
                }
                self.rest = rest_trimmed;
                Some(Ok(Tag::Tag { weak, opaque }))
            }
            None => {
                self.rest = "";
                Some(Err(()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use std::time::{Duration, UNIX_EPOCH};

    const T: u64 = 1_700_000_000;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn date(secs: u64) -> String {
        httpdate::fmt_http_date(at(secs))
    }

    fn v() -> Validators<'static> {
        Validators {
            etag: Some("6553f100-400"),
            modified: Some(at(T)),
        }
    }

    fn eval(method: Method, pairs: &[(http::header::HeaderName, &str)]) -> Option<StatusCode> {
        let mut h = HeaderMap::new();
        for (k, val) in pairs {
            h.append(k.clone(), HeaderValue::from_str(val).unwrap());
        }
        evaluate(&method, &h, v())
    }

    #[test]
    fn tags_are_scanned_not_split() {
        let tags: Vec<_> = EntityTags::new(r#" "a,b" ,, W/"c", *"#).collect();
        assert_eq!(
            tags,
            vec![
                Ok(Tag::Tag {
                    weak: false,
                    opaque: "a,b"
                }),
                Ok(Tag::Tag {
                    weak: true,
                    opaque: "c"
                }),
                Ok(Tag::Star),
            ]
        );
        assert_eq!(EntityTags::new("abc").next(), Some(Err(())));
        assert_eq!(EntityTags::new(r#""a"b"#).next(), Some(Err(())));
    }

    #[test]
    fn if_match() {
        assert_eq!(eval(Method::GET, &[(IF_MATCH, r#""6553f100-400""#)]), None);
        assert_eq!(
            eval(Method::GET, &[(IF_MATCH, r#""x", "6553f100-400""#)]),
            None
        );
        assert_eq!(eval(Method::GET, &[(IF_MATCH, "*")]), None);
        let failed = Some(StatusCode::PRECONDITION_FAILED);
        assert_eq!(eval(Method::GET, &[(IF_MATCH, r#""x""#)]), failed);
        // Strong comparison: a weak candidate never matches.
        assert_eq!(
            eval(Method::GET, &[(IF_MATCH, r#"W/"6553f100-400""#)]),
            failed
        );
        assert_eq!(eval(Method::GET, &[(IF_MATCH, "garbage")]), failed);
        // If-Match takes precedence over If-Unmodified-Since.
        assert_eq!(
            eval(
                Method::GET,
                &[
                    (IF_MATCH, r#""6553f100-400""#),
                    (IF_UNMODIFIED_SINCE, &date(T - 10))
                ]
            ),
            None
        );
    }

    #[test]
    fn if_unmodified_since() {
        assert_eq!(eval(Method::GET, &[(IF_UNMODIFIED_SINCE, &date(T))]), None);
        assert_eq!(
            eval(Method::GET, &[(IF_UNMODIFIED_SINCE, &date(T - 1))]),
            Some(StatusCode::PRECONDITION_FAILED)
        );
        assert_eq!(
            eval(Method::GET, &[(IF_UNMODIFIED_SINCE, "yesterday")]),
            None
        );
    }

    #[test]
    fn if_none_match_is_weak_and_wins_over_if_modified_since() {
        let nm = Some(StatusCode::NOT_MODIFIED);
        assert_eq!(
            eval(Method::GET, &[(IF_NONE_MATCH, r#""6553f100-400""#)]),
            nm
        );
        assert_eq!(
            eval(Method::HEAD, &[(IF_NONE_MATCH, r#"W/"6553f100-400""#)]),
            nm
        );
        assert_eq!(eval(Method::GET, &[(IF_NONE_MATCH, "*")]), nm);
        assert_eq!(
            eval(
                Method::GET,
                &[
                    (IF_NONE_MATCH, r#""a""#),
                    (IF_NONE_MATCH, r#""6553f100-400""#)
                ]
            ),
            nm
        );
        assert_eq!(
            eval(Method::POST, &[(IF_NONE_MATCH, r#""6553f100-400""#)]),
            Some(StatusCode::PRECONDITION_FAILED)
        );
        // A mismatching If-None-Match means "changed", whatever If-Modified-Since says.
        assert_eq!(
            eval(
                Method::GET,
                &[(IF_NONE_MATCH, r#""old""#), (IF_MODIFIED_SINCE, &date(T))]
            ),
            None
        );
    }

    #[test]
    fn if_modified_since() {
        let nm = Some(StatusCode::NOT_MODIFIED);
        assert_eq!(eval(Method::GET, &[(IF_MODIFIED_SINCE, &date(T))]), nm);
        assert_eq!(eval(Method::GET, &[(IF_MODIFIED_SINCE, &date(T + 5))]), nm);
        assert_eq!(
            eval(Method::GET, &[(IF_MODIFIED_SINCE, &date(T - 1))]),
            None
        );
        assert_eq!(
            eval(Method::GET, &[(IF_MODIFIED_SINCE, "not a date")]),
            None
        );
        // Two dates: ignored.
        assert_eq!(
            eval(
                Method::GET,
                &[(IF_MODIFIED_SINCE, &date(T)), (IF_MODIFIED_SINCE, &date(T))]
            ),
            None
        );
        assert_eq!(eval(Method::POST, &[(IF_MODIFIED_SINCE, &date(T))]), None);
    }

    #[test]
    fn if_range() {
        assert!(if_range_matches(r#""6553f100-400""#, v()));
        assert!(!if_range_matches(r#"W/"6553f100-400""#, v()));
        assert!(!if_range_matches(r#""other""#, v()));
        assert!(if_range_matches(&date(T), v()));
        assert!(!if_range_matches(&date(T + 1), v()));
        assert!(!if_range_matches("junk", v()));
    }
}
