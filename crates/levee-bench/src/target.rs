//! Targets resolved once before the run: addresses looked up and each HTTP/1.1
//! request rendered to bytes, so the hot loop only writes a ready buffer.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Uri};

/// What to request, before resolution.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// Absolute `http://` URL.
    pub url: String,
    /// Request method.
    pub method: Method,
    /// Request body (empty for none).
    pub body: Bytes,
    /// Body came from a siege `URL POST data` line: default to form encoding.
    pub form: bool,
}

impl RequestSpec {
    /// A plain GET of `url`.
    pub fn get(url: &str) -> Self {
        RequestSpec {
            url: url.to_string(),
            method: Method::GET,
            body: Bytes::new(),
            form: false,
        }
    }
}

/// How URLs from a list are handed to connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Each connection walks the list in order (starting at its own offset).
    Sequential,
    /// Each connection picks uniformly at random.
    Random,
}

/// Connection-level options shared by every request.
#[derive(Debug, Clone)]
pub struct Options {
    /// Extra headers (`-H`), sent on every request.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `name=value` cookies joined into one Cookie header.
    pub cookies: Vec<String>,
    /// Reuse connections (HTTP/1.1 keep-alive); false opens one per request.
    pub keepalive: bool,
    /// Speak HTTP/2 with prior knowledge (h2c) instead of HTTP/1.1.
    pub http2: bool,
    /// Speak HTTP/3 to https:// URLs.
    pub http3: bool,
    /// HTTP/3: accept any certificate.
    pub insecure: bool,
    /// Give up on a request after this long (counted as a timeout error).
    pub timeout: Duration,
    /// Give up on a TCP connect after this long (counted as a connect error).
    pub connect_timeout: Duration,
    /// URL pick order when there are several.
    pub order: Order,
    /// Worker threads (each with its own single-threaded runtime).
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            headers: Vec::new(),
            cookies: Vec::new(),
            keepalive: true,
            http2: false,
            http3: false,
            insecure: false,
            timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            order: Order::Sequential,
            threads: default_threads(),
        }
    }
}

/// One worker thread per core, as wrk does.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A resolved, pre-rendered request.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) url: String,
    /// Index into `Plan::addrs`.
    pub(crate) addr: usize,
    /// The whole HTTP/1.1 request, ready to write.
    pub(crate) h1: Bytes,
    /// HEAD responses carry no body whatever their headers say.
    pub(crate) head: bool,
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    /// Headers for HTTP/2 (no Host/Connection; :authority comes from the URI).
    pub(crate) h2_headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// Everything a run needs, resolved and validated.
#[derive(Debug)]
pub struct Plan {
    pub(crate) targets: Vec<Target>,
    pub(crate) addrs: Vec<SocketAddr>,
    pub(crate) opts: Options,
}

impl Plan {
    /// Validates URLs, resolves hosts and renders requests.
    pub fn build(specs: Vec<RequestSpec>, opts: Options) -> Result<Plan> {
        if specs.is_empty() {
            bail!("no URL to load: give a URL or -f FILE");
        }
        let mut authorities: Vec<(String, u16)> = Vec::new();
        let mut addrs = Vec::new();
        let mut targets = Vec::with_capacity(specs.len());
        for spec in specs {
            let uri: Uri = spec.url.parse().map_err(|e| {
                anyhow!(
                    "bad URL '{}': {e} (expected e.g. http://127.0.0.1:8080/path)",
                    spec.url
                )
            })?;
            match uri.scheme_str() {
                Some("http") if opts.http3 => bail!(
                    "'{}': HTTP/3 is over TLS only: give an https:// URL (add -k for a \
                     self-signed certificate)",
                    spec.url
                ),
                Some("http") => {}
                Some("https") if opts.http3 => {}
                Some("https") => bail!(
                    "'{}': https is spoken over HTTP/3 only (--h3); for HTTP/1.1 and h2c \
                     bench the server behind its TLS terminator, or put levee serve in front",
                    spec.url
                ),
                _ => bail!(
                    "bad URL '{}': it must start with http:// (e.g. http://127.0.0.1:8080/)",
                    spec.url
                ),
            }
            let authority = uri
                .authority()
                .ok_or_else(|| anyhow!("bad URL '{}': no host", spec.url))?
                .clone();
            if authority.as_str().contains('@') {
                bail!(
                    "'{}': credentials in URLs are not supported; use -H 'Authorization: ...'",
                    spec.url
                );
            }
            let host = authority
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']');
            let port = authority
                .port_u16()
                .unwrap_or(if opts.http3 { 443 } else { 80 });
            let key = (host.to_string(), port);
            let addr = match authorities.iter().position(|a| *a == key) {
                Some(i) => i,
                None => {
                    let resolved = (host, port)
                        .to_socket_addrs()
                        .with_context(|| format!("cannot resolve host '{host}' of {}", spec.url))?
                        .next()
                        .ok_or_else(|| anyhow!("host '{host}' has no address"))?;
                    authorities.push(key);
                    addrs.push(resolved);
                    addrs.len() - 1
                }
            };
            let path = uri
                .path_and_query()
                .map(|p| p.as_str())
                .filter(|p| !p.is_empty())
                .unwrap_or("/");
            let h1 = render_h1(&spec, path, authority.as_str(), &opts);
            let h2_headers = h2_headers(&spec, &opts)?;
            targets.push(Target {
                url: spec.url,
                addr,
                h1,
                head: spec.method == Method::HEAD,
                method: spec.method,
                uri,
                h2_headers,
                body: spec.body,
            });
        }
        Ok(Plan {
            targets,
            addrs,
            opts,
        })
    }

    /// The first URL, for reports.
    pub fn first_url(&self) -> &str {
        self.targets.first().map(|t| t.url.as_str()).unwrap_or("")
    }

    /// How many distinct URLs the plan cycles through.
    pub fn url_count(&self) -> usize {
        self.targets.len()
    }

    /// The options the plan was built with.
    pub fn options(&self) -> &Options {
        &self.opts
    }
}

fn has(opts: &Options, name: &str) -> bool {
    opts.headers.iter().any(|(n, _)| n.as_str() == name)
}

fn render_h1(spec: &RequestSpec, path: &str, authority: &str, opts: &Options) -> Bytes {
    let mut s = String::with_capacity(128 + spec.body.len());
    s.push_str(spec.method.as_str());
    s.push(' ');
    s.push_str(path);
    s.push_str(" HTTP/1.1\r\n");
    if !has(opts, "host") {
        s.push_str("Host: ");
        s.push_str(authority);
        s.push_str("\r\n");
    }
    if !has(opts, "user-agent") {
        s.push_str("User-Agent: levee-bench/");
        s.push_str(env!("CARGO_PKG_VERSION"));
        s.push_str("\r\n");
    }
    let mut out = s.into_bytes();
    for (name, value) in &opts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !opts.cookies.is_empty() {
        out.extend_from_slice(b"Cookie: ");
        out.extend_from_slice(opts.cookies.join("; ").as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if spec.form && !spec.body.is_empty() && !has(opts, "content-type") {
        out.extend_from_slice(b"Content-Type: application/x-www-form-urlencoded\r\n");
    }
    let needs_length =
        !spec.body.is_empty() || matches!(spec.method, Method::POST | Method::PUT | Method::PATCH);
    if needs_length && !has(opts, "content-length") {
        out.extend_from_slice(format!("Content-Length: {}\r\n", spec.body.len()).as_bytes());
    }
    if !opts.keepalive && !has(opts, "connection") {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&spec.body);
    Bytes::from(out)
}

fn h2_headers(spec: &RequestSpec, opts: &Options) -> Result<HeaderMap> {
    let mut map = HeaderMap::new();
    for (name, value) in &opts.headers {
        if matches!(
            name.as_str(),
            "host" | "connection" | "keep-alive" | "transfer-encoding" | "upgrade"
        ) {
            continue;
        }
        map.append(name.clone(), value.clone());
    }
    if !map.contains_key(http::header::USER_AGENT) {
        map.insert(
            http::header::USER_AGENT,
            HeaderValue::from_static(concat!("levee-bench/", env!("CARGO_PKG_VERSION"))),
        );
    }
    if !opts.cookies.is_empty() {
        let v = HeaderValue::from_str(&opts.cookies.join("; "))
            .context("a --cookie value contains characters not allowed in a header")?;
        map.insert(http::header::COOKIE, v);
    }
    if spec.form && !spec.body.is_empty() && !map.contains_key(http::header::CONTENT_TYPE) {
        map.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_request_bytes() {
        let opts = Options {
            headers: vec![(
                HeaderName::from_static("x-test"),
                HeaderValue::from_static("1"),
            )],
            cookies: vec!["a=1".into(), "b=2".into()],
            keepalive: false,
            ..Options::default()
        };
        let spec = RequestSpec {
            url: "http://127.0.0.1:9/login?x=1".into(),
            method: Method::POST,
            body: Bytes::from_static(b"u=1"),
            form: true,
        };
        let plan = Plan::build(vec![spec], opts).unwrap();
        let req = std::str::from_utf8(&plan.targets[0].h1).unwrap();
        assert!(req.starts_with("POST /login?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"));
        assert!(req.contains("x-test: 1\r\n"));
        assert!(req.contains("Cookie: a=1; b=2\r\n"));
        assert!(req.contains("Content-Type: application/x-www-form-urlencoded\r\n"));
        assert!(req.contains("Content-Length: 3\r\n"));
        assert!(req.contains("Connection: close\r\n"));
        assert!(req.ends_with("\r\n\r\nu=1"));
    }

    #[test]
    fn rejects_bad_urls_with_advice() {
        for (url, want) in [
            (
                "https://127.0.0.1/",
                "https is spoken over HTTP/3 only (--h3)",
            ),
            ("ftp://127.0.0.1/", "must start with http://"),
            ("http://a b/", "bad URL"),
        ] {
            let err = Plan::build(vec![RequestSpec::get(url)], Options::default()).unwrap_err();
            assert!(format!("{err:#}").contains(want), "{url}: {err:#}");
        }
        // HTTP/3 is over TLS only: an http:// URL says to give https.
        let h3 = Options {
            http3: true,
            ..Options::default()
        };
        let err = Plan::build(vec![RequestSpec::get("http://127.0.0.1/")], h3).unwrap_err();
        assert!(format!("{err:#}").contains("over TLS only"), "{err:#}");
        let h3 = Options {
            http3: true,
            ..Options::default()
        };
        let plan = Plan::build(vec![RequestSpec::get("https://127.0.0.1/")], h3).unwrap();
        assert_eq!(plan.addrs[0].port(), 443, "https's port by default");
    }
}
