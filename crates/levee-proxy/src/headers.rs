//! Header rules for a proxy: hop-by-hop fields (RFC 9110 §7.6.1), `Via`, and the
//! `X-Forwarded-*` family.

use std::net::IpAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Fields that describe one connection and must not be forwarded.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Removes hop-by-hop fields, including those the `Connection` field names. A message
/// that came with both `Transfer-Encoding` and `Content-Length` was read by its transfer
/// coding, so its `Content-Length` is wrong and goes too (RFC 9112 §6.3: an intermediary
/// MUST remove it before forwarding).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        headers.remove(header::CONTENT_LENGTH);
    }
    // Every Connection field line counts (RFC 9110 §5.3: lines combine into one list).
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        headers.remove(n);
    }
    for h in &HOP_BY_HOP {
        headers.remove(h);
    }
    headers.remove(header::UPGRADE);
}

/// Whether a response is a server-sent event stream (`text/event-stream`): a long
/// response whose pauses between events are its nature, not a stuck backend.
pub fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// How long a response's body may pause: `backend_read_timeout`, or for an event stream
/// `websocket_idle_timeout` (a live stream's pauses are not a stuck backend's).
pub fn body_pause_limit(headers: &HeaderMap, limits: &levee_config::Limits) -> std::time::Duration {
    match is_event_stream(headers) {
        true => limits
            .websocket_idle_timeout
            .max(limits.backend_read_timeout),
        false => limits.backend_read_timeout,
    }
}

pub static VIA_VALUE: HeaderValue = HeaderValue::from_static("1.1 levee");

/// Appends levee to `Via`.
pub fn add_via(headers: &mut HeaderMap, version: http::Version) {
    let ours = match version {
        http::Version::HTTP_10 => HeaderValue::from_static("1.0 levee"),
        http::Version::HTTP_2 => HeaderValue::from_static("2 levee"),
        _ => VIA_VALUE.clone(),
    };
    headers.append(header::VIA, ours);
}

pub static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
pub static X_CACHE: HeaderName = HeaderName::from_static("x-cache");
pub static X_CACHE_REASON: HeaderName = HeaderName::from_static("x-cache-reason");

/// Adds `X-Forwarded-For` (appending the client to any list it sent), `-Proto` and `-Host`.
pub fn add_forwarded(
    headers: &mut HeaderMap,
    client: IpAddr,
    tls: bool,
    host: Option<&HeaderValue>,
) {
    let client = client.to_string();
    let xff = match headers.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
        Some(prev) if !prev.trim().is_empty() => format!("{prev}, {client}"),
        _ => client,
    };
    if let Ok(v) = HeaderValue::from_str(&xff) {
        headers.insert(X_FORWARDED_FOR.clone(), v);
    }
    let proto = if tls { "https" } else { "http" };
    headers.insert(X_FORWARDED_PROTO.clone(), HeaderValue::from_static(proto));
    if let Some(h) = host {
        headers.insert(X_FORWARDED_HOST.clone(), h.clone());
    }
}

/// The fields levee adds to every request it forwards: `Host` from an absolute-form
/// target when the client sent none, `X-Forwarded-*` and `Via`.
pub fn prepare_forward(
    headers: &mut HeaderMap,
    parts: &http::request::Parts,
    client: IpAddr,
    tls: bool,
) {
    if !headers.contains_key(header::HOST) {
        if let Some(a) = parts.uri.authority() {
            if let Ok(v) = HeaderValue::from_str(a.as_str()) {
                headers.insert(header::HOST, v);
            }
        }
    }
    let host = headers.get(header::HOST).cloned();
    add_forwarded(headers, client, tls, host.as_ref());
    add_via(headers, parts.version);
}

/// The fields a request passed to the backend as the client sent it carries: the
/// client's, without hop-by-hop ones and levee's device mark, with levee's forwarding
/// fields (pass.rs, upgrade.rs).
pub fn passed_on(parts: &http::request::Parts, client: IpAddr, tls: bool) -> HeaderMap {
    let mut headers = parts.headers.clone();
    strip_hop_by_hop(&mut headers);
    headers.remove(&levee_visitor::device::DEVICE);
    prepare_forward(&mut headers, parts, client, tls);
    headers
}

/// Request fields that make a web framework build a different page than the URL says:
/// another host (absolute links, redirects, password-reset mails), scheme, path or method.
/// A fill drops them all, because its response is stored for everyone under a key that
/// does not contain them (unkeyed input is how a cache is poisoned). levee sets
/// `X-Forwarded-For`, `-Proto` and `-Host` itself.
///
/// Sources: James Kettle, "Practical Web Cache Poisoning" (2018) and Param Miner's header
/// list; the headers Symfony (`Request::setTrustedProxies`), Laravel (`TrustProxies`),
/// Django (`USE_X_FORWARDED_HOST`), Rails, WordPress plugins and Zend/IIS URL rewriting
/// (`X-Original-URL`, `X-Rewrite-URL`) honour; method-override middlewares (Express,
/// Laravel, Symfony's `_method` header form).
pub const FILL_DROPPED: [&str; 25] = [
    // host
    "x-host",
    "x-forwarded-host",
    "x-forwarded-server",
    "x-original-host",
    "x-http-host-override",
    "forwarded",
    // scheme and port
    "x-forwarded-proto",
    "x-forwarded-protocol",
    "x-forwarded-scheme",
    "x-forwarded-ssl",
    "x-forwarded-port",
    "x-url-scheme",
    "front-end-https",
    // path
    "x-original-url",
    "x-rewrite-url",
    "x-override-url",
    "x-forwarded-prefix",
    "x-forwarded-uri",
    "x-forwarded-path",
    "x-original-uri",
    "x-proxy-url",
    "x-http-destinationurl",
    // method
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Body and framing fields: a fill is a GET without a body, whatever the client sent
/// (a GET with `Content-Length` and no body makes the backend wait for one).
pub const FILL_DROPPED_BODY: [HeaderName; 6] = [
    header::CONTENT_LENGTH,
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::CONTENT_RANGE,
    header::EXPECT,
    header::TRANSFER_ENCODING,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_named_fields_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("close, x-secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        strip_hop_by_hop(&mut h);
        assert!(h.get("x-secret").is_none());
        assert!(h.get(header::TRANSFER_ENCODING).is_none());
        assert!(h.get("x-kept").is_some());
    }

    #[test]
    fn every_connection_line_counts() {
        let mut h = HeaderMap::new();
        h.append(header::CONNECTION, HeaderValue::from_static("x-a"));
        h.append(header::CONNECTION, HeaderValue::from_static("x-b"));
        h.insert("x-a", HeaderValue::from_static("1"));
        h.insert("x-b", HeaderValue::from_static("2"));
        h.insert("x-c", HeaderValue::from_static("3"));
        strip_hop_by_hop(&mut h);
        assert!(h.get("x-a").is_none() && h.get("x-b").is_none());
        assert!(h.get("x-c").is_some());
    }

    #[test]
    fn forwarded_for_appends() {
        let mut h = HeaderMap::new();
        h.insert(&X_FORWARDED_FOR, HeaderValue::from_static("10.0.0.1"));
        add_forwarded(&mut h, "127.0.0.1".parse().unwrap(), false, None);
        assert_eq!(h[&X_FORWARDED_FOR], "10.0.0.1, 127.0.0.1");
    }
}
