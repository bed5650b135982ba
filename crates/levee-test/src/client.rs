//! HTTP clients for tests: every operation has a time limit, so a hang fails the test.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The longest any single request of a test may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// A complete response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    /// Reads the whole body.
    pub async fn read(resp: Response<Incoming>) -> Resp {
        let (parts, body) = resp.into_parts();
        let body = tokio::time::timeout(REQUEST_TIMEOUT, body.collect())
            .await
            .expect("response body timed out")
            .expect("response body failed")
            .to_bytes();
        Resp {
            status: parts.status,
            version: parts.version,
            headers: parts.headers,
            body,
        }
    }

    /// The first value of `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Every value of `name`.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect()
    }

    pub fn has(&self, name: &str) -> bool {
        self.headers.contains_key(name)
    }

    /// `X-Cache`, or "" when absent.
    pub fn x_cache(&self) -> &str {
        self.header("x-cache").unwrap_or("")
    }

    /// `X-Cache-Reason` (with `--debug-headers`), or "" when absent.
    pub fn reason(&self) -> &str {
        self.header("x-cache-reason").unwrap_or("")
    }

    /// `Age` in seconds.
    pub fn age(&self) -> Option<u64> {
        self.header("age").and_then(|a| a.trim().parse().ok())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// One line for assertion messages.
    pub fn summary(&self) -> String {
        let mut body = self.text();
        if body.len() > 200 {
            body.truncate(200);
            body.push('…');
        }
        format!(
            "{} X-Cache={:?} reason={:?} age={:?} body={body:?}",
            self.status,
            self.x_cache(),
            self.reason(),
            self.age()
        )
    }
}

/// A request under construction. `Host` is the levee address unless set.
#[derive(Debug, Clone)]
pub struct Req {
    method: Method,
    path: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Bytes,
}

impl Req {
    pub fn new(method: &str, path: &str) -> Req {
        Req {
            method: Method::from_bytes(method.as_bytes()).expect("valid method"),
            path: path.to_string(),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    pub fn get(path: &str) -> Req {
        Req::new("GET", path)
    }

    pub fn head(path: &str) -> Req {
        Req::new("HEAD", path)
    }

    pub fn post(path: &str, body: impl Into<Bytes>) -> Req {
        Req::new("POST", path).body(body)
    }

    pub fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((
            HeaderName::from_bytes(name.as_bytes()).expect("valid header name"),
            HeaderValue::from_str(value).expect("valid header value"),
        ));
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Req {
        self.body = body.into();
        self
    }

    /// The request for a server at `addr` (origin-form URI, `Host` filled in).
    pub fn build(self, addr: SocketAddr) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(self.body));
        *req.method_mut() = self.method;
        *req.uri_mut() = self.path.parse().expect("valid path");
        let h = req.headers_mut();
        for (k, v) in self.headers {
            h.append(k, v);
        }
        if !h.contains_key(http::header::HOST) {
            h.insert(
                http::header::HOST,
                HeaderValue::from_str(&addr.to_string()).expect("host"),
            );
        }
        req
    }

    /// Sends the request to `addr` on a new connection and reads the whole response.
    pub async fn send_to(self, addr: SocketAddr) -> Resp {
        let fut = async {
            let resp = self.send_streaming(addr).await;
            Resp::read(resp).await
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .unwrap_or_else(|_| panic!("request to {addr} timed out after {REQUEST_TIMEOUT:?}"))
    }

    /// [`Req::send_to`] that says `None` instead of panicking when the server is gone or
    /// the exchange fails (a test that kills the server mid-load).
    pub async fn try_send_to(self, addr: SocketAddr) -> Option<Resp> {
        let fut = async {
            let stream = TcpStream::connect(addr).await.ok()?;
            let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await.ok()?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            let resp = sender.send_request(self.build(addr)).await.ok()?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.ok()?.to_bytes();
            Some(Resp {
                status: parts.status,
                version: parts.version,
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .ok()
            .flatten()
    }

    /// Sends the request on a new connection; returns as soon as the response head is in.
    /// The connection lives as long as the response body is being read.
    pub async fn send_streaming(self, addr: SocketAddr) -> Response<Incoming> {
        self.send_streaming_over(addr, None).await
    }

    /// [`Req::send_to`] from the local address `local_ip` (port chosen by the kernel):
    /// the server sees this client as `local_ip`. On Linux any `127.x.y.z` works, so that
    /// one test can be many clients from many networks.
    pub async fn send_from(self, addr: SocketAddr, local_ip: IpAddr) -> Resp {
        let fut = async {
            let resp = self.send_streaming_from(addr, local_ip).await;
            Resp::read(resp).await
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .unwrap_or_else(|_| {
                panic!("request from {local_ip} to {addr} timed out after {REQUEST_TIMEOUT:?}")
            })
    }

    /// [`Req::send_streaming`] from the local address `local_ip`.
    pub async fn send_streaming_from(
        self,
        addr: SocketAddr,
        local_ip: IpAddr,
    ) -> Response<Incoming> {
        self.send_streaming_over(addr, Some(local_ip)).await
    }

    async fn send_streaming_over(
        self,
        addr: SocketAddr,
        local_ip: Option<IpAddr>,
    ) -> Response<Incoming> {
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, connect(addr, local_ip))
            .await
            .expect("connect timed out")
            .unwrap_or_else(|e| panic!("cannot connect to {addr} from {local_ip:?}: {e}"));
        let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .expect("HTTP/1.1 handshake");
        // Ends by itself once the response is complete and `sender` is gone.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = self.build(addr);
        tokio::time::timeout(REQUEST_TIMEOUT, sender.send_request(req))
            .await
            .unwrap_or_else(|_| panic!("response head from {addr} timed out"))
            .unwrap_or_else(|e| panic!("request to {addr} failed: {e}"))
    }
}

/// A TCP connection to `addr`, from `local_ip` (any free port) when given.
async fn connect(addr: SocketAddr, local_ip: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let Some(ip) = local_ip else {
        return TcpStream::connect(addr).await;
    };
    let socket = match ip {
        IpAddr::V4(_) => TcpSocket::new_v4()?,
        IpAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(ip, 0))?;
    socket.connect(addr).await
}

/// One HTTP/1.1 client connection, for several requests in turn (keep-alive).
pub struct Conn {
    addr: SocketAddr,
    sender: http1::SendRequest<Full<Bytes>>,
    task: tokio::task::JoinHandle<()>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(addr))
            .await
            .expect("connect timed out")
            .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"));
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .expect("HTTP/1.1 handshake");
        let task = tokio::spawn(async move {
            let _ = conn.await;
        });
        Conn { addr, sender, task }
    }

    /// Sends on this connection and reads the whole response.
    pub async fn send(&mut self, req: Req) -> Resp {
        let fut = async {
            let resp = self.send_streaming(req).await;
            Resp::read(resp).await
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .expect("request timed out")
    }

    pub async fn send_streaming(&mut self, req: Req) -> Response<Incoming> {
        let req = req.build(self.addr);
        let fut = async {
            self.sender.ready().await.expect("connection ready");
            self.sender
                .send_request(req)
                .await
                .expect("send request on connection")
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .expect("response head timed out")
    }

    /// Whether the server closed the connection (or it failed).
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed() || self.task.is_finished()
    }

    /// Waits until the connection closes; false if still open after `timeout`.
    pub async fn closed_within(&self, timeout: Duration) -> bool {
        crate::wait::eventually(timeout, || self.is_closed()).await
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One HTTP/2 connection with prior knowledge (h2c, no upgrade).
pub struct H2Conn {
    addr: SocketAddr,
    sender: http2::SendRequest<Full<Bytes>>,
    task: tokio::task::JoinHandle<()>,
}

impl H2Conn {
    pub async fn open(addr: SocketAddr) -> H2Conn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("HTTP/2 handshake");
        let task = tokio::spawn(async move {
            let _ = conn.await;
        });
        H2Conn { addr, sender, task }
    }

    pub async fn send(&mut self, req: Req) -> Resp {
        let mut req = req.build(self.addr);
        // HTTP/2 carries the authority in the URI (":authority"), not in Host.
        let host = req
            .headers_mut()
            .remove(http::header::HOST)
            .expect("host set by build");
        let uri = format!(
            "http://{}{}",
            host.to_str().expect("host"),
            req.uri().path_and_query().map_or("/", |p| p.as_str())
        );
        *req.uri_mut() = uri.parse().expect("absolute URI");
        *req.version_mut() = Version::HTTP_2;
        let fut = async {
            self.sender.ready().await.expect("h2 ready");
            let resp = self.sender.send_request(req).await.expect("h2 request");
            Resp::read(resp).await
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .expect("h2 request timed out")
    }
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A plain TCP connection, for malformed or deliberately slow requests.
pub struct RawConn {
    stream: TcpStream,
}

impl RawConn {
    pub async fn connect(addr: SocketAddr) -> RawConn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        RawConn { stream }
    }

    /// Writes all of `bytes`; an error means the server already closed or reset.
    pub async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// Reads until the server closes the connection (EOF or reset). `None` when it is
    /// still open after `timeout`; otherwise everything received.
    pub async fn read_until_closed(&mut self, timeout: Duration) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut buf = [0u8; 8192];
        loop {
            match tokio::time::timeout_at(deadline, self.stream.read(&mut buf)).await {
                Err(_) => return None,
                Ok(Ok(0)) | Ok(Err(_)) => return Some(out),
                Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Reads until `needle` has been received, the connection closes or `timeout` passes;
    /// returns what was received.
    pub async fn read_until(&mut self, needle: &[u8], timeout: Duration) -> Vec<u8> {
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut buf = [0u8; 8192];
        while !out.windows(needle.len()).any(|w| w == needle) {
            match tokio::time::timeout_at(deadline, self.stream.read(&mut buf)).await {
                Err(_) | Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            }
        }
        out
    }
}
