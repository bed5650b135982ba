//! FastCGI parameters: the CGI/1.1 variables of one request.

use std::fmt;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use http::Version;

/// The request target as the client sent it, in the request's extensions when levee
/// rewrote `uri` (a route's `rewrite`): what `REQUEST_URI` says.
#[derive(Debug, Clone)]
pub struct OriginalUri(pub http::Uri);

/// Ordered name/value pairs sent as the FCGI_PARAMS stream. Names and values are bytes:
/// paths and header values need not be UTF-8.
///
/// ```
/// let p = levee_fastcgi::Params::new()
///     .add("SCRIPT_FILENAME", "/srv/www/index.php")
///     .add("REQUEST_METHOD", "GET");
/// assert_eq!(p.get("REQUEST_METHOD"), Some(&b"GET"[..]));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Params {
    pub fn new() -> Params {
        Params::default()
    }

    /// Appends a pair (builder style). A name added twice is sent twice; php keeps the last.
    #[must_use]
    pub fn add(mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Params {
        self.push(name, value);
        self
    }

    /// Appends a pair.
    pub fn push(&mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.pairs
            .push((name.as_ref().to_vec(), value.as_ref().to_vec()));
    }

    /// Replaces the value of every pair named `name`, or appends the pair.
    pub fn set(&mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let (name, value) = (name.as_ref(), value.as_ref());
        let mut found = false;
        for (n, v) in &mut self.pairs {
            if n == name {
                *v = value.to_vec();
                found = true;
            }
        }
        if !found {
            self.push(name, value);
        }
    }

    /// Removes every pair named `name`.
    pub fn remove(&mut self, name: impl AsRef<[u8]>) {
        let name = name.as_ref();
        self.pairs.retain(|(n, _)| n != name);
    }

    /// The last value of `name`, as php would see it.
    pub fn get(&self, name: impl AsRef<[u8]>) -> Option<&[u8]> {
        let name = name.as_ref();
        self.pairs
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The pairs in the order they will be sent.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.pairs.iter().map(|(n, v)| (n.as_slice(), v.as_slice()))
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The CGI/1.1 variables of a request, as RFC 3875 and nginx's `fastcgi.conf` plus
    /// Debian's `snippets/fastcgi-php.conf` set them, so that PHP applications written for
    /// nginx see the same `$_SERVER`.
    ///
    /// Every request header becomes `HTTP_*` (uppercased, `-` → `_`; repeated headers are
    /// joined with `, `, cookies with `; `), except:
    /// - `Content-Type` and `Content-Length`, which are `CONTENT_TYPE` and `CONTENT_LENGTH`;
    /// - `Proxy`, which would become `HTTP_PROXY` and redirect the outgoing HTTP requests of
    ///   many PHP libraries to an attacker ("httpoxy", CVE-2016-5385);
    /// - header names containing `_`, which would collide with their `-` spelling
    ///   (`X_Forwarded_For` posing as `X-Forwarded-For`); nginx drops them too.
    pub fn cgi(req: &CgiRequest<'_>) -> Params {
        let parts = req.parts;
        let mut p = Params::new();
        let script_filename = req
            .document_root
            .join(req.script_name.trim_start_matches('/'));
        // As received: still percent-encoded, with the query (nginx's $request_uri),
        // also when a route rewrote the target (`OriginalUri`): applications read their
        // short URLs from it, and MediaWiki redirects a request whose REQUEST_URI is not
        // the page's canonical URL, to that URL, which would be rewritten again.
        let received = parts
            .extensions
            .get::<OriginalUri>()
            .map_or(&parts.uri, |o| &o.0);
        let request_uri = match received.path_and_query().map(|pq| pq.as_str()) {
            Some(pq) if !pq.is_empty() => pq,
            _ => "/",
        };
        p.push("GATEWAY_INTERFACE", "CGI/1.1");
        p.push(
            "SERVER_SOFTWARE",
            concat!("levee/", env!("CARGO_PKG_VERSION")),
        );
        p.push("SERVER_PROTOCOL", protocol(parts.version));
        p.push("REQUEST_METHOD", parts.method.as_str());
        p.push("REQUEST_SCHEME", if req.https { "https" } else { "http" });
        if req.https {
            p.push("HTTPS", "on");
        }
        p.push("REQUEST_URI", request_uri);
        p.push("QUERY_STRING", parts.uri.query().unwrap_or(""));
        p.push("DOCUMENT_ROOT", req.document_root.as_os_str().as_bytes());
        p.push(
            "DOCUMENT_URI",
            format!("{}{}", req.script_name, req.path_info),
        );
        p.push("SCRIPT_NAME", req.script_name);
        p.push("SCRIPT_FILENAME", script_filename.as_os_str().as_bytes());
        p.push("PATH_INFO", req.path_info);
        if !req.path_info.is_empty() {
            // RFC 3875 §4.1.6: PATH_INFO mapped onto the document root.
            let translated = req
                .document_root
                .join(req.path_info.trim_start_matches('/'));
            p.push("PATH_TRANSLATED", translated.as_os_str().as_bytes());
        }
        let remote = req.remote_addr.ip().to_canonical();
        p.push("REMOTE_ADDR", remote.to_string());
        p.push("REMOTE_PORT", req.remote_addr.port().to_string());
        p.push(
            "SERVER_ADDR",
            req.server_addr.ip().to_canonical().to_string(),
        );
        p.push("SERVER_PORT", req.server_addr.port().to_string());
        p.push("SERVER_NAME", req.server_name);
        // php built with --enable-force-cgi-redirect refuses to run without it.
        p.push("REDIRECT_STATUS", "200");

        if let Some(v) = parts.headers.get(http::header::CONTENT_TYPE) {
            p.push("CONTENT_TYPE", v.as_bytes());
        }
        if let Some(v) = parts.headers.get(http::header::CONTENT_LENGTH) {
            p.push("CONTENT_LENGTH", v.as_bytes());
        }
        let mut has_host = false;
        for name in parts.headers.keys() {
            let n = name.as_str();
            if n == "content-type" || n == "content-length" || n == "proxy" || n.contains('_') {
                continue;
            }
            has_host |= n == "host";
            let sep: &[u8] = if n == "cookie" { b"; " } else { b", " };
            let mut value = Vec::new();
            for (i, v) in parts.headers.get_all(name).iter().enumerate() {
                if i > 0 {
                    value.extend_from_slice(sep);
                }
                value.extend_from_slice(v.as_bytes());
            }
            p.push(cgi_header_name(n), value);
        }
        if !has_host {
            // HTTP/2 carries the host in :authority, which `http` keeps in the URI.
            if let Some(authority) = parts.uri.authority() {
                p.push("HTTP_HOST", authority.as_str());
            }
        }
        p
    }
}

/// `x-forwarded-for` → `HTTP_X_FORWARDED_FOR`.
fn cgi_header_name(name: &str) -> String {
    let mut out = String::with_capacity(5 + name.len());
    out.push_str("HTTP_");
    out.extend(name.chars().map(|c| {
        if c == '-' {
            '_'
        } else {
            c.to_ascii_uppercase()
        }
    }));
    out
}

fn protocol(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            }))
            .finish()
    }
}

/// What [`Params::cgi`] needs to know about one request beyond the request itself.
#[derive(Debug, Clone, Copy)]
pub struct CgiRequest<'a> {
    pub parts: &'a http::request::Parts,
    /// The site's document root, as php should see it (`DOCUMENT_ROOT`).
    pub document_root: &'a Path,
    /// The script's path from the document root, starting with `/` (`SCRIPT_NAME`); see
    /// [`route`](crate::route()).
    pub script_name: &'a str,
    /// What follows the script in the path, starting with `/`, or empty (`PATH_INFO`).
    pub path_info: &'a str,
    /// The client (`REMOTE_ADDR`, `REMOTE_PORT`).
    pub remote_addr: SocketAddr,
    /// The address the client connected to (`SERVER_ADDR`, `SERVER_PORT`).
    pub server_addr: SocketAddr,
    /// Whether the client connected over TLS, directly or through a trusted terminator
    /// (`HTTPS=on`, `REQUEST_SCHEME`).
    pub https: bool,
    /// The virtual host's name (`SERVER_NAME`).
    pub server_name: &'a str,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn text(p: &Params, name: &str) -> Option<String> {
        p.get(name).map(|v| String::from_utf8_lossy(v).into_owned())
    }

    fn parts(req: http::Request<()>) -> http::request::Parts {
        req.into_parts().0
    }

    fn cgi_for(parts: &http::request::Parts, script: &str, path_info: &str, https: bool) -> Params {
        Params::cgi(&CgiRequest {
            parts,
            document_root: Path::new("/srv/www"),
            script_name: script,
            path_info,
            remote_addr: "[::ffff:192.0.2.7]:40000".parse().unwrap(),
            server_addr: "127.0.0.1:8080".parse().unwrap(),
            https,
            server_name: "example.org",
        })
    }

    #[test]
    fn a_rewritten_target_keeps_the_clients_request_uri() {
        let mut p = parts(
            http::Request::get("/index.php?title=Main_Page&action=view")
                .body(())
                .unwrap(),
        );
        p.extensions
            .insert(OriginalUri("/wiki/Main_Page?action=view".parse().unwrap()));
        let params = cgi_for(&p, "/index.php", "", false);
        assert_eq!(
            text(&params, "REQUEST_URI").as_deref(),
            Some("/wiki/Main_Page?action=view")
        );
        assert_eq!(
            text(&params, "QUERY_STRING").as_deref(),
            Some("title=Main_Page&action=view")
        );
    }

    #[test]
    fn builder_get_set_remove() {
        let mut p = Params::new().add("A", "1").add("B", "2").add("A", "3");
        assert_eq!(p.get("A"), Some(&b"3"[..]), "the last one wins, as in php");
        assert_eq!(p.len(), 3);
        p.set("A", "4");
        assert_eq!(
            p.iter().filter(|(n, v)| *n == b"A" && *v == b"4").count(),
            2
        );
        p.set("C", "5");
        assert_eq!(p.get("C"), Some(&b"5"[..]));
        p.remove("A");
        assert_eq!(p.get("A"), None);
        assert_eq!(p.len(), 2);
        assert!(!p.is_empty());
        assert_eq!(format!("{p:?}"), r#"{"B": "2", "C": "5"}"#);
    }

    #[test]
    fn cgi_variables_like_nginx() {
        let req = http::Request::post("/blog/index.php/2024/post?p=1&q=%20x")
            .header("Host", "example.org:8080")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Content-Length", "12")
            .header("User-Agent", "test/1.0")
            .header("X-Forwarded-For", "203.0.113.9")
            .header("Accept", "text/html")
            .header("Accept", "application/json")
            .header("Cookie", "a=1")
            .header("Cookie", "b=2")
            .body(())
            .unwrap();
        let parts = parts(req);
        let p = cgi_for(&parts, "/blog/index.php", "/2024/post", true);
        let expect = [
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("SERVER_PROTOCOL", "HTTP/1.1"),
            ("REQUEST_METHOD", "POST"),
            ("REQUEST_SCHEME", "https"),
            ("HTTPS", "on"),
            ("REQUEST_URI", "/blog/index.php/2024/post?p=1&q=%20x"),
            ("QUERY_STRING", "p=1&q=%20x"),
            ("DOCUMENT_ROOT", "/srv/www"),
            ("DOCUMENT_URI", "/blog/index.php/2024/post"),
            ("SCRIPT_NAME", "/blog/index.php"),
            ("SCRIPT_FILENAME", "/srv/www/blog/index.php"),
            ("PATH_INFO", "/2024/post"),
            ("PATH_TRANSLATED", "/srv/www/2024/post"),
            ("REMOTE_ADDR", "192.0.2.7"),
            ("REMOTE_PORT", "40000"),
            ("SERVER_ADDR", "127.0.0.1"),
            ("SERVER_PORT", "8080"),
            ("SERVER_NAME", "example.org"),
            ("REDIRECT_STATUS", "200"),
            ("CONTENT_TYPE", "application/x-www-form-urlencoded"),
            ("CONTENT_LENGTH", "12"),
            ("HTTP_HOST", "example.org:8080"),
            ("HTTP_USER_AGENT", "test/1.0"),
            ("HTTP_X_FORWARDED_FOR", "203.0.113.9"),
            ("HTTP_ACCEPT", "text/html, application/json"),
            ("HTTP_COOKIE", "a=1; b=2"),
        ];
        for (name, value) in expect {
            assert_eq!(text(&p, name).as_deref(), Some(value), "{name}");
        }
        assert!(text(&p, "SERVER_SOFTWARE").unwrap().starts_with("levee/"));
        assert_eq!(text(&p, "HTTP_CONTENT_TYPE"), None);
        assert_eq!(text(&p, "HTTP_CONTENT_LENGTH"), None);
    }

    #[test]
    fn plain_http_front_controller() {
        let parts = parts(http::Request::get("/some/pretty/url").body(()).unwrap());
        let p = cgi_for(&parts, "/index.php", "", false);
        assert_eq!(text(&p, "HTTPS"), None, "HTTPS is unset, not 'off'");
        assert_eq!(text(&p, "REQUEST_SCHEME").as_deref(), Some("http"));
        assert_eq!(text(&p, "REQUEST_URI").as_deref(), Some("/some/pretty/url"));
        assert_eq!(text(&p, "QUERY_STRING").as_deref(), Some(""));
        assert_eq!(text(&p, "PATH_INFO").as_deref(), Some(""));
        assert_eq!(text(&p, "PATH_TRANSLATED"), None);
        assert_eq!(
            text(&p, "SCRIPT_FILENAME").as_deref(),
            Some("/srv/www/index.php")
        );
        assert_eq!(text(&p, "CONTENT_LENGTH"), None);
    }

    #[test]
    fn dangerous_headers_are_not_passed() {
        let req = http::Request::get("/")
            .header("Proxy", "http://evil.example:3128")
            .header("X_Forwarded_For", "10.0.0.1")
            .header("X-Real-IP", "192.0.2.1")
            .body(())
            .unwrap();
        let parts = parts(req);
        let p = cgi_for(&parts, "/index.php", "", false);
        assert_eq!(text(&p, "HTTP_PROXY"), None, "httpoxy");
        assert_eq!(text(&p, "HTTP_X_FORWARDED_FOR"), None);
        assert_eq!(text(&p, "HTTP_X_REAL_IP").as_deref(), Some("192.0.2.1"));
    }

    #[test]
    fn http2_host_comes_from_the_authority() {
        let req = http::Request::get("https://example.org/x?y")
            .version(Version::HTTP_2)
            .body(())
            .unwrap();
        let parts = parts(req);
        let p = cgi_for(&parts, "/index.php", "", true);
        assert_eq!(text(&p, "HTTP_HOST").as_deref(), Some("example.org"));
        assert_eq!(text(&p, "SERVER_PROTOCOL").as_deref(), Some("HTTP/2.0"));
        assert_eq!(text(&p, "REQUEST_URI").as_deref(), Some("/x?y"));
    }

    #[test]
    fn non_utf8_header_values_pass_as_bytes() {
        let req = http::Request::get("/")
            .header("X-Name", http::HeaderValue::from_bytes(b"caf\xe9").unwrap())
            .body(())
            .unwrap();
        let parts = parts(req);
        let p = cgi_for(&parts, "/index.php", "", false);
        assert_eq!(p.get("HTTP_X_NAME"), Some(&b"caf\xe9"[..]));
    }
}
