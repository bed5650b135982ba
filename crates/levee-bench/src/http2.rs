//! HTTP/2 with prior knowledge (h2c) through hyper's connection-level client.
//! Multiplexing and flow control are too much to hand-roll; HTTP/2 runs are about
//! protocol behaviour more than raw client speed.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::http1::{connect, Resp};
use crate::stats::Failure;
use crate::target::{Plan, Target};

/// One HTTP/2 connection slot (one stream at a time), reconnected as needed.
pub(crate) struct H2 {
    sender: Option<SendRequest<Full<Bytes>>>,
    addr: usize,
}

impl H2 {
    pub(crate) fn new() -> Self {
        H2 {
            sender: None,
            addr: usize::MAX,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.sender = None;
    }

    pub(crate) async fn request(
        &mut self,
        plan: &Plan,
        target: &Target,
        want_server: bool,
    ) -> Result<Resp, Failure> {
        if self.addr != target.addr || self.sender.as_ref().is_some_and(|s| s.is_closed()) {
            self.sender = None;
        }
        let sender = match self.sender.as_mut() {
            Some(s) => s,
            None => {
                let stream = connect(plan.addrs[target.addr], plan.opts.connect_timeout).await?;
                let (sender, conn) = hyper::client::conn::http2::handshake(
                    TokioExecutor::new(),
                    TokioIo::new(stream),
                )
                .await
                .map_err(|_| Failure::Connect)?;
                tokio::task::spawn_local(async move {
                    let _ = conn.await;
                });
                self.addr = target.addr;
                self.sender.insert(sender)
            }
        };
        let result = exchange(sender, target, want_server).await;
        if result.is_err() || !plan.opts.keepalive {
            self.sender = None;
        }
        result
    }
}

async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    target: &Target,
    want_server: bool,
) -> Result<Resp, Failure> {
    sender.ready().await.map_err(|_| Failure::Other)?;
    let mut req = http::Request::new(Full::new(target.body.clone()));
    *req.method_mut() = target.method.clone();
    *req.uri_mut() = target.uri.clone();
    *req.headers_mut() = target.h2_headers.clone();
    let resp = sender.send_request(req).await.map_err(|_| Failure::Other)?;
    let status = resp.status().as_u16();
    let server = want_server.then(|| server_of(resp.headers())).flatten();
    let mut body = resp.into_body();
    let mut len = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Failure::Other)?;
        if let Some(data) = frame.data_ref() {
            len += data.len() as u64;
        }
    }
    Ok(Resp {
        status,
        bytes: len,
        body_len: len,
        server,
        keep_alive: true,
    })
}

/// The `Server` field of a response, for the report (HTTP/2 and HTTP/3).
pub(crate) fn server_of(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(http::header::SERVER)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}
