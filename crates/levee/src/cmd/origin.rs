//! `levee origin`: a deliberately slow origin that behaves like the seed sites (XE,
//! gnuboard, MoniWiki): every page takes a while to render and starts a PHP session.
//! Used by `levee demo`, the benchmarks and the tests as a real server to put levee in
//! front of.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, COOKIE, SET_COOKIE};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

/// Arguments of `levee origin`.
#[derive(Debug, Clone, clap::Args)]
pub struct OriginArgs {
    /// Address to listen on.
    #[arg(long, short = 'l', default_value = "127.0.0.1:9000")]
    pub listen: SocketAddr,
    /// Time each page takes to "render".
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    pub delay: Duration,
    /// Cache-Control sent with every page (none by default).
    #[arg(long, value_name = "VALUE")]
    pub cache_control: Option<String>,
    /// Do not start a PHP session (no Set-Cookie: PHPSESSID) on anonymous requests.
    #[arg(long)]
    pub no_session: bool,
    /// Page size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub body_size: usize,
    /// Header fields of about this many bytes in all, as on the wire, as a site's pages
    /// carry them: per page an ETag and a Last-Modified, then fields the same on every
    /// page (Server, Accept-Ranges, security policies, a Link, X-Powered-By), the last
    /// sized to fill. 0: only Content-Type, Cache-Control, Date and Content-Length.
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    pub header_bytes: usize,
    /// Pages rendered at once; more requests queue, like php-fpm's pm.max_children
    /// (whose default is 5). 0 means unlimited.
    #[arg(long, default_value_t = 5)]
    pub workers: usize,
}

/// Counters a test or benchmark reads from `GET /__origin/stats`.
#[derive(Default)]
pub struct OriginStats {
    pub requests: AtomicU64,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    /// Time per page in µs, once changed by `GET /__origin/delay?ms=N` (a benchmark
    /// slowing the backend mid-run); 0: `--delay`.
    pub delay_us: AtomicU64,
}

pub fn run(args: OriginArgs) -> anyhow::Result<std::process::ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(args.listen).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {}: {e}; pick another address with --listen",
                args.listen
            )
        })?;
        eprintln!(
            "levee origin: listening on http://{}, {:?} per page",
            listener.local_addr()?,
            args.delay
        );
        let stats = Arc::new(OriginStats::default());
        tokio::select! {
            _ = serve(listener, args, stats) => {},
            _ = crate::cmd::serve::shutdown_signal() => {},
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Serves the origin on `listener` forever.
pub async fn serve(listener: TcpListener, args: OriginArgs, stats: Arc<OriginStats>) {
    let workers = Arc::new(tokio::sync::Semaphore::new(if args.workers == 0 {
        tokio::sync::Semaphore::MAX_PERMITS
    } else {
        args.workers
    }));
    let args = Arc::new(args);
    let session_counter = Arc::new(AtomicU64::new(1));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let args = args.clone();
        let stats = stats.clone();
        let sessions = session_counter.clone();
        let workers = workers.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                page(
                    req,
                    args.clone(),
                    stats.clone(),
                    sessions.clone(),
                    workers.clone(),
                )
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn page(
    req: Request<Incoming>,
    args: Arc<OriginArgs>,
    stats: Arc<OriginStats>,
    sessions: Arc<AtomicU64>,
    workers: Arc<tokio::sync::Semaphore>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() == "/__origin/delay" {
        let ms = req
            .uri()
            .query()
            .and_then(|q| q.strip_prefix("ms="))
            .and_then(|v| v.parse::<u64>().ok());
        let (status, body) = match ms {
            Some(ms) => {
                // At most 10 minutes a page: any number a client sends stays in range.
                let ms = ms.clamp(1, 600_000);
                stats.delay_us.store(ms * 1000, Ordering::Relaxed);
                (hyper::StatusCode::OK, format!("delay {ms} ms\n"))
            }
            None => (
                hyper::StatusCode::BAD_REQUEST,
                "usage: /__origin/delay?ms=N\n".to_string(),
            ),
        };
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return Ok(r);
    }
    if req.uri().path() == "/__origin/stats" {
        let body = format!(
            "{{\"requests\":{},\"in_flight\":{},\"max_in_flight\":{}}}\n",
            stats.requests.load(Ordering::Relaxed),
            stats.in_flight.load(Ordering::Relaxed),
            stats.max_in_flight.load(Ordering::Relaxed)
        );
        let mut r = Response::new(Full::new(Bytes::from(body)));
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r.headers_mut()
            .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return Ok(r);
    }
    stats.requests.fetch_add(1, Ordering::Relaxed);
    let now = stats.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
    stats.max_in_flight.fetch_max(now, Ordering::AcqRel);
    {
        let _worker = workers.acquire().await;
        let delay = match stats.delay_us.load(Ordering::Relaxed) {
            0 => args.delay,
            us => Duration::from_micros(us),
        };
        tokio::time::sleep(delay).await;
    }
    stats.in_flight.fetch_sub(1, Ordering::AcqRel);

    let session = req
        .headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(';'))
        .find_map(|c| c.trim().strip_prefix("PHPSESSID=").map(str::to_string));
    let who = match &session {
        Some(sid) => format!("logged in as session {sid}"),
        None => "anonymous visitor".to_string(),
    };
    let mut html = format!(
        "<!doctype html><html><head><title>levee origin</title></head><body><h1>{}</h1><p>{who}</p>",
        req.uri().path()
    );
    fill_text(
        &mut html,
        args.body_size.saturating_sub(15),
        req.uri().path(),
    );
    html.push_str("</body></html>");
    let body_len = html.len() as u64;
    let mut r = Response::new(Full::new(Bytes::from(html)));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=UTF-8"),
    );
    // Per URL, for mixed loads (benchmarks/soak.sh): `?cache-control=public,max-age=2`
    // (or `none`) instead of --cache-control, `?tag=T` as a Surrogate-Key.
    let mut cc = args.cache_control.clone();
    for (k, v) in form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
        match &*k {
            "cache-control" if v == "none" => cc = None,
            "cache-control" => cc = Some(v.into_owned()),
            "tag" => {
                if let Ok(v) = HeaderValue::from_str(&v) {
                    h.insert("surrogate-key", v);
                }
            }
            _ => {}
        }
    }
    if let Some(cc) = cc {
        if let Ok(v) = HeaderValue::from_str(&cc) {
            h.insert(CACHE_CONTROL, v);
        }
    }
    if args.header_bytes > 0 {
        let path = req.uri().path().to_string();
        site_headers(r.headers_mut(), &path, body_len, args.header_bytes);
    }
    let h = r.headers_mut();
    if session.is_none() && !args.no_session {
        let id = sessions.fetch_add(1, Ordering::Relaxed);
        if let Ok(v) = HeaderValue::from_str(&format!("PHPSESSID=demo{id:08x}; path=/")) {
            h.insert(SET_COOKIE, v);
        }
    }
    Ok(r)
}

/// Adds header fields to `h` until they come to about `target` bytes on the wire
/// (`name: value` and CRLF each, the Date and Content-Length hyper adds included): per
/// page first (ETag, Last-Modified, from the path as nginx derives them from the file),
/// then what a site sends on every page, the last, a Content-Security-Policy, sized to
/// fill.
fn site_headers(h: &mut http::HeaderMap, path: &str, body_len: u64, target: usize) {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut hasher);
    let id = hasher.finish();
    let modified = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + id % 10_000_000);
    let fields: [(&str, String); 10] = [
        ("etag", format!("\"{:x}-{body_len:x}\"", id >> 32)),
        ("last-modified", httpdate::fmt_http_date(modified)),
        ("server", "nginx/1.22.1".into()),
        ("accept-ranges", "bytes".into()),
        ("x-content-type-options", "nosniff".into()),
        ("referrer-policy", "strict-origin-when-cross-origin".into()),
        (
            "strict-transport-security",
            "max-age=31536000; includeSubDomains".into(),
        ),
        ("x-powered-by", "PHP/8.2.29".into()),
        (
            "link",
            "</wp-content/themes/site/style.css?ver=6.4>; rel=preload; as=style".into(),
        ),
        (
            "permissions-policy",
            "camera=(), microphone=(), geolocation=()".into(),
        ),
    ];
    let wire = |n: &str, v: &str| n.len() + v.len() + 4;
    // Date (29 bytes of value) and Content-Length, which hyper adds.
    let mut total = wire("date", "Thu, 01 Jan 2026 00:00:00 GMT")
        + wire("content-length", &body_len.to_string())
        + h.iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 4)
            .sum::<usize>();
    for (name, value) in fields {
        if total + wire(name, &value) > target {
            break;
        }
        if let Ok(v) = HeaderValue::from_str(&value) {
            total += wire(name, &value);
            h.insert(name, v);
        }
    }
    let room = target.saturating_sub(total + wire("content-security-policy", ""));
    if room > 0 {
        let policy = "default-src 'self'; script-src 'self' 'unsafe-inline'; img-src 'self' data: https:; style-src 'self' 'unsafe-inline'; font-src 'self' data:; connect-src 'self'; frame-ancestors 'self'; ";
        let value: String = policy.chars().cycle().take(room).collect();
        if let Ok(v) = HeaderValue::from_str(value.trim_end()) {
            h.insert("content-security-policy", v);
        }
    }
}

/// Words for page text: enough variety that the page compresses like real HTML (gzip
/// to about a third), not like one repeated line (a thousandth), so that measurements
/// of stored compressed pages mean something.
const WORDS: &[&str] = &[
    "the",
    "cache",
    "page",
    "wiki",
    "board",
    "user",
    "anonymous",
    "session",
    "cookie",
    "levee",
    "varnish",
    "nginx",
    "request",
    "response",
    "server",
    "backend",
    "worker",
    "php",
    "forum",
    "post",
    "comment",
    "reply",
    "article",
    "edit",
    "history",
    "search",
    "login",
    "member",
    "notice",
    "gallery",
    "upload",
    "image",
    "title",
    "content",
    "link",
    "category",
    "recent",
    "changes",
    "popular",
    "today",
    "yesterday",
    "week",
    "month",
    "version",
    "release",
    "update",
    "install",
    "config",
    "module",
    "theme",
    "plugin",
    "of",
    "and",
    "to",
    "in",
    "is",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "this",
];

/// Appends `<p>` paragraphs of pseudo-random words until `html` is `target` bytes long;
/// the same path always gives the same text.
fn fill_text(html: &mut String, target: usize, seed_text: &str) {
    // FNV-1a of the path, then xorshift64: deterministic and dependency-free.
    let mut x = seed_text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    let mut words_in_paragraph = 0;
    html.push_str("<p>");
    while html.len() + 5 < target {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let word = WORDS[(x % WORDS.len() as u64) as usize];
        html.push_str(word);
        words_in_paragraph += 1;
        if words_in_paragraph > 8 + (x >> 60) as usize {
            html.push_str(".</p>\n<p>");
            words_in_paragraph = 0;
        } else {
            html.push(' ');
        }
    }
    html.push_str("</p>");
    // Exactly `target` bytes when asked for (the benchmarks set body sizes).
    while html.len() < target {
        html.push(' ');
    }
}
