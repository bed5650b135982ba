//! The one place a result becomes a response ([`Answer`]). Everything a client
//! receives goes through here: the coding it accepts (the only caller of the
//! [`Encoder`] for client forms; fills use it for the stored form), and the headers
//! levee adds, written from the response's [`Outcome`] by [`mark`]: `X-Cache`, `Via`,
//! `Age` and, with `--debug-headers`, `X-Cache-Reason`; and the one it removes from
//! backend responses, the cache directives meant for levee (`Levee-Cache-Control`,
//! `CDN-Cache-Control`).

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Method, Response, StatusCode};
use levee_cache::{conditional, policy, targeted};
use levee_compress::Coding;

use super::next::FillHead;
use super::next::{Serve, Stream};
use super::partial;
use super::shared::Shared;
use crate::body::{ProxyBody, Resp};
use crate::encoding::{Encoder, EntryForm};
use crate::headers::{add_via, X_CACHE, X_CACHE_REASON};
use crate::outcome::{Answer, CacheResult, Outcome, Reason};
use crate::upstream::{BackendBody, UpstreamError};
use levee_sendfile as zerocopy;

/// Makes `resp` an [`Answer`] with levee's headers written from its outcome: the only
/// place `X-Cache`, `Via`, `Age` and `X-Cache-Reason` are written. `age` is a stored
/// response's age (RFC 9111 §4.2.3); a passed response keeps the backend's `Age` (0
/// without one), an error is 0 seconds old; files and local answers have none. The
/// reason shows only with `--debug-headers`; the outcome keeps it for the dashboard.
pub(crate) fn mark(
    shared: &Shared,
    mut resp: Resp,
    result: CacheResult,
    age: Option<HeaderValue>,
    reason: Option<Reason>,
) -> Answer {
    let conf = shared.conf();
    let settings = &conf.settings;
    let debug = settings.debug_headers;
    set_headers(
        resp.headers_mut(),
        result,
        age,
        reason.as_deref().filter(|_| debug),
    );
    if result.forwarded() {
        strip_targeted(resp.headers_mut(), settings.cache.strip_cdn_cache_control);
    }
    Answer {
        resp,
        outcome: Outcome::new(result, reason),
    }
}

fn set_headers(
    headers: &mut HeaderMap,
    result: CacheResult,
    age: Option<HeaderValue>,
    reason: Option<&str>,
) {
    match (age, result) {
        (Some(age), _) => {
            headers.insert(header::AGE, age);
        }
        (None, CacheResult::Pass | CacheResult::Error) => {
            if !headers.contains_key(header::AGE) {
                headers.insert(header::AGE, HeaderValue::from_static("0"));
            }
        }
        (None, _) => {}
    }
    headers.insert(X_CACHE.clone(), HeaderValue::from_static(result.as_str()));
    if result.forwarded() {
        add_via(headers, http::Version::HTTP_11);
    }
    if let Some(r) = reason.and_then(|r| HeaderValue::from_str(r).ok()) {
        headers.insert(X_CACHE_REASON.clone(), r);
    }
}

/// Removes the cache directives meant for levee (RFC 9213's targeted fields) from a
/// backend's response: `Levee-Cache-Control` always, `CDN-Cache-Control` unless the
/// operator keeps it for a CDN in front of levee. Stored copies keep both (levee-cache
/// `targeted.rs`); clients get `Cache-Control` as it came.
fn strip_targeted(headers: &mut HeaderMap, cdn_too: bool) {
    headers.remove(&targeted::LEVEE_CACHE_CONTROL);
    if cdn_too {
        headers.remove(&targeted::CDN_CACHE_CONTROL);
    }
}

/// A stored response in the coding the client accepts, or 304/412 when the client's
/// preconditions say so.
/// `sendfile`: the connection's queue when it can send large bodies with sendfile.
pub(crate) async fn entry(
    shared: &Shared,
    parts: &request::Parts,
    serve: Serve,
    sendfile: Option<&Arc<zerocopy::SendQueue>>,
) -> Answer {
    let Serve {
        entry,
        result,
        now,
        waited,
        reason,
    } = serve;
    let reason = reason.unwrap_or("stored");
    let entry = &*entry;
    let age = policy::age_header(entry.age(now));
    // The headers of the form this client gets; built once, used for the preconditions
    // and handed to hyper.
    let (response_headers, body, coding) =
        match shared.encoder.entry_form(entry, &parts.headers).await {
            EntryForm::AsStored => (entry.headers.to_map(), entry.body(), entry.coding()),
            EntryForm::Derived { coding, body } => (
                Encoder::derived_headers(entry, coding, body.len()),
                body,
                coding,
            ),
        };
    // RFC 9111 §4.3.2: preconditions are evaluated against a stored 200 only; a stored
    // redirect or error is what the origin would answer regardless of them (RFC 9110
    // §13.2.1).
    if entry.status() == StatusCode::OK {
        if let Some(status) =
            conditional::evaluate(&parts.method, &parts.headers, &response_headers)
        {
            return precondition(shared, status, &response_headers, age, result);
        }
    }
    // RFC 9110 §14.2: Range is for GET, and here for a stored 200, the representation
    // the client gets in its coding (RFC 9110 §14.1.2).
    if parts.method == Method::GET
        && entry.status() == StatusCode::OK
        && parts.headers.contains_key(header::RANGE)
    {
        // The bytes of a coding levee made are not the origin's (see partial.rs).
        let origin_bytes = coding == Coding::Identity || entry.levee_coded().is_none();
        if let Some(resp) = partial::answer(&parts.headers, &response_headers, &body, origin_bytes)
        {
            let mut answer = mark(shared, resp, result, Some(age), Some(reason.into()));
            answer.outcome.backend_wait = waited;
            return answer;
        }
    }
    let body = if parts.method == Method::HEAD {
        ProxyBody::Empty
    } else {
        large_body(shared, sendfile, &entry.derived, coding, body)
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = entry.status();
    *resp.headers_mut() = response_headers;
    let mut answer = mark(shared, resp, result, Some(age), Some(reason.into()));
    answer.outcome.backend_wait = waited;
    answer
}

/// A stored body as a response body: from a memfd with sendfile when it is large and
/// the connection can (HTTP/1.1, see zerocopy.rs), else from memory.
fn large_body(
    shared: &Shared,
    sendfile: Option<&Arc<zerocopy::SendQueue>>,
    derived: &levee_cache::Derived,
    coding: Coding,
    body: Bytes,
) -> ProxyBody {
    let len = body.len();
    if (zerocopy::MIN_LEN..=zerocopy::MAX_LEN).contains(&len) {
        if let Some(queue) = sendfile {
            if let Some(file) = shared.sendfile.get(derived.forms(), coding, &body) {
                return ProxyBody::Zc(zerocopy::ZcBody::new(queue.clone(), file, len));
            }
        }
    }
    ProxyBody::full(body)
}

/// A response streaming in from a fill.
pub(crate) fn streaming(shared: &Shared, parts: &request::Parts, stream: Stream) -> Answer {
    let Stream {
        head,
        reader,
        now,
        waited,
    } = stream;
    let FillHead::Stream(h) = &*head else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "levee lost track of a backend response",
        );
    };
    let age = policy::age_header(h.age(now));
    let body = if parts.method == Method::HEAD {
        ProxyBody::Empty
    } else {
        ProxyBody::Fill(reader)
    };
    // The headers of the 200 this client would get (its coding, weak ETag, Vary): a 304
    // carries those (RFC 9110 §15.4.5).
    let mut headers = h.headers.clone();
    let body = shared
        .encoder
        .stream(&parts.headers, &parts.method, h.status, &mut headers, body);
    let precondition_status = if h.storable.is_ok() && h.status == StatusCode::OK {
        conditional::evaluate(&parts.method, &parts.headers, &headers)
    } else {
        None
    };
    let mut answer = if let Some(status) = precondition_status {
        precondition(shared, status, &headers, age, CacheResult::Miss)
    } else {
        let mut resp = Response::new(body);
        *resp.status_mut() = h.status;
        *resp.headers_mut() = headers;
        let reason = match h.storable {
            Ok(()) => "stored",
            Err(r) => r.as_str(),
        };
        mark(
            shared,
            resp,
            CacheResult::Miss,
            Some(age),
            Some(reason.into()),
        )
    };
    answer.outcome.backend_wait = Some(waited);
    answer
}

/// A backend response passed through as it is (hop-by-hop fields removed), in a coding
/// the client accepts.
pub(crate) fn passed(
    shared: &Shared,
    parts: &request::Parts,
    mut head: http::response::Parts,
    body: BackendBody,
    permit: Option<levee_limits::BackendSlot>,
    reason: Reason,
) -> Answer {
    let body = if parts.method == Method::HEAD {
        ProxyBody::Empty
    } else {
        let pause = crate::headers::body_pause_limit(&head.headers, &shared.conf().settings.limits);
        let mut body = body;
        body.allow_pauses(pause);
        ProxyBody::pass(body, permit, pause)
    };
    let body = shared.encoder.stream(
        &parts.headers,
        &parts.method,
        head.status,
        &mut head.headers,
        body,
    );
    mark(
        shared,
        Response::from_parts(head, body),
        CacheResult::Pass,
        None,
        Some(reason),
    )
}

/// 304 (with the fields RFC 9110 §15.4.5 asks for) or 412.
fn precondition(
    shared: &Shared,
    status: StatusCode,
    stored: &HeaderMap,
    age: HeaderValue,
    result: CacheResult,
) -> Answer {
    let mut resp = Response::new(ProxyBody::Empty);
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    if status == StatusCode::NOT_MODIFIED {
        // The targeted fields too, for a CDN in front that refreshes its copy with them
        // (`mark` removes them unless it is configured to keep them).
        for name in [
            header::CACHE_CONTROL,
            header::CONTENT_LOCATION,
            header::DATE,
            header::ETAG,
            header::EXPIRES,
            header::VARY,
            targeted::CDN_CACHE_CONTROL.clone(),
            targeted::LEVEE_CACHE_CONTROL.clone(),
        ] {
            for v in stored.get_all(&name) {
                headers.append(name.clone(), v.clone());
            }
        }
        if !stored.contains_key(header::ETAG) {
            if let Some(lm) = stored.get(header::LAST_MODIFIED) {
                headers.insert(header::LAST_MODIFIED, lm.clone());
            }
        }
    }
    mark(shared, resp, result, Some(age), Some("conditional".into()))
}

/// The error a backend failure becomes (502, 504, 503 with `Retry-After`, or the
/// client's 400/413).
pub(crate) fn upstream_error(e: &UpstreamError) -> Answer {
    match e {
        UpstreamError::BadRequest { .. } => {}
        // Thousands a second in a storm: counted in the metrics and the access log,
        // not a warning each.
        UpstreamError::Refused { .. } => tracing::debug!(status = e.status().as_u16(), "{e}"),
        _ => tracing::warn!(status = e.status().as_u16(), "{e}"),
    }
    let mut answer = error(e.status(), &e.public_message());
    match e {
        UpstreamError::Overloaded { .. } => {
            answer
                .resp
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        // Refused by the limiter: the client learns why and when to come back, the
        // access log and metrics the reason.
        UpstreamError::Refused {
            why, retry_after, ..
        } => {
            let h = answer.resp.headers_mut();
            h.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
            h.insert(
                X_CACHE_REASON.clone(),
                HeaderValue::from_static(why.reason()),
            );
            answer.outcome.reason = Some(why.reason().into());
        }
        _ => {}
    }
    answer
}

/// A short plain-text error that says what happened.
pub(crate) fn error(status: StatusCode, message: &str) -> Answer {
    let text = format!(
        "{} {}\n{}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        message
    );
    let mut resp = Response::new(ProxyBody::full(Bytes::from(text)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    set_headers(h, CacheResult::Error, None, None);
    Answer {
        resp,
        outcome: Outcome::new(CacheResult::Error, None),
    }
}

/// A static file's response, compressed when the client accepts it.
pub(crate) async fn static_file(
    shared: &Shared,
    parts: &request::Parts,
    r: Response<levee_static::FileBody>,
) -> Answer {
    let (mut head, body) = r.into_parts();
    let enc = &shared.encoder;
    let resp = if head.status == StatusCode::NOT_MODIFIED {
        enc.static_not_modified(&parts.headers, &mut head.headers);
        Response::from_parts(head, ProxyBody::Empty)
    } else {
        static_body(enc, parts, head, body).await
    };
    mark(shared, resp, CacheResult::Static, None, None)
}

async fn static_body(
    enc: &Encoder,
    parts: &request::Parts,
    mut head: http::response::Parts,
    body: levee_static::FileBody,
) -> Resp {
    if head.status == StatusCode::OK {
        if let Some(content) = body.memory() {
            let path = parts.uri.path();
            if let Some(coded) = enc
                .static_file(&parts.headers, path, &mut head.headers, content)
                .await
            {
                let body = if parts.method == Method::HEAD {
                    ProxyBody::Empty
                } else {
                    ProxyBody::full(coded)
                };
                return Response::from_parts(head, body);
            }
            return Response::from_parts(head, ProxyBody::File(body));
        }
    }
    let body = enc.stream(
        &parts.headers,
        &parts.method,
        head.status,
        &mut head.headers,
        ProxyBody::File(body),
    );
    Response::from_parts(head, body)
}
