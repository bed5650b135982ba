//! HTTP/3: the UDP port of each HTTPS listener, a QUIC endpoint on it (levee-h3), and its
//! requests through the same request path as HTTP/1.1's and HTTP/2's.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use http::HeaderValue;
use tokio::sync::{watch, Semaphore};

use crate::error::BindError;
use crate::request::{handle, Shared};
use crate::server::client::ConnInfo;
use http_body_util::Either;

/// The UDP sockets on the ports of the HTTPS listeners as bound (`tls_addrs`), when
/// HTTP/3 is on: those systemd's store kept for a restart, the others bound.
pub(super) fn bind(
    settings: &levee_config::Settings,
    tls_addrs: &[SocketAddr],
    activated: &mut levee_systemd::Activated,
) -> Result<Vec<UdpSocket>, BindError> {
    if !settings.tls.http3 || settings.listen_tls.is_empty() {
        return Ok(Vec::new());
    }
    tls_addrs
        .iter()
        .map(|addr| {
            if let Some(kept) = activated.take_udp(*addr) {
                return Ok(kept);
            }
            let socket = UdpSocket::bind(addr).and_then(|s| {
                s.set_nonblocking(true)?;
                Ok(s)
            });
            socket.map_err(|source| BindError {
                addr: *addr,
                source,
                hint: " (HTTP/3 takes the same port over UDP: free it, or set [tls] http3 = false)",
            })
        })
        .collect()
}

/// Sets the `Alt-Svc` each HTTPS port's answers announce HTTP/3 on `sockets` with.
pub(super) fn announce(shared: &Shared, sockets: &[UdpSocket]) {
    let Some(tls) = shared.tls.as_ref() else {
        return;
    };
    let alt_svc = sockets
        .iter()
        .filter_map(|s| s.local_addr().ok())
        .filter_map(|a| {
            // Browsers remember it for a day; `ma` as Caddy and nginx send it.
            let v = HeaderValue::from_str(&format!("h3=\":{}\"; ma=86400", a.port())).ok()?;
            Some((a.port(), v))
        })
        .collect();
    let _ = tls.alt_svc.set(alt_svc);
}

/// Serves HTTP/3 on `sockets` from the current runtime until `stop`; each QUIC
/// connection holds a permit of `conns` as a TCP connection does.
pub(super) fn serve(
    shared: &Arc<Shared>,
    sockets: Vec<UdpSocket>,
    conns: &Arc<Semaphore>,
    stop: &watch::Receiver<bool>,
) {
    let Some(tls) = shared.tls.as_ref() else {
        return;
    };
    let config = tls.certs.server_config(&[b"h3"]);
    let settings = &shared.conf().settings;
    let limits = levee_h3::Limits {
        max_header_bytes: settings.limits.max_header_bytes,
        handshake_timeout: settings.limits.header_timeout,
        ..levee_h3::Limits::default()
    };
    let mut stats = Vec::new();
    for socket in sockets {
        let endpoint = match levee_h3::bind(socket, &config, limits.clone()) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(error = %e, "HTTP/3 is off on this port");
                eprintln!("levee: HTTP/3 is off: {e}");
                continue;
            }
        };
        stats.push(endpoint.stats());
        let shared = shared.clone();
        let service = move |req: http::Request<levee_h3::RecvBody>, peer: levee_h3::Peer| {
            let shared = shared.clone();
            let conn = ConnInfo {
                peer: peer.remote,
                local: peer.local,
                tls: true,
            };
            async move {
                match handle(shared, req.map(Either::Right), conn, None).await {
                    Ok(resp) => resp,
                    Err(never) => match never {},
                }
            }
        };
        tokio::spawn(endpoint.serve(service, conns.clone(), stop.clone()));
    }
    let _ = tls.quic_stats.set(stats);
}
