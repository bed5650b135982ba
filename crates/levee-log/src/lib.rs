//! The access log (`[log] access = "combined" | "json"`): one line per request, written
//! by a thread of its own so that a slow disk never holds a request. The serving threads
//! hand over a [`Record`] through a bounded channel and never wait: when the writer
//! cannot keep up, lines are dropped and counted (`levee_access_log_dropped_total`).
//! SIGUSR1 reopens the file, after logrotate moved it. Under systemd, when the log goes
//! to standard output and that is the journal, each record is a `levee::access` event
//! with fields instead (STATUS, CACHE, SITE, ...: `journalctl -u levee CACHE=MISS`).

use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, SystemTime};

use http::{HeaderValue, Method, Uri, Version};
use levee_config::{AccessLog, AccessLogFormat};

use prometheus_client::metrics::counter::Counter;

/// Lines waiting for the writer at most; beyond, new ones are dropped.
const QUEUE: usize = 16_384;

/// What one line says. Built after the response head, moved to the writer thread.
pub struct Record {
    pub time: SystemTime,
    pub peer: IpAddr,
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub referer: Option<HeaderValue>,
    pub user_agent: Option<HeaderValue>,
    pub status: u16,
    /// Body length, when known at the head.
    pub bytes: Option<u64>,
    /// Where the response came from (HIT, MISS, PASS, STATIC, ERROR...).
    pub cache: &'static str,
    /// The site that served it.
    pub site: Option<std::sync::Arc<str>>,
    /// How long this request waited for the backend's response head, if it did.
    pub backend: Option<Duration>,
    pub total: Duration,
    /// Why, for an error or a stale answer (`network-over-share`, `backend-busy`...).
    pub reason: Option<std::borrow::Cow<'static, str>>,
}

enum Msg {
    Line(Box<Record>),
    Reopen,
}

/// The serving side of the log.
pub struct AccessLogger {
    tx: SyncSender<Msg>,
    pub dropped: Counter,
}

impl AccessLogger {
    /// Opens the file (or standard output) and starts the writer thread.
    pub fn start(config: &AccessLog) -> io::Result<AccessLogger> {
        let out = open(config.file.as_deref())?;
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let format = config.format;
        let file = config.file.clone();
        let journal = file.is_none() && levee_systemd::is_journal_stream(io::stdout());
        std::thread::Builder::new()
            .name("levee-access-log".into())
            .spawn(move || write_lines(rx, out, format, file, journal))?;
        Ok(AccessLogger {
            tx,
            dropped: Counter::default(),
        })
    }

    /// Queues one line; never waits.
    pub fn log(&self, record: Record) {
        match self.tx.try_send(Msg::Line(Box::new(record))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.inc();
            }
        }
    }

    /// Reopens the file (SIGUSR1). Waits for room in the queue: called off the workers.
    pub fn reopen(&self) {
        let _ = self.tx.send(Msg::Reopen);
    }
}

fn open(file: Option<&Path>) -> io::Result<Box<dyn Write + Send>> {
    Ok(match file {
        Some(path) => Box::new(OpenOptions::new().create(true).append(true).open(path)?),
        None => Box::new(io::stdout()),
    })
}

fn write_lines(
    rx: Receiver<Msg>,
    out: Box<dyn Write + Send>,
    format: AccessLogFormat,
    file: Option<PathBuf>,
    journal: bool,
) {
    let mut out = BufWriter::with_capacity(64 * 1024, out);
    let mut line = String::with_capacity(512);
    loop {
        let first = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        // Everything queued goes out in one write; flushed when the queue runs dry.
        let mut next = Some(first);
        while let Some(msg) = next {
            match msg {
                Msg::Line(r) => {
                    line.clear();
                    match format {
                        AccessLogFormat::Combined => combined(&r, &mut line),
                        AccessLogFormat::Json => json(&r, &mut line),
                    }
                    if journal {
                        to_journal(&r, line.trim_end());
                    } else {
                        let _ = out.write_all(line.as_bytes());
                    }
                }
                Msg::Reopen => {
                    let _ = out.flush();
                    match open(file.as_deref()) {
                        Ok(new) => out = BufWriter::with_capacity(64 * 1024, new),
                        Err(e) => tracing::error!(
                            file = ?file,
                            error = %e,
                            "cannot reopen the access log; still writing to the old file"
                        ),
                    }
                }
            }
            next = rx.try_recv().ok();
        }
        let _ = out.flush();
    }
    let _ = out.flush();
}

/// One record as an event with fields, for the journal (main.rs routes the
/// `levee::access` target there whatever `LEVEE_LOG` says).
fn to_journal(r: &Record, line: &str) {
    tracing::info!(
        target: "levee::access",
        status = r.status,
        cache = r.cache,
        site = r.site.as_deref().unwrap_or("-"),
        method = r.method.as_str(),
        uri = %target(r),
        client = %r.peer,
        bytes = r.bytes,
        backend_seconds = r.backend.map(|b| b.as_secs_f64()),
        total_seconds = r.total.as_secs_f64(),
        reason = r.reason.as_deref(),
        "{line}"
    );
}

/// `[10/Oct/2000:13:55:36 +0000]`, in UTC.
fn clf_time(t: SystemTime, out: &mut String) {
    use std::fmt::Write as _;
    // "Tue, 10 Oct 2000 13:55:36 GMT"
    let d = httpdate::fmt_http_date(t);
    let parts: Vec<&str> = d.split(' ').collect();
    if let [_, day, month, year, time, _] = parts[..] {
        let _ = write!(out, "[{day}/{month}/{year}:{time} +0000]");
    } else {
        let _ = write!(out, "[{d}]");
    }
}

fn text(v: &Option<HeaderValue>) -> String {
    v.as_ref()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default()
}

/// A field inside double quotes: quotes, backslashes and control bytes escaped, so a
/// client cannot forge a line or a field (as nginx escapes them).
fn quoted(s: &str, out: &mut String) {
    use std::fmt::Write as _;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\x22"),
            '\\' => out.push_str("\\x5C"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn target(r: &Record) -> String {
    r.uri
        .path_and_query()
        .map_or_else(|| r.uri.to_string(), |p| p.as_str().to_string())
}

/// NCSA combined, then levee's fields:
/// `host - - [time] "GET /p HTTP/1.1" 200 1234 "referer" "agent" cache=HIT backend=0.012 total=0.013 site=default`
fn combined(r: &Record, out: &mut String) {
    use std::fmt::Write as _;
    let _ = write!(out, "{} - - ", r.peer);
    clf_time(r.time, out);
    out.push(' ');
    quoted(&format!("{} {} {:?}", r.method, target(r), r.version), out);
    let _ = write!(out, " {} ", r.status);
    match r.bytes {
        Some(b) => {
            let _ = write!(out, "{b}");
        }
        None => out.push('-'),
    }
    out.push(' ');
    quoted(&text(&r.referer), out);
    out.push(' ');
    quoted(&text(&r.user_agent), out);
    let _ = writeln!(
        out,
        " cache={} backend={} total={:.6} site={}",
        r.cache,
        r.backend
            .map_or("-".to_string(), |b| format!("{:.6}", b.as_secs_f64())),
        r.total.as_secs_f64(),
        // Site names come from the operator's file; spaces would split the field.
        r.site
            .as_deref()
            .unwrap_or("-")
            .replace(char::is_whitespace, "_")
    );
    if let Some(reason) = &r.reason {
        // Before the newline; levee's own words, but quoted like the rest for safety.
        out.pop();
        out.push_str(" reason=");
        out.push_str(&reason.replace(|c: char| c.is_whitespace() || c == '"', "_"));
        out.push('\n');
    }
}

fn json(r: &Record, out: &mut String) {
    let v = serde_json::json!({
        "time": httpdate::fmt_http_date(r.time),
        "client": r.peer.to_string(),
        "method": r.method.as_str(),
        "uri": target(r),
        "protocol": format!("{:?}", r.version),
        "status": r.status,
        "bytes": r.bytes,
        "referer": r.referer.as_ref().map(|_| text(&r.referer)),
        "user_agent": r.user_agent.as_ref().map(|_| text(&r.user_agent)),
        "cache": r.cache,
        "site": r.site.as_deref(),
        "backend_seconds": r.backend.map(|b| b.as_secs_f64()),
        "total_seconds": r.total.as_secs_f64(),
        "reason": r.reason.as_deref(),
    });
    out.push_str(&v.to_string());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136),
            peer: "192.0.2.7".parse().unwrap(),
            method: Method::GET,
            uri: "/a?b=1".parse().unwrap(),
            version: Version::HTTP_11,
            referer: Some(HeaderValue::from_static(
                "http://x/\"evil\"\t1.2.3.4 - - fake",
            )),
            user_agent: Some(HeaderValue::from_static("curl/8")),
            status: 200,
            bytes: Some(1234),
            cache: "HIT",
            site: Some("default".into()),
            backend: None,
            total: Duration::from_micros(1500),
            reason: None,
        }
    }

    #[test]
    fn combined_lines_cannot_be_forged() {
        let mut s = String::new();
        combined(&record(), &mut s);
        assert_eq!(
            s,
            "192.0.2.7 - - [10/Oct/2000:13:55:36 +0000] \"GET /a?b=1 HTTP/1.1\" 200 1234 \
             \"http://x/\\x22evil\\x22\\x091.2.3.4 - - fake\" \"curl/8\" cache=HIT backend=- total=0.001500 site=default\n"
        );
        assert_eq!(s.matches('\n').count(), 1);
    }

    #[test]
    fn json_lines_are_objects() {
        let mut s = String::new();
        json(&record(), &mut s);
        let v: serde_json::Value = serde_json::from_str(s.trim()).unwrap();
        assert_eq!(v["status"], 200);
        assert_eq!(v["cache"], "HIT");
        assert_eq!(v["uri"], "/a?b=1");
        assert!(v["backend_seconds"].is_null());
    }
}
