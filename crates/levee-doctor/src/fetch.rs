//! The doctor's HTTP client: GET and HEAD only, as an anonymous browser (no cookies
//! kept), at most `rate` requests per second, each within a time limit, bodies read up to
//! a bound. One connection is kept while the server keeps it, so that a server that closes
//! every connection is seen doing so.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, StatusCode, Version};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What the doctor sends as `User-Agent`: a browser's shape, with its own name.
pub const USER_AGENT: &str =
    "Mozilla/5.0 (compatible; levee-doctor/0.1; an audit of this site's cacheability)";

/// An `http://` or `https://` URL, split as the client needs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Url {
    /// `https://`: the client speaks TLS (the system's roots, plus `--cacert`).
    pub tls: bool,
    /// Lowercase host, without brackets for IPv6.
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`; no fragment.
    pub path: String,
}

impl Url {
    /// Parses `http://host[:port]/path?query` or `https://...`.
    pub fn parse(s: &str) -> Result<Url, String> {
        let s = s.trim();
        let uri: http::Uri = s
            .parse()
            .map_err(|e| format!("{s}: not a URL ({e}); give it as http://host/path"))?;
        let tls = match uri.scheme_str() {
            Some(scheme) if scheme.eq_ignore_ascii_case("http") => false,
            Some(scheme) if scheme.eq_ignore_ascii_case("https") => true,
            Some(other) => {
                return Err(format!(
                    "{s}: {other}:// is not audited; give an http:// or https:// URL"
                ))
            }
            None => return Err(format!("{s}: give the URL with http://, like http://{s}")),
        };
        let host = uri
            .host()
            .ok_or_else(|| format!("{s}: no host in the URL"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        Ok(Url {
            tls,
            host,
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
        })
    }

    /// `host` or `host:port` as in a `Host` field.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    fn default_port(&self) -> u16 {
        if self.tls {
            443
        } else {
            80
        }
    }

    pub fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    /// The same site, another path (`/`-rooted).
    pub fn with_path(&self, path: &str) -> Url {
        Url {
            path: path.to_string(),
            ..self.clone()
        }
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}{}", self.scheme(), self.authority(), self.path)
    }
}

/// One request and its response, as the checks read it.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    /// At most the client's `max_body` bytes.
    pub body: Bytes,
    pub truncated: bool,
    /// From sending the request to the end of the body (or of what was read).
    pub elapsed: Duration,
    /// When the response head arrived.
    pub received: SystemTime,
    /// The server ended the connection after this response (`Connection: close`,
    /// HTTP/1.0 without keep-alive, or closed it).
    pub closed: bool,
}

impl Exchange {
    pub fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `Set-Cookie` lines as (name, value).
    pub fn set_cookies(&self) -> Vec<(String, String)> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|s| s.split(';').next()?.split_once('='))
            .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
            .filter(|(n, _)| !n.is_empty())
            .collect()
    }
}

/// Why a request got no response.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct FetchError(pub String);

/// The client: one kept-alive connection at a time, requests spaced by the rate.
pub struct Client {
    gap: Duration,
    last: Option<Instant>,
    timeout: Duration,
    max_body: usize,
    conn: Option<(String, SendRequest<Empty<Bytes>>)>,
    /// For https: the system's roots plus the extra CA, made at the first https URL.
    tls: Option<Arc<rustls::ClientConfig>>,
    extra_ca: Option<PathBuf>,
}

impl Client {
    /// `rate` requests per second at most (> 0), each within `timeout`, bodies read up to
    /// `max_body` bytes.
    pub fn new(rate: f64, timeout: Duration, max_body: usize) -> Client {
        Client {
            gap: Duration::from_secs_f64(1.0 / rate.max(0.01)),
            last: None,
            timeout,
            max_body,
            conn: None,
            tls: None,
            extra_ca: None,
        }
    }

    /// Also trusts the certificates of this PEM file for https (a private CA, a test's).
    pub fn with_extra_ca(mut self, pem: Option<PathBuf>) -> Client {
        self.extra_ca = pem;
        self
    }

    /// The TLS client configuration, made once.
    fn tls_config(&mut self) -> Result<Arc<rustls::ClientConfig>, FetchError> {
        if let Some(c) = &self.tls {
            return Ok(c.clone());
        }
        let mut roots = rustls::RootCertStore::empty();
        // A bad system certificate is skipped, as every TLS client does.
        let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        if let Some(file) = &self.extra_ca {
            use rustls::pki_types::pem::PemObject;
            let certs = rustls::pki_types::CertificateDer::pem_file_iter(file)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    FetchError(format!(
                        "--cacert {}: cannot read its certificates ({e}); give a PEM file",
                        file.display()
                    ))
                })?;
            roots.add_parsable_certificates(certs);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| FetchError(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        self.tls = Some(config.clone());
        Ok(config)
    }

    /// A GET (or HEAD) of `url` with the browser's fields plus `extra`.
    pub async fn send(
        &mut self,
        method: Method,
        url: &Url,
        extra: &[(header::HeaderName, String)],
    ) -> Result<Exchange, FetchError> {
        if let Some(last) = self.last {
            tokio::time::sleep_until((last + self.gap).into()).await;
        }
        self.last = Some(Instant::now());
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.exchange(method, url, extra)).await {
            Ok(r) => r,
            Err(_) => {
                self.conn = None;
                Err(FetchError(format!(
                    "{url}: no complete answer within {} s (--timeout)",
                    timeout.as_secs_f64()
                )))
            }
        }
    }

    async fn exchange(
        &mut self,
        method: Method,
        url: &Url,
        extra: &[(header::HeaderName, String)],
    ) -> Result<Exchange, FetchError> {
        let authority = url.authority();
        let mut reuse = None;
        if let Some((a, mut s)) = self.conn.take() {
            if a == authority && s.ready().await.is_ok() {
                reuse = Some(s);
            }
        }
        let mut sender = match reuse {
            Some(s) => s,
            None => {
                let tls = match url.tls {
                    true => Some(self.tls_config()?),
                    false => None,
                };
                connect(url, tls).await?
            }
        };
        let mut req = Request::new(Empty::<Bytes>::new());
        *req.method_mut() = method;
        *req.uri_mut() = url
            .path
            .parse()
            .map_err(|e| FetchError(format!("{url}: invalid path: {e}")))?;
        let h = req.headers_mut();
        h.insert(header::HOST, value(&authority)?);
        h.insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
        );
        h.insert(header::ACCEPT_LANGUAGE, HeaderValue::from_static("en"));
        for (name, v) in extra {
            h.insert(name.clone(), value(v)?);
        }
        let started = Instant::now();
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| FetchError(format!("{url}: the server did not answer: {e}")))?;
        let received = SystemTime::now();
        let (head, mut body) = resp.into_parts();
        let mut buf = BytesMut::new();
        let mut truncated = false;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| FetchError(format!("{url}: body cut off: {e}")))?;
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > self.max_body {
                    truncated = true;
                    break;
                }
                buf.extend_from_slice(&data);
            }
        }
        let elapsed = started.elapsed();
        let connection = head
            .headers
            .get(header::CONNECTION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let closed = connection.contains("close")
            || (head.version == Version::HTTP_10 && !connection.contains("keep-alive"))
            || sender.is_closed();
        if !closed && !truncated {
            self.conn = Some((authority, sender));
        }
        Ok(Exchange {
            status: head.status,
            version: head.version,
            headers: head.headers,
            body: buf.freeze(),
            truncated,
            elapsed,
            received,
            closed,
        })
    }
}

fn value(s: &str) -> Result<HeaderValue, FetchError> {
    HeaderValue::from_str(s).map_err(|_| FetchError(format!("not a valid header value: {s:?}")))
}

async fn connect(
    url: &Url,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<SendRequest<Empty<Bytes>>, FetchError> {
    let addr = if url.host.contains(':') {
        format!("[{}]:{}", url.host, url.port)
    } else {
        format!("{}:{}", url.host, url.port)
    };
    let tcp = TcpStream::connect(&addr).await.map_err(|e| {
        FetchError(format!(
            "cannot connect to {addr}: {e} (is the site running, and is this the address it listens on?)"
        ))
    })?;
    let _ = tcp.set_nodelay(true);
    match tls {
        None => handshake(&addr, TokioIo::new(tcp)).await,
        Some(config) => {
            let name = rustls::pki_types::ServerName::try_from(url.host.clone())
                .map_err(|e| FetchError(format!("{url}: not a TLS server name: {e}")))?;
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| {
                    FetchError(format!(
                        "{url}: TLS handshake failed: {e} (a private CA? give it with --cacert FILE)"
                    ))
                })?;
            handshake(&addr, TokioIo::new(stream)).await
        }
    }
}

async fn handshake<T>(addr: &str, io: T) -> Result<SendRequest<Empty<Bytes>>, FetchError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| FetchError(format!("{addr}: HTTP handshake failed: {e}")))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_with_what_to_do_on_error() {
        let u = Url::parse("http://Example.com:8080/a?b=1").unwrap();
        assert_eq!(u.host, "example.com");
        assert_eq!(u.port, 8080);
        assert_eq!(u.path, "/a?b=1");
        assert_eq!(u.to_string(), "http://example.com:8080/a?b=1");
        assert_eq!(Url::parse("http://x").unwrap().path, "/");
        let u = Url::parse("HTTPS://x/").unwrap();
        assert!(u.tls && u.port == 443);
        assert_eq!(u.to_string(), "https://x/");
        assert_eq!(Url::parse("https://x:8443/").unwrap().authority(), "x:8443");
        assert!(Url::parse("ftp://x/").unwrap_err().contains("not audited"));
        assert!(Url::parse("example.com").is_err());
    }
}
