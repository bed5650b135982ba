//! A lean HTTP/1.1 client: writes a pre-rendered request, parses the response head
//! with httparse from a reused buffer and skips the body without copying it.
//! One task per connection, no allocation per request; that is what lets it keep up
//! with wrk (hyper's client spends a channel, a task hop and header maps per request).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::stats::Failure;
use crate::target::{Plan, Target};

/// Read buffer size per connection: a few reads for big bodies, small enough for 1000s of
/// connections.
const BUF_SIZE: usize = 32 * 1024;
/// Response heads larger than this are treated as a protocol error.
const MAX_HEAD: usize = 256 * 1024;
const MAX_HEADERS: usize = 64;

/// What the hot loop needs to know about a response.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    /// Bytes received for this response, head and body.
    pub(crate) bytes: u64,
    /// Body bytes (after de-chunking framing is not subtracted: close enough for reports).
    pub(crate) body_len: u64,
    /// The Server header, only when asked for (once per thread).
    pub(crate) server: Option<String>,
    pub(crate) keep_alive: bool,
}

/// Why reading a response failed.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Connection closed; `any` tells whether part of a response had arrived.
    Closed {
        any: bool,
    },
    Io {
        any: bool,
    },
    Protocol,
}

impl ReadError {
    /// A reused keep-alive connection the server had already closed: retry once.
    fn stale(&self) -> bool {
        matches!(
            self,
            ReadError::Closed { any: false } | ReadError::Io { any: false }
        )
    }
}

/// A reused read buffer with a window of unread bytes.
pub(crate) struct ReadBuf {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReadBuf {
    pub(crate) fn new() -> Self {
        ReadBuf {
            data: vec![0; BUF_SIZE],
            start: 0,
            end: 0,
        }
    }

    fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    fn pending(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start >= self.end {
            self.clear();
        }
    }

    /// Reads more bytes after the window, making room first. Returns bytes read.
    async fn fill(&mut self, stream: &mut TcpStream, any: bool) -> Result<usize, ReadError> {
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.data.len() < MAX_HEAD {
                let len = self.data.len() * 2;
                self.data.resize(len, 0);
            } else {
                return Err(ReadError::Protocol);
            }
        }
        match stream.read(&mut self.data[self.end..]).await {
            Ok(0) => Err(ReadError::Closed { any }),
            Ok(n) => {
                self.end += n;
                Ok(n)
            }
            Err(_) => Err(ReadError::Io { any }),
        }
    }
}

enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

/// Reads one full response from `stream`, leaving any extra bytes in `rb`.
pub(crate) async fn read_response(
    stream: &mut TcpStream,
    rb: &mut ReadBuf,
    head_request: bool,
    want_server: bool,
) -> Result<Resp, ReadError> {
    let mut total: u64 = 0;
    let mut resp = Resp::default();
    let framing = loop {
        if rb.start < rb.end {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(rb.pending()) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = parsed.code.unwrap_or(0);
                    let http10 = parsed.version == Some(0);
                    let mut length = None;
                    let mut chunked = false;
                    let mut close = http10;
                    for h in parsed.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            length = Some(parse_u64(h.value).ok_or(ReadError::Protocol)?);
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = contains_token(h.value, b"chunked");
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            if contains_token(h.value, b"close") {
                                close = true;
                            } else if contains_token(h.value, b"keep-alive") {
                                close = false;
                            }
                        } else if want_server && h.name.eq_ignore_ascii_case("server") {
                            resp.server = Some(String::from_utf8_lossy(h.value).into_owned());
                        }
                    }
                    rb.consume(n);
                    total += n as u64;
                    if (100..200).contains(&status) && status != 101 {
                        continue; // 100 Continue and friends: the real response follows
                    }
                    resp.status = status;
                    resp.keep_alive = !close;
                    let no_body = head_request || status == 204 || status == 304 || status < 200;
                    break if no_body {
                        Framing::None
                    } else if chunked {
                        Framing::Chunked
                    } else if let Some(len) = length {
                        Framing::Length(len)
                    } else {
                        Framing::UntilClose
                    };
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => return Err(ReadError::Protocol),
            }
        }
        rb.fill(stream, total > 0 || rb.start < rb.end).await?;
    };
    let body = match framing {
        Framing::None => 0,
        Framing::Length(len) => {
            let mut remaining = len;
            loop {
                let take = remaining.min((rb.end - rb.start) as u64);
                rb.consume(take as usize);
                remaining -= take;
                if remaining == 0 {
                    break;
                }
                rb.fill(stream, true).await?;
            }
            len
        }
        Framing::Chunked => {
            let mut dec = Chunked::default();
            let mut body = 0u64;
            loop {
                let (used, done) = dec.feed(rb.pending()).map_err(|()| ReadError::Protocol)?;
                rb.consume(used);
                body += used as u64;
                if done {
                    break;
                }
                rb.fill(stream, true).await?;
            }
            body
        }
        Framing::UntilClose => {
            resp.keep_alive = false;
            let mut body = (rb.end - rb.start) as u64;
            rb.clear();
            loop {
                match rb.fill(stream, true).await {
                    Ok(n) => {
                        body += n as u64;
                        rb.clear();
                    }
                    Err(ReadError::Closed { .. }) => break,
                    Err(e) => return Err(e),
                }
            }
            body
        }
    };
    resp.body_len = body;
    resp.bytes = total + body;
    Ok(resp)
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    let v = std::str::from_utf8(v).ok()?.trim();
    v.parse().ok()
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[derive(Default, Clone, Copy)]
enum ChunkState {
    #[default]
    Size,
    Ext,
    Data(u64),
    DataEnd,
    Trailer {
        empty: bool,
    },
}

/// Skips a chunked body incrementally, byte counts only.
#[derive(Default)]
pub(crate) struct Chunked {
    state: ChunkState,
    size: u64,
    digits: u32,
}

impl Chunked {
    /// Consumes what it can of `buf`; returns (bytes used, body finished).
    pub(crate) fn feed(&mut self, buf: &[u8]) -> Result<(usize, bool), ()> {
        let mut i = 0;
        while i < buf.len() {
            match self.state {
                ChunkState::Size => {
                    let b = buf[i];
                    i += 1;
                    match b {
                        b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                            let v = (b as char).to_digit(16).ok_or(())? as u64;
                            self.size = self.size.checked_mul(16).ok_or(())? + v;
                            self.digits += 1;
                        }
                        b';' | b' ' | b'\t' => self.state = ChunkState::Ext,
                        b'\r' => {}
                        b'\n' => self.end_size_line()?,
                        _ => return Err(()),
                    }
                }
                ChunkState::Ext => {
                    if buf[i] == b'\n' {
                        self.end_size_line()?;
                    }
                    i += 1;
                }
                ChunkState::Data(rem) => {
                    let take = rem.min((buf.len() - i) as u64);
                    i += take as usize;
                    self.state = if take == rem {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(rem - take)
                    };
                }
                ChunkState::DataEnd => {
                    match buf[i] {
                        b'\r' => {}
                        b'\n' => self.state = ChunkState::Size,
                        _ => return Err(()),
                    }
                    i += 1;
                }
                ChunkState::Trailer { empty } => {
                    let b = buf[i];
                    i += 1;
                    if b == b'\n' {
                        if empty {
                            return Ok((i, true));
                        }
                        self.state = ChunkState::Trailer { empty: true };
                    } else if b != b'\r' {
                        self.state = ChunkState::Trailer { empty: false };
                    }
                }
            }
        }
        Ok((i, false))
    }

    fn end_size_line(&mut self) -> Result<(), ()> {
        if self.digits == 0 {
            return Err(());
        }
        self.state = if self.size == 0 {
            ChunkState::Trailer { empty: true }
        } else {
            ChunkState::Data(self.size)
        };
        self.size = 0;
        self.digits = 0;
        Ok(())
    }
}

/// Opens a TCP connection, with Nagle off so small requests leave at once.
pub(crate) async fn connect(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, Failure> {
    match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(_)) | Err(_) => Err(Failure::Connect),
    }
}

/// One HTTP/1.1 connection slot, reconnected as needed.
pub(crate) struct H1 {
    stream: Option<TcpStream>,
    addr: usize,
    served: u64,
    rb: ReadBuf,
}

impl H1 {
    pub(crate) fn new() -> Self {
        H1 {
            stream: None,
            addr: usize::MAX,
            served: 0,
            rb: ReadBuf::new(),
        }
    }

    /// Drops the connection (after a timeout the stream state is unknown).
    pub(crate) fn reset(&mut self) {
        self.stream = None;
    }

    pub(crate) async fn request(
        &mut self,
        plan: &Plan,
        target: &Target,
        want_server: bool,
    ) -> Result<Resp, Failure> {
        let mut retried = false;
        loop {
            if self.addr != target.addr {
                self.stream = None;
            }
            let stream = match self.stream.as_mut() {
                Some(s) => s,
                None => {
                    let s = connect(plan.addrs[target.addr], plan.opts.connect_timeout).await?;
                    self.addr = target.addr;
                    self.served = 0;
                    self.rb.clear();
                    self.stream.insert(s)
                }
            };
            let reused = self.served > 0;
            if stream.write_all(&target.h1).await.is_err() {
                self.stream = None;
                if reused && !retried {
                    retried = true;
                    continue;
                }
                return Err(Failure::Other);
            }
            match read_response(stream, &mut self.rb, target.head, want_server).await {
                Ok(resp) => {
                    self.served += 1;
                    if !resp.keep_alive || !plan.opts.keepalive {
                        self.stream = None;
                    }
                    return Ok(resp);
                }
                Err(e) => {
                    self.stream = None;
                    if reused && !retried && e.stale() {
                        retried = true;
                        continue;
                    }
                    return Err(Failure::Other);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_in_pieces() {
        let body =
            b"4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for split in 1..body.len() {
            let mut dec = Chunked::default();
            let (a, done) = dec.feed(&body[..split]).unwrap();
            if done {
                assert_eq!(a, body.len() - 4);
                continue;
            }
            assert_eq!(a, split);
            let (b, done) = dec.feed(&body[split..]).unwrap();
            assert!(done, "split {split}");
            assert_eq!(a + b, body.len() - 4);
        }
        assert!(Chunked::default().feed(b"zz\r\n").is_err());
    }

    #[test]
    fn tokens() {
        assert!(contains_token(b"gzip, chunked", b"chunked"));
        assert!(contains_token(b"Close", b"close"));
        assert!(!contains_token(b"keep-alive", b"close"));
    }
}
