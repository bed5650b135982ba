//! One kept-alive HTTP/1.1 connection from a chosen loopback address, and a cookie jar.
//! Every failure is returned (and counted by the caller), never unwrapped: the server
//! under test is allowed to misbehave.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpSocket;
use tokio::task::JoinHandle;

/// A body larger than this is an error (MediaWiki's largest pages here are ~200 KiB).
const MAX_BODY: usize = 16 << 20;

const USER_AGENT: &str =
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0 levee-storm";

/// Why a request got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Connect,
    Timeout,
    /// Reset, closed early, malformed answer, body too large.
    Io,
}

pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The `Host` every request carries, whichever node it goes to: one site served by
/// every node of a fleet (so that they share its cache and its edits). Unset: each
/// target's own address.
pub static SITE_HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// A connection to `target` from `local` (port chosen by the kernel), opened on first
/// use and reopened after the server closes it.
pub struct Conn {
    target: SocketAddr,
    local: IpAddr,
    host: String,
    timeout: Duration,
    sender: Option<http1::SendRequest<Full<Bytes>>>,
    driver: Option<JoinHandle<()>>,
    /// Connections opened so far (1 = kept alive all along).
    pub opened: u64,
}

impl Conn {
    pub fn new(target: SocketAddr, local: IpAddr, timeout: Duration) -> Conn {
        Conn {
            target,
            local,
            host: SITE_HOST
                .get()
                .cloned()
                .unwrap_or_else(|| target.to_string()),
            timeout,
            sender: None,
            driver: None,
            opened: 0,
        }
    }

    /// The `Host` header sent: `SITE_HOST`, or the target's address.
    pub fn host(&self) -> &str {
        &self.host
    }

    fn close(&mut self) {
        self.sender = None;
        if let Some(d) = self.driver.take() {
            d.abort();
        }
    }

    async fn connect(&mut self) -> Result<(), Failure> {
        self.close();
        let socket = TcpSocket::new_v4().map_err(|_| Failure::Connect)?;
        // Bound to its own source address before connecting, as a client on another
        // host would be. SO_REUSEADDR: a port left in TIME_WAIT by an earlier connection
        // from this address may be bound again.
        socket.set_reuseaddr(true).map_err(|_| Failure::Connect)?;
        socket
            .bind(SocketAddr::new(self.local, 0))
            .map_err(|_| Failure::Connect)?;
        let stream = socket
            .connect(self.target)
            .await
            .map_err(|_| Failure::Connect)?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|_| Failure::Connect)?;
        self.driver = Some(tokio::spawn(async move {
            let _ = conn.await;
        }));
        self.sender = Some(sender);
        self.opened += 1;
        Ok(())
    }

    /// One request, connection (re)opening included, bounded by the timeout as a whole.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<Reply, Failure> {
        let deadline = Instant::now() + self.timeout;
        let result =
            tokio::time::timeout_at(deadline.into(), self.exchange(method, path, headers, body))
                .await
                .unwrap_or(Err(Failure::Timeout));
        match &result {
            Ok(r) if !keeps_alive(&r.headers) => self.close(),
            Ok(_) => {}
            Err(_) => self.close(),
        }
        result
    }

    async fn exchange(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<Reply, Failure> {
        // A kept-alive connection the server closed while idle: open a new one.
        let usable = match self.sender.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !usable {
            self.connect().await?;
        }
        let idempotent = method == Method::GET;
        let build = || {
            let mut req = Request::builder()
                .method(method.clone())
                .uri(path)
                .header("host", &self.host)
                .header("user-agent", USER_AGENT)
                .header("accept", "text/html,application/json;q=0.9,*/*;q=0.8");
            for (k, v) in headers {
                req = req.header(*k, v);
            }
            req.body(Full::new(body.clone())).map_err(|_| Failure::Io)
        };
        let req = build()?;
        let sender = self.sender.as_mut().ok_or(Failure::Io)?;
        let resp = match sender.send_request(req).await {
            Ok(r) => r,
            // The server closed a reused connection as the request went out: a browser
            // retries a GET once on a new connection, and so does this client.
            Err(e) if usable && idempotent && (e.is_canceled() || e.is_incomplete_message()) => {
                let req = build()?;
                self.connect().await?;
                let sender = self.sender.as_mut().ok_or(Failure::Io)?;
                sender.send_request(req).await.map_err(|_| Failure::Io)?
            }
            Err(_) => return Err(Failure::Io),
        };
        let (parts, body) = resp.into_parts();
        let body = Limited::new(body, MAX_BODY)
            .collect()
            .await
            .map_err(|_| Failure::Io)?
            .to_bytes();
        Ok(Reply {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }

    pub async fn get(&mut self, path: &str, headers: &[(&str, String)]) -> Result<Reply, Failure> {
        self.send(Method::GET, path, headers, Bytes::new()).await
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close();
    }
}

fn keeps_alive(headers: &HeaderMap) -> bool {
    !headers
        .get_all(http::header::CONNECTION)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.eq_ignore_ascii_case("close")))
}

/// The cookies a browser would send back (no expiry dates or paths: one site).
#[derive(Default)]
pub struct Jar {
    cookies: BTreeMap<String, String>,
}

impl Jar {
    pub fn keep(&mut self, headers: &HeaderMap) {
        for line in headers.get_all(http::header::SET_COOKIE) {
            if let Ok(line) = line.to_str() {
                levee_test::apps::keep_set_cookie(&mut self.cookies, line);
            }
        }
    }

    /// The first kept cookie whose name ends with `suffix`.
    pub fn name_ending(&self, suffix: &str) -> Option<&str> {
        self.cookies
            .keys()
            .map(String::as_str)
            .find(|k| k.ends_with(suffix))
    }

    /// The names of the kept cookies, for messages.
    pub fn names(&self) -> Vec<&str> {
        self.cookies.keys().map(String::as_str).collect()
    }

    /// The `Cookie` header, if any cookie is kept.
    pub fn header(&self) -> Vec<(&'static str, String)> {
        if self.cookies.is_empty() {
            return Vec::new();
        }
        let v = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        vec![("cookie", v)]
    }
}

/// `application/x-www-form-urlencoded` of `form`.
pub fn form(form: &[(&str, &str)]) -> Bytes {
    let s = form
        .iter()
        .map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v)))
        .collect::<Vec<_>>()
        .join("&");
    Bytes::from(s)
}

pub fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
