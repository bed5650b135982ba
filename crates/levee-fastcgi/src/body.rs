//! One request in flight: a task writes the request body while the response is read
//! record by record, and the response body that streams FCGI_STDOUT.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};

use crate::conn::{is_closed, ReadHalf, Stream, WriteHalf};
use crate::error::{BoxError, Error};
use crate::record::{self, EndRequest, ProtocolStatus, Record};
use crate::shared::{Inner, Req, WaitingGuard};

/// Longest stderr line kept whole for the log; longer ones are logged in pieces.
const MAX_STDERR_LINE: usize = 8 * 1024;

pub(crate) enum Event {
    Stdout(Bytes),
    End(EndRequest),
}

/// The sending side of a request.
pub(crate) enum Writer {
    /// Everything was sent, FCGI_STDIN's end included: the connection may be reused.
    Done(WriteHalf),
    /// A task streams the body.
    Running(WriterTask),
    /// The send failed or was incomplete: the connection must be closed.
    Unclean,
}

/// The body-writing task, aborted (closing its half of the connection) when dropped.
pub(crate) struct WriterTask(JoinHandle<Result<(WriteHalf, u64), WriteError>>);

impl Drop for WriterTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) enum WriteError {
    Body(BoxError),
    Io(io::Error),
    Timeout,
}

impl Writer {
    pub(crate) fn spawn<B>(wr: WriteHalf, body: B, write_timeout: Duration) -> Writer
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Writer::Running(WriterTask(tokio::spawn(send_body(wr, body, write_timeout))))
    }
}

/// Streams `body` as FCGI_STDIN records, then the empty record that ends the stream.
/// Returns the write half and how many body bytes were sent.
async fn send_body<B>(
    mut wr: WriteHalf,
    body: B,
    write_timeout: Duration,
) -> Result<(WriteHalf, u64), WriteError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = pin!(body);
    let mut sent = 0u64;
    let mut out = BytesMut::new();
    loop {
        let data = match body.frame().await {
            None => break,
            Some(Err(e)) => return Err(WriteError::Body(e.into())),
            // Trailers have no place in CGI.
            Some(Ok(frame)) => match frame.into_data() {
                Ok(d) => d,
                Err(_) => continue,
            },
        };
        if data.is_empty() {
            continue;
        }
        sent += data.len() as u64;
        out.clear();
        record::put_stream(&mut out, record::STDIN, &data);
        write(&mut wr, &out, write_timeout).await?;
    }
    out.clear();
    record::put_record(&mut out, record::STDIN, &[]);
    write(&mut wr, &out, write_timeout).await?;
    Ok((wr, sent))
}

async fn write(wr: &mut WriteHalf, data: &[u8], after: Duration) -> Result<(), WriteError> {
    match tokio::time::timeout(after, wr.write_all(data)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(WriteError::Io(e)),
        Err(_) => Err(WriteError::Timeout),
    }
}

/// The reading side of a request, and what it needs to decide whether the connection goes
/// back to the pool.
pub(crate) struct Exchange {
    inner: Arc<Inner>,
    reader: ReadHalf,
    buf: BytesMut,
    received: u64,
    writer: Writer,
    declared_len: u64,
    script: Arc<str>,
    /// The read timeout, armed while waiting for php-fpm once the request is sent.
    sleep: Pin<Box<Sleep>>,
    /// How long php-fpm may stay silent: `read_timeout`, unless the caller allows a
    /// response more ([`ResponseBody::allow_pauses`]).
    pause: Duration,
    armed: bool,
    waiting: Option<WaitingGuard>,
    stderr: Vec<u8>,
}

impl Exchange {
    pub(crate) fn new(
        inner: Arc<Inner>,
        reader: ReadHalf,
        writer: Writer,
        req: &Req,
        waiting: Option<WaitingGuard>,
    ) -> Exchange {
        Exchange {
            sleep: Box::pin(tokio::time::sleep(inner.config.read_timeout)),
            pause: inner.config.read_timeout,
            inner,
            reader,
            buf: BytesMut::with_capacity(16 * 1024),
            received: 0,
            writer,
            declared_len: req.declared_len,
            script: req.script.clone(),
            armed: false,
            waiting,
            stderr: Vec::new(),
        }
    }

    /// Bytes received from php-fpm so far.
    pub(crate) fn received(&self) -> u64 {
        self.received
    }

    /// The next STDOUT data or the end of the request. STDERR is logged on the way.
    pub(crate) fn poll_event(
        &mut self,
        cx: &mut Context<'_>,
        during: &'static str,
    ) -> Poll<Result<Event, Error>> {
        loop {
            if let Err(e) = self.poll_writer(cx) {
                return Poll::Ready(Err(e));
            }
            match record::decode(&mut self.buf) {
                Err(m) => return Poll::Ready(Err(self.inner.protocol(m))),
                Ok(Some(rec)) => match self.on_record(rec) {
                    Ok(Some(event)) => return Poll::Ready(Ok(event)),
                    Ok(None) => continue,
                    Err(e) => return Poll::Ready(Err(e)),
                },
                Ok(None) => {}
            }
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(16 * 1024);
            }
            match tokio_util::io::poll_read_buf(Pin::new(&mut self.reader), cx, &mut self.buf) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(Error::Closed {
                        addr: self.inner.name.clone(),
                        during,
                    }))
                }
                Poll::Ready(Ok(n)) => {
                    self.received += n as u64;
                    self.armed = false;
                    self.waiting = None;
                }
                // A reset means the same as an end of file here: php's side is gone (a
                // socket closed with unread input, our empty STDIN, resets).
                Poll::Ready(Err(e)) if is_closed(&e) => {
                    return Poll::Ready(Err(Error::Closed {
                        addr: self.inner.name.clone(),
                        during,
                    }))
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(self.inner.io_error(during, e))),
                Poll::Pending => {
                    // While the body is still being sent, php may be busy reading it (or
                    // waiting for levee's client to send more): its silence is not a stall.
                    // The writer's own timeout covers a php that reads nothing.
                    if matches!(self.writer, Writer::Running(_)) {
                        return Poll::Pending;
                    }
                    let after = self.pause;
                    if !self.armed {
                        self.sleep.as_mut().reset(Instant::now() + after);
                        self.armed = true;
                    }
                    ready!(self.sleep.as_mut().poll(cx));
                    return Poll::Ready(Err(self.inner.timeout(during, after)));
                }
            }
        }
    }

    /// Collects the writer's result once it is done.
    fn poll_writer(&mut self, cx: &mut Context<'_>) -> Result<(), Error> {
        let Writer::Running(task) = &mut self.writer else {
            return Ok(());
        };
        let Poll::Ready(res) = Pin::new(&mut task.0).poll(cx) else {
            return Ok(());
        };
        self.writer = Writer::Unclean;
        let php = &self.inner.name;
        match res {
            Ok(Ok((wr, sent))) if sent == self.declared_len => self.writer = Writer::Done(wr),
            Ok(Ok((_, sent))) => {
                // php reads CONTENT_LENGTH bytes; the rest would be taken for the next
                // request on this connection, or php is still waiting for what is missing.
                tracing::debug!(php = %php, sent, declared = self.declared_len,
                    "request body length differs from CONTENT_LENGTH; the connection will not be reused");
            }
            Ok(Err(WriteError::Body(source))) => return Err(Error::Body { source }),
            // php may have answered without reading the whole body: keep reading.
            Ok(Err(WriteError::Io(e))) => {
                tracing::debug!(php = %php, error = %e, "sending the request body failed");
            }
            // php has not read for write_timeout: from now on the read timeout decides
            // whether it is answering or stuck.
            Ok(Err(WriteError::Timeout)) => {
                tracing::debug!(php = %php, "php-fpm stopped reading the request body");
            }
            Err(e) => tracing::debug!(php = %php, error = %e, "request body task ended"),
        }
        Ok(())
    }

    fn on_record(&mut self, rec: Record) -> Result<Option<Event>, Error> {
        if rec.request_id != record::REQUEST_ID {
            if rec.request_id == 0 {
                // A management record (e.g. FCGI_UNKNOWN_TYPE): nothing to do with it.
                return Ok(None);
            }
            return Err(self.inner.protocol(format!(
                "a record for request {} arrived on a connection carrying request 1",
                rec.request_id
            )));
        }
        match rec.rtype {
            record::STDOUT if rec.content.is_empty() => Ok(None),
            record::STDOUT => Ok(Some(Event::Stdout(rec.content))),
            record::STDERR => {
                self.log_stderr(&rec.content);
                Ok(None)
            }
            record::END_REQUEST => {
                self.flush_stderr();
                let end = EndRequest::parse(&rec.content).map_err(|m| self.inner.protocol(m))?;
                Ok(Some(Event::End(end)))
            }
            other => {
                tracing::debug!(php = %self.inner.name, rtype = other, "ignoring a record of unexpected type");
                Ok(None)
            }
        }
    }

    /// Logs what the script wrote to stderr (warnings, fatal errors), one event per line.
    fn log_stderr(&mut self, content: &[u8]) {
        self.stderr.extend_from_slice(content);
        while let Some(nl) = self.stderr.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.stderr.drain(..=nl).collect();
            self.emit_stderr(&line);
        }
        if self.stderr.len() > MAX_STDERR_LINE {
            self.flush_stderr();
        }
    }

    fn flush_stderr(&mut self) {
        let rest = std::mem::take(&mut self.stderr);
        self.emit_stderr(&rest);
    }

    fn emit_stderr(&self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches(['\r', '\n']);
        if !line.trim().is_empty() {
            tracing::warn!(target: "levee::php", php = %self.inner.name, script = %self.script, "{line}");
        }
    }

    /// After END_REQUEST (FCGI_REQUEST_COMPLETE): back to the pool if the whole request was
    /// sent and nothing follows the response; otherwise closed.
    pub(crate) fn release(self) {
        let Exchange {
            inner,
            reader,
            buf,
            writer,
            ..
        } = self;
        if let Writer::Done(wr) = writer {
            if buf.is_empty() {
                if let Some(stream) = Stream::reunite(reader, wr) {
                    inner.checkin(stream);
                }
            }
        }
    }

    /// What the end of the request means for its body: a clean end, or a refusal.
    fn finish(self, end: EndRequest) -> Result<(), Error> {
        match end.protocol_status {
            ProtocolStatus::RequestComplete => {
                self.release();
                Ok(())
            }
            other => Err(self.inner.protocol(format!(
                "the request ended with {} in the middle of the response",
                other.name()
            ))),
        }
    }
}

/// The body of a php response: FCGI_STDOUT after the head, as it arrives.
///
/// Read to its end (END_REQUEST), it returns its connection to the pool; dropped before,
/// it closes the connection. A worker that dies mid-response, or a pause longer than
/// `read_timeout`, is an error frame, never a hang or a silently short body.
pub struct ResponseBody {
    leftover: Option<Bytes>,
    state: State,
}

enum State {
    Streaming(Box<Exchange>),
    Done,
}

impl ResponseBody {
    pub(crate) fn new(ex: Exchange, leftover: Bytes) -> ResponseBody {
        ResponseBody {
            leftover: (!leftover.is_empty()).then_some(leftover),
            state: State::Streaming(Box::new(ex)),
        }
    }

    /// Lets this response's body pause up to `pause` between two reads, in place of
    /// `read_timeout`: a live stream (server-sent events) is silent between events by
    /// design, not stuck.
    pub fn allow_pauses(&mut self, pause: Duration) {
        if let State::Streaming(ex) = &mut self.state {
            ex.pause = pause;
            ex.armed = false;
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        if let Some(data) = this.leftover.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        let State::Streaming(ex) = &mut this.state else {
            return Poll::Ready(None);
        };
        let event = ready!(ex.poll_event(cx, "reading the response body"));
        match event {
            Ok(Event::Stdout(data)) => Poll::Ready(Some(Ok(Frame::data(data)))),
            Ok(Event::End(end)) => match std::mem::replace(&mut this.state, State::Done) {
                State::Streaming(ex) => Poll::Ready(ex.finish(end).err().map(Err)),
                State::Done => Poll::Ready(None),
            },
            Err(e) => {
                // Dropping the exchange closes the connection.
                this.state = State::Done;
                Poll::Ready(Some(Err(e)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.leftover.is_none() && matches!(self.state, State::Done)
    }
}

impl fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseBody")
            .field("done", &matches!(self.state, State::Done))
            .finish()
    }
}
