//! A request body as it arrives on an HTTP/3 stream, as an `http_body::Body`.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame};

type Recv = h3::server::RequestStream<h3_quinn::RecvStream, Bytes>;

/// The receiving half of a request's stream. Empty for a request the client ended with
/// its headers (a GET).
pub struct RecvBody {
    stream: Option<Recv>,
}

/// The client broke off its request body, or sent one HTTP/3 does not allow.
#[derive(Debug)]
pub struct RecvError(h3::error::StreamError);

impl std::fmt::Display for RecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the HTTP/3 request body broke off: {}", self.0)
    }
}

impl std::error::Error for RecvError {}

impl RecvBody {
    pub(crate) fn new(stream: Recv) -> RecvBody {
        RecvBody {
            stream: Some(stream),
        }
    }
}

impl Body for RecvBody {
    type Data = Bytes;
    type Error = RecvError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RecvError>>> {
        let this = self.get_mut();
        let Some(stream) = this.stream.as_mut() else {
            return Poll::Ready(None);
        };
        match stream.poll_recv_data(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(mut buf))) => {
                let data = buf.copy_to_bytes(buf.remaining());
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            // Trailers of a request are not passed on (no backend levee speaks to asks
            // for them): the body ends with its data.
            Poll::Ready(Ok(None)) => {
                this.stream = None;
                Poll::Ready(None)
            }
            Poll::Ready(Err(e)) => {
                this.stream = None;
                Poll::Ready(Some(Err(RecvError(e))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.stream.is_none()
    }
}
