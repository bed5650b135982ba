//! The QUIC endpoint of one HTTPS listener and the HTTP/3 connections on it: each
//! request handed to the caller's service, its response written back frame by frame.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::body::RecvBody;
use crate::limits::{Limits, NetworkSlot, PerNetwork};

/// The HTTP/3 endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the TLS configuration cannot serve QUIC (it needs TLS 1.3 with AES-128-GCM)")]
    Tls,
    #[error("cannot use the UDP socket: {0}")]
    Socket(#[source] std::io::Error),
}

/// Who sent a request: the client's address, validated by the handshake (a QUIC
/// handshake completes only at an address that receives levee's packets), and the local
/// address it came to.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub remote: SocketAddr,
    pub local: SocketAddr,
}

/// A bound QUIC endpoint, serving once [`Endpoint::serve`] runs.
pub struct Endpoint {
    endpoint: quinn::Endpoint,
    local: SocketAddr,
    limits: Limits,
    stats: Arc<Stats>,
}

/// What an endpoint did, for levee's metrics.
#[derive(Debug, Default)]
pub struct Stats {
    /// QUIC connections open now.
    pub open: AtomicUsize,
    /// Clients sent a Retry (address validation under a flood of handshakes).
    pub retries: std::sync::atomic::AtomicU64,
    /// Connections refused: their client network was at its bound.
    pub refused_network: std::sync::atomic::AtomicU64,
    /// Connections refused: levee's `max_connections` were all taken.
    pub refused_full: std::sync::atomic::AtomicU64,
}

/// A QUIC endpoint on `socket` (the UDP port of an HTTPS listener), with `tls` (the
/// HTTPS listeners' certificates, chosen by SNI, swapped in place on a reload) offering
/// ALPN `h3` and no early data. Runs on the current tokio runtime.
pub fn bind(
    socket: std::net::UdpSocket,
    tls: &rustls::ServerConfig,
    limits: Limits,
) -> Result<Endpoint, Error> {
    let server = server_config(tls, &limits)?;
    let local = socket.local_addr().map_err(Error::Socket)?;
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(Error::Socket)?;
    Ok(Endpoint {
        endpoint,
        local,
        limits,
        stats: Arc::default(),
    })
}

/// QUIC's server configuration: the certificates and ALPN of [`quic_tls`], and the
/// transport's bounds from `limits`. The fuzz harness serves with this too.
pub(crate) fn server_config(
    tls: &rustls::ServerConfig,
    limits: &Limits,
) -> Result<quinn::ServerConfig, Error> {
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(Arc::new(quic_tls(tls)))
        .map_err(|_| Error::Tls)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(limits.streams.into())
        // HTTP/3's own: control, QPACK encoder and decoder; a few to spare.
        .max_concurrent_uni_streams(8u32.into())
        .max_idle_timeout(quinn::IdleTimeout::try_from(limits.idle_timeout).ok());
    server.transport_config(Arc::new(transport));
    // Address validation is asked for per incoming connection, under a flood
    // ([`Admission`]).
    server.migration(true);
    Ok(server)
}

/// Whether a new connection attempt may cost a handshake: the decision of the accept
/// loop, apart from the socket so that the fuzz harness makes it the same way.
pub(crate) struct Admission {
    limits: Limits,
    /// Handshakes under way (accepted, not yet established or failed).
    pub(crate) handshakes: Arc<AtomicUsize>,
    per_network: PerNetwork,
}

/// What to do with a connection attempt.
pub(crate) enum Admit {
    /// Ask the client to prove its address first.
    Retry,
    /// Its network holds its share of connections already.
    NetworkFull,
    /// Go on, holding this place in its network's count.
    Accept(NetworkSlot),
}

impl Admission {
    pub(crate) fn new(limits: Limits) -> Admission {
        Admission {
            limits,
            handshakes: Arc::default(),
            per_network: PerNetwork::default(),
        }
    }

    pub(crate) fn admit(&self, remote: std::net::IpAddr, validated: bool) -> Admit {
        // Under a flood of handshakes, an address must be shown to be the client's (a
        // Retry token echoed) before it costs a handshake.
        if !validated && self.handshakes.load(Ordering::Relaxed) >= self.limits.handshakes {
            return Admit::Retry;
        }
        match self.per_network.take(remote, self.limits.per_network) {
            Some(slot) => Admit::Accept(slot),
            None => Admit::NetworkFull,
        }
    }
}

/// The HTTPS configuration as QUIC's: ALPN h3 only, and no early data (0-RTT): it can be
/// replayed by anyone who saw it, and a request may change state. (rustls also refuses
/// early data whenever stateless tickets are on, as levee-tls's are; this says it here,
/// whatever levee-tls does later.)
fn quic_tls(tls: &rustls::ServerConfig) -> rustls::ServerConfig {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = 0;
    tls
}

impl Endpoint {
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Its counters, read while it serves.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Serves connections until `stop` turns true: then no new connection is taken,
    /// each open one is told to go away (GOAWAY) once its requests in flight are
    /// answered, and this returns when they are closed. Every connection holds a permit
    /// of `conns` (levee's `max_connections`, shared with TCP) while it is open.
    pub async fn serve<S, F, B>(
        self,
        service: S,
        conns: Arc<Semaphore>,
        stop: watch::Receiver<bool>,
    ) where
        S: Fn(Request<RecvBody>, Peer) -> F + Clone + Send + Sync + 'static,
        F: Future<Output = Response<B>> + Send + 'static,
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let admission = Admission::new(self.limits.clone());
        let mut stop_accept = stop.clone();
        loop {
            let incoming = tokio::select! {
                _ = stopped(&mut stop_accept) => break,
                i = self.endpoint.accept() => match i {
                    Some(i) => i,
                    None => break,
                },
            };
            let remote = incoming.remote_address();
            let slot = match admission.admit(remote.ip(), incoming.remote_address_validated()) {
                Admit::Accept(slot) => slot,
                Admit::Retry => {
                    match incoming.retry() {
                        Ok(()) => {
                            self.stats.retries.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => e.into_incoming().ignore(),
                    }
                    continue;
                }
                Admit::NetworkFull => {
                    tracing::debug!(%remote, "HTTP/3: too many connections from this network");
                    self.stats.refused_network.fetch_add(1, Ordering::Relaxed);
                    incoming.refuse();
                    continue;
                }
            };
            let Ok(permit) = conns.clone().try_acquire_owned() else {
                self.stats.refused_full.fetch_add(1, Ordering::Relaxed);
                incoming.refuse();
                continue;
            };
            let connection = Connection {
                _open: Open::new(&self.stats),
                peer: Peer {
                    remote,
                    local: self.local,
                },
                limits: self.limits.clone(),
                _slot: slot,
                _permit: permit,
            };
            let (service, stop, handshakes) =
                (service.clone(), stop.clone(), admission.handshakes.clone());
            // Counted from here, not when the task first runs: a burst of Initials is
            // accepted faster than the tasks start.
            handshakes.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let connecting = incoming.accept();
                let established = match connecting {
                    Ok(c) => tokio::time::timeout(connection.limits.handshake_timeout, c).await,
                    Err(e) => {
                        tracing::debug!(%remote, error = %e, "HTTP/3: connection refused");
                        handshakes.fetch_sub(1, Ordering::Relaxed);
                        return;
                    }
                };
                handshakes.fetch_sub(1, Ordering::Relaxed);
                match established {
                    Ok(Ok(quic)) => connection.run(quic, service, stop).await,
                    Ok(Err(e)) => tracing::debug!(%remote, error = %e, "HTTP/3 handshake failed"),
                    Err(_) => tracing::debug!(%remote, "HTTP/3 handshake timed out"),
                }
            });
        }
        // No new connections; the open ones finish (each watches `stop` itself).
        self.endpoint.set_server_config(None);
        self.endpoint.wait_idle().await;
    }
}

/// Counts a connection open while it lives.
struct Open(Arc<Stats>);

impl Open {
    fn new(stats: &Arc<Stats>) -> Open {
        stats.open.fetch_add(1, Ordering::Relaxed);
        Open(stats.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One QUIC connection and what it holds.
struct Connection {
    _open: Open,
    peer: Peer,
    limits: Limits,
    _slot: NetworkSlot,
    _permit: OwnedSemaphorePermit,
}

impl Connection {
    async fn run<S, F, B>(
        self,
        quic: quinn::Connection,
        service: S,
        mut stop: watch::Receiver<bool>,
    ) where
        S: Fn(Request<RecvBody>, Peer) -> F + Clone + Send + Sync + 'static,
        F: Future<Output = Response<B>> + Send + 'static,
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let peer = self.peer;
        let built = h3::server::builder()
            .max_field_section_size(self.limits.max_header_bytes as u64)
            .build::<_, Bytes>(h3_quinn::Connection::new(quic))
            .await;
        let mut h3 = match built {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(remote = %peer.remote, error = %e, "HTTP/3 connection set-up failed");
                return;
            }
        };
        let mut stopping = false;
        loop {
            let accepted = tokio::select! {
                _ = stopped(&mut stop), if !stopping => {
                    stopping = true;
                    // GOAWAY: the requests already sent are answered, no new ones taken.
                    if h3.shutdown(0).await.is_err() {
                        break;
                    }
                    continue;
                }
                a = h3.accept() => a,
            };
            match accepted {
                Ok(Some(resolver)) => {
                    let service = service.clone();
                    tokio::spawn(async move {
                        let (req, stream) = match resolver.resolve_request().await {
                            Ok(r) => r,
                            Err(e) => {
                                tracing::debug!(remote = %peer.remote, error = %e, "HTTP/3: malformed request");
                                return;
                            }
                        };
                        let (mut send, recv) = stream.split();
                        // A HEAD's answer has the GET's fields and no content (RFC 9110
                        // §9.3.2), whatever body the service gives it; so do 204 and 304.
                        let head = req.method() == http::Method::HEAD;
                        let req = req.map(|()| RecvBody::new(recv));
                        let resp = service(req, peer).await;
                        let bodiless = head
                            || resp.status() == http::StatusCode::NO_CONTENT
                            || resp.status() == http::StatusCode::NOT_MODIFIED;
                        if let Err(e) = respond(&mut send, resp, bodiless).await {
                            tracing::debug!(remote = %peer.remote, error = %e, "HTTP/3: response not sent whole");
                        }
                    });
                }
                // The client went away, or a GOAWAY's requests are all in.
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(remote = %peer.remote, error = %e, "HTTP/3 connection ended");
                    break;
                }
            }
        }
    }
}

/// Writes `resp` on the request's stream: the head, each data frame as the body gives
/// it, trailers if any, then the end of the stream; only the head when `bodiless`.
async fn respond<B>(
    send: &mut h3::server::RequestStream<h3_quinn::SendStream<Bytes>, Bytes>,
    resp: Response<B>,
    bodiless: bool,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: std::fmt::Display + Send,
{
    let (head, body) = resp.into_parts();
    send.send_response(Response::from_parts(head, ())).await?;
    if bodiless {
        // The body is dropped unread (a pass's backend connection goes with it).
        drop(body);
        send.finish().await?;
        return Ok(());
    }
    let mut body = std::pin::pin!(body);
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                // The response broke off (a backend that stopped): the client must not
                // take what came for the whole of it.
                send.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return Err(format!("the body broke off: {e}").into());
            }
        };
        match frame.into_data() {
            Ok(data) => {
                if !data.is_empty() {
                    send.send_data(data).await?;
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    send.send_trailers(trailers).await?;
                    return Ok(());
                }
            }
        }
    }
    send.finish().await?;
    Ok(())
}

/// Completes when `stop` turns true (or its sender is gone). The guard `wait_for`
/// returns holds the channel's lock, so it is not kept.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.is_ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quic_gets_h3_and_no_early_data_whatever_https_had() {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut https = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(rustls::server::ResolvesServerCertUsingSni::new()));
        https.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        https.max_early_data_size = u32::MAX;
        let quic = quic_tls(&https);
        assert_eq!(quic.alpn_protocols, vec![b"h3".to_vec()]);
        assert_eq!(quic.max_early_data_size, 0);
    }
}
