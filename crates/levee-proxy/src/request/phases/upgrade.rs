//! WebSockets (RFC 6455), over HTTP/1.1 `Upgrade` and HTTP/2's extended CONNECT (RFC
//! 8441): the request goes to the route's backend as an HTTP/1.1 upgrade, with the
//! proxy's fields (hop-by-hop removed, `Origin` kept, `X-Forwarded-*`); the backend's
//! `101` becomes the client's (`200` on HTTP/2), any other answer reaches the client as
//! it is. Past the handshake the two connections are relayed by levee-websocket, in a
//! task of their own: no backend slot held, bounded per client network and in all, one
//! access log line when it closes. Never the cache.

use std::sync::Arc;
use std::time::SystemTime;

use crate::body::ClientBody;
use base64::Engine;
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Method, Request, Response, StatusCode, Version};
use http_body_util::BodyExt;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use crate::body::ProxyBody;
use crate::headers::{passed_on, FILL_DROPPED_BODY};
use crate::outcome::{Answer, CacheResult};
use crate::request::respond;
use crate::request::route::Routed;
use crate::request::shared::Shared;
use crate::server::client::ConnInfo;
use levee_limits::{Class, SessionOf};
use levee_visitor::sessions::Standing;
use levee_websocket::Full;

/// Whether the request asks for a WebSocket: an HTTP/1.1 GET with `Connection: upgrade`
/// and `Upgrade: websocket`, or an HTTP/2 CONNECT with `:protocol = websocket`.
pub(crate) fn wanted(parts: &request::Parts) -> bool {
    match parts.version {
        Version::HTTP_11 => {
            parts.method == Method::GET
                && has_token(&parts.headers, header::CONNECTION, "upgrade")
                && has_token(&parts.headers, header::UPGRADE, "websocket")
        }
        Version::HTTP_2 => {
            parts.method == Method::CONNECT
                && parts
                    .extensions
                    .get::<hyper::ext::Protocol>()
                    .is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"))
        }
        _ => false,
    }
}

fn has_token(h: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    h.get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// The handshake with the backend, then the relay in a task of its own.
pub(crate) async fn tunnel(
    shared: &Arc<Shared>,
    site: Routed<'_>,
    mut parts: request::Parts,
    body: ClientBody,
    conn: ConnInfo,
) -> Answer {
    drop(body);
    let upstream = site.upstream();
    if !upstream.carries_upgrades() {
        return respond::error(
            StatusCode::NOT_IMPLEMENTED,
            "WebSockets need an HTTP backend: this path's backend is FastCGI; send the \
             WebSocket path to its server with a [[site.route]] (path = \"/ws/\", backend = \
             \"http://127.0.0.1:8080\")",
        );
    }
    let Some(client_side) = parts.extensions.remove::<OnUpgrade>() else {
        return respond::error(
            StatusCode::BAD_REQUEST,
            "this connection cannot be upgraded",
        );
    };
    let h2 = parts.version == Version::HTTP_2;
    let net = shared.client_net(conn.peer.ip(), &parts.headers);
    let (per_network, total, idle) = {
        let l = &shared.conf().settings.limits;
        (
            l.websocket_per_network,
            l.websocket_max,
            l.websocket_idle_timeout,
        )
    };
    let open = match shared.tunnels.open(net, per_network, total) {
        Ok(open) => open,
        Err(full) => {
            shared.stats.websockets.refused(full);
            let (status, why, retry) = match full {
                Full::Network => (
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many WebSockets open from this network ([limits] websocket_per_network)",
                    "10",
                ),
                Full::Total => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too many WebSockets open ([limits] websocket_max)",
                    "10",
                ),
            };
            let mut answer = respond::error(status, why);
            answer
                .resp
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static(retry));
            answer.outcome.reason = Some(match full {
                Full::Network => "websocket-network-full".into(),
                Full::Total => "websocket-full".into(),
            });
            return answer;
        }
    };
    // The handshake is a request like any other: it waits for a slot in its class (a
    // storm of upgrades is refused as any anonymous work is), released at the 101.
    let class = match site.sessions.standing(&parts) {
        Standing::Person { who } => Class::Session(SessionOf { net, who }),
        Standing::Anonymous | Standing::Unproven => Class::Anonymous(net),
    };
    let permit = match upstream.slot(class).await {
        Ok(p) => p,
        Err(e) => {
            shared.refused(class, &e);
            return respond::upstream_error(&e);
        }
    };
    let mut headers = passed_on(&parts, conn.peer.ip(), conn.tls);
    // The handshake is a GET without a body, whatever the client said: a
    // `Content-Length` passed on would have the backend read the first frames as one.
    for h in &FILL_DROPPED_BODY {
        headers.remove(h);
    }
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if h2 {
        // RFC 8441 §5: the HTTP/1.1 handshake's key is levee's to make; the client
        // checks no `Sec-WebSocket-Accept` on HTTP/2.
        let key = levee_websocket::frames::unpredictable();
        let key = base64::engine::general_purpose::STANDARD.encode(key);
        if let Ok(v) = HeaderValue::from_str(&key) {
            headers.insert(header::SEC_WEBSOCKET_KEY, v);
        }
        if let Some(authority) = parts.uri.authority() {
            if let Ok(v) = HeaderValue::from_str(authority.as_str()) {
                headers.insert(header::HOST, v);
            }
        }
    }
    let mut req = Request::new(
        http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *req.method_mut() = Method::GET;
    *req.uri_mut() = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap_or_default();
    *req.headers_mut() = headers;
    let (resp, waited) = shared.ask(upstream, req, conn).await;
    let resp = match resp {
        Ok(r) => r,
        Err(e) => return respond::upstream_error(&e),
    };
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        // A refusal (403, 426, a login page): the client gets it as it is.
        let (head, body) = resp.into_parts();
        let mut answer = respond::passed(
            shared,
            &parts,
            head,
            body,
            Some(permit),
            "websocket-refused".into(),
        );
        answer.outcome.backend_wait = Some(waited);
        return answer;
    }
    drop(permit);
    let (mut head, body) = resp.into_parts();
    drop(body);
    let Some(backend_side) = head.extensions.remove::<OnUpgrade>() else {
        return respond::error(
            StatusCode::BAD_GATEWAY,
            "the backend's 101 cannot be relayed",
        );
    };
    // The client's answer: the backend's fields of the handshake (subprotocol,
    // extensions), without its hop-by-hop ones.
    let mut out = HeaderMap::new();
    for name in [
        header::SEC_WEBSOCKET_PROTOCOL,
        header::SEC_WEBSOCKET_EXTENSIONS,
    ] {
        for v in head.headers.get_all(&name) {
            out.append(name.clone(), v.clone());
        }
    }
    for (name, v) in head.headers.iter() {
        if name == header::SET_COOKIE || name.as_str().starts_with("x-") {
            out.append(name.clone(), v.clone());
        }
    }
    let mut resp = Response::new(ProxyBody::Empty);
    if h2 {
        *resp.status_mut() = StatusCode::OK;
    } else {
        *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        if let Some(accept) = head.headers.get(header::SEC_WEBSOCKET_ACCEPT) {
            out.insert(header::SEC_WEBSOCKET_ACCEPT, accept.clone());
        }
        out.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        out.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    }
    *resp.headers_mut() = out;
    head.headers.clear();
    shared.stats.websockets.opened();
    let logged = Logged::of(&parts, conn, site.index, SystemTime::now());
    let stop = shared.tunnels.going_away();
    let task_shared = shared.clone();
    tokio::spawn(async move {
        let _open = open;
        let (client, backend) = match tokio::join!(client_side, backend_side) {
            (Ok(c), Ok(b)) => (c, b),
            _ => return,
        };
        let stats = &task_shared.stats.websockets;
        let closed = levee_websocket::relay(
            Side::client(client),
            Side::backend(backend),
            idle,
            stop,
            &|up, down| stats.bytes(up, down),
        )
        .await;
        stats.closed(closed.ended);
        logged.write(&task_shared, &closed);
    });
    let mut answer = respond::mark(
        shared,
        resp,
        CacheResult::Pass,
        None,
        Some("websocket".into()),
    );
    answer.outcome.backend_wait = Some(waited);
    answer.outcome.logged_later = true;
    answer
}

/// One end of a relayed WebSocket. A plain TCP connection on both ends (the common
/// case) is taken back out of hyper's upgrade, with the bytes hyper had read past the
/// handshake, so that every read and write of the relay is the socket's own rather than
/// one through hyper's layers of adapters; anything else (TLS, HTTP/2's stream) is
/// relayed through hyper's `Upgraded`.
enum Side {
    Tcp {
        read_ahead: bytes::Bytes,
        io: tokio::net::TcpStream,
    },
    Upgraded(TokioIo<hyper::upgrade::Upgraded>),
}

impl Side {
    fn client(up: hyper::upgrade::Upgraded) -> Side {
        match up.downcast::<TokioIo<levee_sendfile::ZcStream>>() {
            Ok(parts) => Side::Tcp {
                read_ahead: parts.read_buf,
                io: parts.io.into_inner().into_inner(),
            },
            Err(up) => Side::Upgraded(TokioIo::new(up)),
        }
    }

    fn backend(up: hyper::upgrade::Upgraded) -> Side {
        match up.downcast::<TokioIo<tokio::net::TcpStream>>() {
            Ok(parts) => Side::Tcp {
                read_ahead: parts.read_buf,
                io: parts.io.into_inner(),
            },
            Err(up) => Side::Upgraded(TokioIo::new(up)),
        }
    }
}

impl tokio::io::AsyncRead for Side {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Side::Tcp { read_ahead, .. } if !read_ahead.is_empty() => {
                let n = read_ahead.len().min(buf.remaining());
                buf.put_slice(&read_ahead.split_to(n));
                std::task::Poll::Ready(Ok(()))
            }
            Side::Tcp { io, .. } => std::pin::Pin::new(io).poll_read(cx, buf),
            Side::Upgraded(io) => std::pin::Pin::new(io).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Side {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Side::Tcp { io, .. } => std::pin::Pin::new(io).poll_write(cx, buf),
            Side::Upgraded(io) => std::pin::Pin::new(io).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Side::Tcp { .. } => std::task::Poll::Ready(Ok(())),
            Side::Upgraded(io) => std::pin::Pin::new(io).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Side::Tcp { io, .. } => std::pin::Pin::new(io).poll_shutdown(cx),
            Side::Upgraded(io) => std::pin::Pin::new(io).poll_shutdown(cx),
        }
    }
}

/// What the access log's line for a WebSocket needs, kept until it closes.
struct Logged {
    time: SystemTime,
    method: Method,
    uri: http::Uri,
    version: Version,
    referer: Option<HeaderValue>,
    user_agent: Option<HeaderValue>,
    peer: std::net::IpAddr,
    site: usize,
}

impl Logged {
    fn of(parts: &request::Parts, conn: ConnInfo, site: usize, time: SystemTime) -> Logged {
        Logged {
            time,
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            version: parts.version,
            referer: parts.headers.get(header::REFERER).cloned(),
            user_agent: parts.headers.get(header::USER_AGENT).cloned(),
            peer: conn.peer.ip(),
            site,
        }
    }

    /// One line at close: how long it lasted, the bytes each way, why it ended.
    fn write(self, shared: &Shared, closed: &levee_websocket::Closed) {
        let Some(log) = &shared.access_log else {
            return;
        };
        let status = match self.version {
            Version::HTTP_2 => 200,
            _ => 101,
        };
        log.log(levee_log::Record {
            time: self.time,
            peer: self.peer,
            method: self.method,
            uri: self.uri,
            version: self.version,
            referer: self.referer,
            user_agent: self.user_agent,
            status,
            bytes: Some(closed.down),
            cache: "WEBSOCKET",
            site: shared.sites.get(self.site).map(|s| s.name.clone()),
            backend: None,
            total: closed.lasted,
            reason: Some(
                format!(
                    "websocket: {}; {} bytes up",
                    closed.ended.describe(),
                    closed.up
                )
                .into(),
            ),
        });
    }
}
