//! Streaming compression and decompression of response bodies.
//!
//! Built on async-compression's `bufread` coders rather than on the sync encoders: they
//! already do the two things a proxy needs and that are easy to get subtly wrong by hand.
//! Their encoder flushes (gzip sync flush, brotli and zstd flush operations) whenever the
//! reader under it is pending after it consumed input, so a page that PHP streams reaches
//! the client progressively; and their decoders write into a buffer we size, so one poll
//! never produces more than [`OUT_CAP`] bytes however well the input compresses
//! (a decompression bomb cannot take memory, only CPU, and only as fast as the client
//! reads). The glue is a small [`AsyncBufRead`] over the body's data frames: no task, no
//! channel, no copy of the input.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use async_compression::tokio::bufread::{
    BrotliDecoder, BrotliEncoder, GzipDecoder, GzipEncoder, ZstdDecoder, ZstdEncoder,
};
use async_compression::Level as CoderLevel;
use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::io::{AsyncBufRead, AsyncRead, ReadBuf};

use crate::codec::{params, STREAM_WINDOW_LOG, ZSTD_WINDOW_LOG_MAX};
use crate::{BoxError, Coding, Level};

/// The most one poll of a coded body produces. Frames of 16 KiB keep per-stream memory
/// small while amortising the per-frame cost of hyper and the socket.
pub(crate) const OUT_CAP: usize = 16 * 1024;

pin_project! {
    /// The data frames of a body as an `AsyncBufRead`: each frame is lent to the coder
    /// as it is, without copying. Trailers are dropped: a coded body ends with the
    /// coding's own trailer, and levee never relies on HTTP trailers.
    struct BodyReader<B> {
        #[pin]
        body: B,
        chunk: Bytes,
        done: bool,
    }
}

impl<B> BodyReader<B> {
    fn new(body: B) -> Self {
        BodyReader {
            body,
            chunk: Bytes::new(),
            done: false,
        }
    }
}

/// An error of the inner body, carried through the coder inside an `io::Error` and
/// unwrapped on the way out, so that callers see the error their body produced (a
/// backend read timeout, say) and not a codec error.
#[derive(Debug)]
struct InnerError(BoxError);

impl std::fmt::Display for InnerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for InnerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The boxed error a coded body yields: the inner body's own error if that is what
/// stopped the coder, otherwise the codec's `io::Error` (corrupt or truncated input).
fn unwrap_inner(e: io::Error) -> BoxError {
    if e.get_ref().is_some_and(|i| i.is::<InnerError>()) {
        if let Some(inner) = e.into_inner() {
            return match inner.downcast::<InnerError>() {
                Ok(i) => i.0,
                Err(other) => other,
            };
        }
        // Unreachable: get_ref() was Some. Fall through with a generic error.
        return Box::new(io::Error::other("inner body error"));
    }
    Box::new(e)
}

impl<B> AsyncBufRead for BodyReader<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let mut this = self.project();
        while this.chunk.is_empty() {
            if *this.done {
                return Poll::Ready(Ok(&[]));
            }
            match ready!(this.body.as_mut().poll_frame(cx)) {
                None => *this.done = true,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        *this.chunk = data;
                    }
                }
                Some(Err(e)) => {
                    *this.done = true;
                    return Poll::Ready(Err(io::Error::other(InnerError(e.into()))));
                }
            }
        }
        let chunk: &mut Bytes = this.chunk;
        Poll::Ready(Ok(&chunk[..]))
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        let chunk = self.project().chunk;
        // Clamped: `Bytes::advance` panics past the end, and a coder bug must not.
        let n = amt.min(chunk.len());
        chunk.advance(n);
    }
}

impl<B> AsyncRead for BodyReader<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    /// Required by `AsyncBufRead`'s supertrait; the coders only use `poll_fill_buf`.
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let available = ready!(self.as_mut().poll_fill_buf(cx))?;
        let n = available.len().min(buf.remaining());
        buf.put_slice(&available[..n]);
        self.consume(n);
        Poll::Ready(Ok(()))
    }
}

/// Reads the next frame of at most about [`OUT_CAP`] bytes out of a coder.
fn poll_coded<R: AsyncRead>(
    coder: Pin<&mut R>,
    buf: &mut BytesMut,
    done: &mut bool,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
    if *done {
        return Poll::Ready(None);
    }
    // After `split`, `buf` keeps the rest of its allocation: small flushed frames share
    // one allocation instead of each taking OUT_CAP.
    buf.reserve(OUT_CAP);
    match ready!(tokio_util::io::poll_read_buf(coder, cx, buf)) {
        Ok(0) => {
            *done = true;
            *buf = BytesMut::new();
            Poll::Ready(None)
        }
        Ok(_) => Poll::Ready(Some(Ok(Frame::data(buf.split().freeze())))),
        Err(e) => {
            *done = true;
            *buf = BytesMut::new();
            Poll::Ready(Some(Err(unwrap_inner(e))))
        }
    }
}

fn map_identity<E: Into<BoxError>>(
    p: Poll<Option<Result<Frame<Bytes>, E>>>,
) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
    p.map(|o| o.map(|r| r.map_err(Into::into)))
}

pin_project! {
    #[project = EncoderProj]
    enum Encoder<B> {
        Identity { #[pin] body: B },
        Gzip { #[pin] coder: GzipEncoder<BodyReader<B>> },
        Br { #[pin] coder: BrotliEncoder<BodyReader<B>> },
        Zstd { #[pin] coder: ZstdEncoder<BodyReader<B>> },
    }
}

pin_project! {
    /// A body compressed on the fly: wraps a response body and yields it in the given
    /// coding, flushing whenever the inner body has nothing ready (so a page streamed by
    /// the backend reaches the client progressively, at some cost in ratio), in frames of
    /// at most 16 KiB. [`Coding::Identity`] passes the body through unchanged, trailers
    /// included.
    ///
    /// The caller sets `Content-Encoding`, removes `Content-Length` (and any strong
    /// `ETag`, RFC 9110 §8.8.3, or weakens it) and adds `Vary: Accept-Encoding`; it must
    /// not wrap bodies that have no content (HEAD, 204, 304), which would gain a
    /// coding header and trailer.
    ///
    /// Memory per open stream, mostly the coder's tables and window (measured after an
    /// 81 KiB page): 0.33 MiB for gzip, 1.6 MiB for brotli, 1.0 MiB for zstd; windows
    /// grow with the content up to 1 MiB (`STREAM_WINDOW_LOG`). Mind it when sizing
    /// connection limits: 1000 brotli streams at once hold about 1.6 GiB.
    pub struct CompressBody<B> {
        #[pin]
        coder: Encoder<B>,
        buf: BytesMut,
        done: bool,
    }
}

impl<B> CompressBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    pub fn new(inner: B, c: Coding, level: Level) -> Self {
        let p = params(level);
        let coder = match c {
            Coding::Identity => Encoder::Identity { body: inner },
            Coding::Gzip => Encoder::Gzip {
                coder: GzipEncoder::with_quality(
                    BodyReader::new(inner),
                    CoderLevel::Precise(p.gzip),
                ),
            },
            Coding::Br => Encoder::Br {
                coder: BrotliEncoder::with_params(
                    BodyReader::new(inner),
                    async_compression::brotli::EncoderParams::default()
                        .quality(CoderLevel::Precise(p.br))
                        .window_size(STREAM_WINDOW_LOG as i32),
                ),
            },
            Coding::Zstd => Encoder::Zstd {
                coder: ZstdEncoder::with_quality_and_params(
                    BodyReader::new(inner),
                    CoderLevel::Precise(p.zstd),
                    &[async_compression::zstd::CParameter::window_log(
                        STREAM_WINDOW_LOG,
                    )],
                ),
            },
        };
        CompressBody {
            coder,
            buf: BytesMut::new(),
            done: false,
        }
    }
}

impl<B> Body for CompressBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        match this.coder.project() {
            EncoderProj::Identity { body } => map_identity(body.poll_frame(cx)),
            EncoderProj::Gzip { coder } => poll_coded(coder, this.buf, this.done, cx),
            EncoderProj::Br { coder } => poll_coded(coder, this.buf, this.done, cx),
            EncoderProj::Zstd { coder } => poll_coded(coder, this.buf, this.done, cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.coder {
            Encoder::Identity { body } => body.is_end_stream(),
            _ => self.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.coder {
            Encoder::Identity { body } => body.size_hint(),
            _ if self.done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

pin_project! {
    #[project = DecoderProj]
    enum Decoder<B> {
        Identity { #[pin] body: B },
        Gzip { #[pin] coder: GzipDecoder<BodyReader<B>> },
        Br { #[pin] coder: BrotliDecoder<BodyReader<B>> },
        Zstd { #[pin] coder: ZstdDecoder<BodyReader<B>> },
    }
}

pin_project! {
    /// A body decompressed on the fly, for a backend response in a coding the client
    /// does not accept. Frames are at most 16 KiB however well the input compresses, so
    /// memory stays bounded; the total is not limited (the caller counts what it keeps).
    ///
    /// Decodes like [`decompress`](crate::decompress): concatenated gzip members and zstd
    /// frames, zstd windows up to 8 MiB (RFC 9659), empty content as empty. Truncated or
    /// corrupt input ends the body with an error, which the client sees as an aborted
    /// response rather than a silently cut page. The caller removes `Content-Encoding`
    /// and `Content-Length`.
    pub struct DecompressBody<B> {
        #[pin]
        coder: Decoder<B>,
        buf: BytesMut,
        started: bool,
        done: bool,
    }
}

impl<B> DecompressBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    pub fn new(inner: B, c: Coding) -> Self {
        let coder = match c {
            Coding::Identity => Decoder::Identity { body: inner },
            Coding::Gzip => {
                let mut coder = GzipDecoder::new(BodyReader::new(inner));
                coder.multiple_members(true);
                Decoder::Gzip { coder }
            }
            Coding::Br => Decoder::Br {
                coder: BrotliDecoder::new(BodyReader::new(inner)),
            },
            Coding::Zstd => {
                let mut coder = ZstdDecoder::with_params(
                    BodyReader::new(inner),
                    &[async_compression::zstd::DParameter::window_log_max(
                        ZSTD_WINDOW_LOG_MAX,
                    )],
                );
                coder.multiple_members(true);
                Decoder::Zstd { coder }
            }
        };
        DecompressBody {
            coder,
            buf: BytesMut::new(),
            started: false,
            done: false,
        }
    }
}

/// Whether the body has any data at all. Asked before the first decode: an inner body
/// without data is empty content, not a truncated stream (backends do label empty
/// bodies `gzip`).
fn poll_nonempty<R: AsyncBufRead>(
    reader: Pin<&mut R>,
    cx: &mut Context<'_>,
) -> Poll<Result<bool, BoxError>> {
    match ready!(reader.poll_fill_buf(cx)) {
        Ok(b) => Poll::Ready(Ok(!b.is_empty())),
        Err(e) => Poll::Ready(Err(unwrap_inner(e))),
    }
}

/// The decoders are distinct types whose `get_pin_mut` is inherent, hence a macro.
macro_rules! poll_decoder {
    ($coder:expr, $this:expr, $cx:expr) => {{
        let mut coder = $coder;
        if !*$this.started && !*$this.done {
            match ready!(poll_nonempty(coder.as_mut().get_pin_mut(), $cx)) {
                Ok(true) => *$this.started = true,
                Ok(false) => {
                    *$this.done = true;
                    return Poll::Ready(None);
                }
                Err(e) => {
                    *$this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
        poll_coded(coder, $this.buf, $this.done, $cx)
    }};
}

impl<B> Body for DecompressBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        match this.coder.project() {
            DecoderProj::Identity { body } => map_identity(body.poll_frame(cx)),
            DecoderProj::Gzip { coder } => poll_decoder!(coder, this, cx),
            DecoderProj::Br { coder } => poll_decoder!(coder, this, cx),
            DecoderProj::Zstd { coder } => poll_decoder!(coder, this, cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.coder {
            Decoder::Identity { body } => body.is_end_stream(),
            _ => self.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.coder {
            Decoder::Identity { body } => body.size_hint(),
            _ if self.done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
