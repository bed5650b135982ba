//! The socket to php-fpm: TCP or Unix, whole (idle in the pool) or split in halves (one
//! half reads the response while a task writes the request body).

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::str::FromStr;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{tcp, unix, TcpStream, UnixStream};

/// Where php-fpm listens: its pool's `listen =`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// `host:port`, e.g. `127.0.0.1:9000`.
    Tcp(String),
    /// A Unix socket, e.g. `/run/php/php8.2-fpm.sock`.
    Unix(PathBuf),
}

impl fmt::Display for Address {
    /// `127.0.0.1:9000` or `unix:/run/php/php8.2-fpm.sock` (nginx's notation).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp(a) => f.write_str(a),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl FromStr for Address {
    type Err = String;

    /// `unix:/path`, `/path` (a Unix socket), `tcp://host:port` or `host:port`.
    fn from_str(s: &str) -> Result<Address, String> {
        let s = s.trim();
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(
                    "`unix:` needs a socket path, e.g. unix:/run/php/php8.2-fpm.sock".into(),
                );
            }
            return Ok(Address::Unix(PathBuf::from(path)));
        }
        if s.starts_with('/') {
            return Ok(Address::Unix(PathBuf::from(s)));
        }
        let hostport = s.strip_prefix("tcp://").unwrap_or(s);
        match hostport.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(Address::Tcp(hostport.to_string()))
            }
            _ => Err(format!(
                "`{s}` is not a php-fpm address: use host:port (127.0.0.1:9000) or a Unix \
                 socket path (unix:/run/php/php8.2-fpm.sock)"
            )),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(crate) async fn connect(addr: &Address) -> io::Result<Stream> {
        match addr {
            Address::Tcp(a) => {
                let s = TcpStream::connect(a.as_str()).await?;
                // Records are written as they come; Nagle would hold small ones back.
                s.set_nodelay(true)?;
                Ok(Stream::Tcp(s))
            }
            Address::Unix(p) => Ok(Stream::Unix(UnixStream::connect(p).await?)),
        }
    }

    /// Whether an idle connection still looks usable: php-fpm has not closed it (a worker
    /// that reached pm.max_requests or was reaped exits and closes it) and has sent nothing
    /// unasked. Costs one non-blocking read.
    pub(crate) fn is_reusable(&self) -> bool {
        let mut byte = [0u8; 1];
        let r = match self {
            Stream::Tcp(s) => s.try_read(&mut byte),
            Stream::Unix(s) => s.try_read(&mut byte),
        };
        matches!(r, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// The same socket, registered with the current runtime instead of the one that
    /// opened it.
    pub(crate) fn rehome(self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(TcpStream::from_std(s.into_std()?)?),
            Stream::Unix(s) => Stream::Unix(UnixStream::from_std(s.into_std()?)?),
        })
    }

    pub(crate) fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            Stream::Unix(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Unix(r), WriteHalf::Unix(w))
            }
        }
    }

    /// The whole stream again, `None` if the halves do not belong together (then both are
    /// dropped, which closes their sockets).
    pub(crate) fn reunite(r: ReadHalf, w: WriteHalf) -> Option<Stream> {
        match (r, w) {
            (ReadHalf::Tcp(r), WriteHalf::Tcp(w)) => r.reunite(w).ok().map(Stream::Tcp),
            (ReadHalf::Unix(r), WriteHalf::Unix(w)) => r.reunite(w).ok().map(Stream::Unix),
            _ => None,
        }
    }
}

#[derive(Debug)]
pub(crate) enum ReadHalf {
    Tcp(tcp::OwnedReadHalf),
    Unix(unix::OwnedReadHalf),
}

#[derive(Debug)]
pub(crate) enum WriteHalf {
    Tcp(tcp::OwnedWriteHalf),
    Unix(unix::OwnedWriteHalf),
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Unix(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_write(cx, buf),
            WriteHalf::Unix(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_flush(cx),
            WriteHalf::Unix(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            WriteHalf::Unix(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

/// Errors meaning the peer closed or reset the connection.
pub(crate) fn is_closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::NotConnected
            | io::ErrorKind::UnexpectedEof
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn addresses_parse_and_print_like_nginx() {
        let a: Address = "unix:/run/php/php8.2-fpm.sock".parse().unwrap();
        assert_eq!(a, Address::Unix("/run/php/php8.2-fpm.sock".into()));
        assert_eq!(a.to_string(), "unix:/run/php/php8.2-fpm.sock");
        let a: Address = "/run/php/x.sock".parse().unwrap();
        assert_eq!(a, Address::Unix("/run/php/x.sock".into()));
        let a: Address = "127.0.0.1:9000".parse().unwrap();
        assert_eq!(a, Address::Tcp("127.0.0.1:9000".into()));
        assert_eq!(a.to_string(), "127.0.0.1:9000");
        let a: Address = "tcp://php:9000".parse().unwrap();
        assert_eq!(a, Address::Tcp("php:9000".into()));
        let a: Address = "[::1]:9000".parse().unwrap();
        assert_eq!(a, Address::Tcp("[::1]:9000".into()));
        for bad in ["", "unix:", "php", "php:port", ":9000", "php:99999"] {
            assert!(bad.parse::<Address>().is_err(), "{bad}");
        }
    }
}
