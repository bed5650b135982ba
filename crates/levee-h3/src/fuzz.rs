//! The fuzz harness of the packet path levee owns: datagrams from anyone reaching a QUIC
//! endpoint configured as levee's ([`server_config`]), each new connection attempt
//! decided as levee's accept loop decides it ([`Admission`]), while a real client's
//! handshake runs beside them and the fuzzer may corrupt, drop or reorder its packets.
//!
//! In memory and without a runtime (quinn-proto, the state machine under quinn), so that
//! libFuzzer runs it thousands of times a second. Beyond "no panic" it checks levee's
//! own promises: under a flood no unvalidated address gets a handshake, and no network
//! holds more connections than its share.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event,
};

use crate::limits::{Limits, NetworkSlot};
use crate::serve::{server_config, Admission, Admit};

/// Certificates for the harness: a server configuration with a self-signed certificate
/// for `fuzz.test`, and a client that trusts it and asks for h3.
pub fn configs() -> Result<(rustls::ServerConfig, rustls::ClientConfig), Box<dyn std::error::Error>>
{
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["fuzz.test".to_string()])
        .and_then(|p| p.self_signed(&key))?;
    let der = cert.der().clone();
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(
            vec![der.clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der)?;
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"h3".to_vec()];
    Ok((server, client))
}

/// The harness's bounds: small, so that the fuzzer reaches them.
fn limits(flood: bool) -> Limits {
    Limits {
        per_network: 2,
        // 0: every unvalidated attempt is a flood's and gets a Retry.
        handshakes: if flood { 0 } else { 64 },
        ..Limits::default()
    }
}

const SERVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)), 443);
const CLIENT: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), 50000);

/// Runs `data` as a script of datagrams against levee's QUIC server.
///
/// The first byte chooses the mode (bit 0: a flood, so unvalidated attempts get Retry).
/// Then operations, each an opcode byte and its operands:
/// - 0, n, n bytes: the real client's next datagram, its first n bytes XORed with these
///   (n = 0: as it is);
/// - 1, a, l, l bytes: a datagram of those bytes from 10.0.(a / 4).(a % 4);
/// - 2, t: t × 10 ms pass (timers fire);
/// - 3: the real client's next datagram is dropped;
/// - 4: the real client's next two datagrams swap places.
pub fn datagrams(
    server_tls: &rustls::ServerConfig,
    client_tls: &rustls::ClientConfig,
    data: &[u8],
) -> Outcome {
    let Some((&mode, mut ops)) = data.split_first() else {
        return Outcome::default();
    };
    let flood = mode & 1 == 1;
    let Ok(server_config) = server_config(server_tls, &limits(flood)) else {
        return Outcome::default();
    };
    let Ok(quic_client) =
        quinn_proto::crypto::rustls::QuicClientConfig::try_from(client_tls.clone())
    else {
        return Outcome::default();
    };
    let mut h = Harness {
        now: Instant::now(),
        server: Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(server_config)),
            true,
            Some([7; 32]),
        ),
        admission: Admission::new(limits(flood)),
        flood,
        conns: HashMap::new(),
        client: Endpoint::new(
            Arc::new(EndpointConfig::default()),
            None,
            true,
            Some([9; 32]),
        ),
        client_conn: None,
        to_server: VecDeque::new(),
        outcome: Outcome::default(),
    };
    if let Ok((ch, conn)) = h.client.connect(
        h.now,
        ClientConfig::new(Arc::new(quic_client)),
        SERVER,
        "fuzz.test",
    ) {
        h.client_conn = Some((ch, conn));
    }
    h.pump();
    while let Some((&op, rest)) = ops.split_first() {
        ops = rest;
        match op % 5 {
            0 => {
                let n = take(&mut ops, 1).first().copied().unwrap_or(0) as usize;
                let mask = take(&mut ops, n);
                if let Some(mut d) = h.to_server.pop_front() {
                    for (b, m) in d.iter_mut().zip(mask) {
                        *b ^= m;
                    }
                    h.deliver_to_server(CLIENT, d);
                }
            }
            1 => {
                let a = take(&mut ops, 1).first().copied().unwrap_or(0);
                let l = take(&mut ops, 1).first().copied().unwrap_or(0) as usize;
                let d = BytesMut::from(take(&mut ops, l));
                let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, a / 4, a % 4)), 4433);
                h.deliver_to_server(from, d);
            }
            2 => {
                let t = take(&mut ops, 1).first().copied().unwrap_or(0);
                h.now += Duration::from_millis(u64::from(t) * 10);
                h.timers();
            }
            3 => {
                h.to_server.pop_front();
            }
            _ => {
                if h.to_server.len() >= 2 {
                    h.to_server.swap(0, 1);
                }
            }
        }
        h.pump();
    }
    h.outcome
}

/// What the server did with a script.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Handshakes completed.
    pub connected: usize,
    /// Retries sent.
    pub retries: usize,
    /// Attempts refused (their network at its share).
    pub refused: usize,
}

/// The first `n` bytes of `ops` (fewer if it is shorter), taken off it.
fn take<'a>(ops: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, rest) = ops.split_at(n.min(ops.len()));
    *ops = rest;
    head
}

struct Harness {
    now: Instant,
    server: Endpoint,
    admission: Admission,
    flood: bool,
    /// The server's connections, each with its place in its network's count.
    conns: HashMap<ConnectionHandle, (Connection, Option<NetworkSlot>)>,
    client: Endpoint,
    client_conn: Option<(ConnectionHandle, Connection)>,
    /// The real client's datagrams, not yet delivered.
    to_server: VecDeque<BytesMut>,
    outcome: Outcome,
}

impl Harness {
    /// A datagram reaches the server's endpoint from `from`.
    fn deliver_to_server(&mut self, from: SocketAddr, data: BytesMut) {
        let mut buf = Vec::new();
        let event = self
            .server
            .handle(self.now, from, None, None, data, &mut buf);
        match event {
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                if let Some((conn, _)) = self.conns.get_mut(&ch) {
                    conn.handle_event(ev);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                let validated = incoming.remote_address_validated();
                match self.admission.admit(from.ip(), validated) {
                    Admit::Retry => {
                        if let Ok(t) = self.server.retry(incoming, &mut buf) {
                            self.outcome.retries += 1;
                            self.deliver_to_client(from, &buf[..t.size]);
                        }
                    }
                    Admit::NetworkFull => {
                        self.outcome.refused += 1;
                        let t = self.server.refuse(incoming, &mut buf);
                        self.deliver_to_client(from, &buf[..t.size]);
                    }
                    Admit::Accept(slot) => {
                        assert!(
                            validated || !self.flood,
                            "an unvalidated address got a handshake under a flood"
                        );
                        let open_here = self
                            .conns
                            .values()
                            .filter(|(c, _)| same_network(c.remote_address().ip(), from.ip()))
                            .count();
                        assert!(
                            open_here < limits(self.flood).per_network,
                            "a network got more connections than its share"
                        );
                        match self.server.accept(incoming, self.now, &mut buf, None) {
                            Ok((ch, conn)) => {
                                self.admission.handshakes.fetch_add(1, Ordering::Relaxed);
                                self.conns.insert(ch, (conn, Some(slot)));
                            }
                            Err(e) => {
                                if let Some(t) = e.response {
                                    self.deliver_to_client(from, &buf[..t.size]);
                                }
                            }
                        }
                    }
                }
            }
            Some(DatagramEvent::Response(t)) => self.deliver_to_client(from, &buf[..t.size]),
            None => {}
        }
    }

    /// A datagram from the server: the real client gets those addressed to it.
    fn deliver_to_client(&mut self, to: SocketAddr, data: &[u8]) {
        if to != CLIENT {
            return;
        }
        let mut buf = Vec::new();
        let event =
            self.client
                .handle(self.now, SERVER, None, None, BytesMut::from(data), &mut buf);
        if let (Some(DatagramEvent::ConnectionEvent(ch, ev)), Some((cch, conn))) =
            (event, self.client_conn.as_mut())
        {
            if ch == *cch {
                conn.handle_event(ev);
            }
        }
    }

    fn timers(&mut self) {
        let now = self.now;
        for (conn, _) in self.conns.values_mut() {
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
        }
        if let Some((_, conn)) = self.client_conn.as_mut() {
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
        }
    }

    /// Runs both sides until neither has anything more to say (bounded: a fuzz input
    /// must not loop).
    fn pump(&mut self) {
        for _ in 0..16 {
            let mut moved = false;
            // The server's connections: their events, streams read, packets to the
            // client, endpoint bookkeeping.
            let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
            for ch in handles {
                let mut out = Vec::new();
                let mut drained = false;
                if let Some((conn, _)) = self.conns.get_mut(&ch) {
                    while let Some(ev) = conn.poll() {
                        if matches!(ev, Event::Connected) {
                            self.outcome.connected += 1;
                        }
                        if matches!(ev, Event::Connected | Event::ConnectionLost { .. }) {
                            // The handshake is over, one way or the other.
                            let _ = self.admission.handshakes.fetch_update(
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                                |n| n.checked_sub(1),
                            );
                        }
                    }
                    while let Some(id) = conn.streams().accept(Dir::Bi) {
                        if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
                            while let Ok(Some(_)) = chunks.next(usize::MAX) {}
                            let _ = chunks.finalize();
                        }
                    }
                    let mut buf = Vec::new();
                    for _ in 0..64 {
                        buf.clear();
                        let Some(t) = conn.poll_transmit(self.now, 1, &mut buf) else {
                            break;
                        };
                        out.push((t.destination, buf[..t.size].to_vec()));
                    }
                    while let Some(ev) = conn.poll_endpoint_events() {
                        drained |= ev.is_drained();
                        if let Some(back) = self.server.handle_event(ch, ev) {
                            conn.handle_event(back);
                        }
                    }
                }
                if drained {
                    // Its network slot goes with it.
                    self.conns.remove(&ch);
                }
                for (to, d) in out {
                    moved = true;
                    self.deliver_to_client(to, &d);
                }
            }
            // The real client: its packets queue for the fuzzer to deliver.
            if let Some((ch, conn)) = self.client_conn.as_mut() {
                while conn.poll().is_some() {}
                let mut buf = Vec::new();
                for _ in 0..64 {
                    buf.clear();
                    let Some(t) = conn.poll_transmit(self.now, 1, &mut buf) else {
                        break;
                    };
                    if self.to_server.len() < 256 {
                        self.to_server.push_back(BytesMut::from(&buf[..t.size]));
                        moved = true;
                    }
                }
                while let Some(ev) = conn.poll_endpoint_events() {
                    if let Some(back) = self.client.handle_event(*ch, ev) {
                        conn.handle_event(back);
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }
}

fn same_network(a: IpAddr, b: IpAddr) -> bool {
    levee_limits::client_net::ClientNet::of(a, 24, 56)
        == levee_limits::client_net::ClientNet::of(b, 24, 56)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mode, then every datagram of the real client delivered as it is, time passing.
    fn a_clean_handshake(mode: u8) -> Vec<u8> {
        let mut script = vec![mode];
        for _ in 0..16 {
            script.extend([0, 0, 2, 1]);
        }
        script
    }

    #[test]
    fn the_real_clients_handshake_completes_through_the_harness() {
        // Without this the harness could be feeding nothing anywhere.
        let (server, client) = configs().unwrap();
        let out = datagrams(&server, &client, &a_clean_handshake(0));
        assert_eq!(
            out,
            Outcome {
                connected: 1,
                retries: 0,
                refused: 0
            }
        );
    }

    #[test]
    fn under_a_flood_the_client_proves_its_address_then_connects() {
        let (server, client) = configs().unwrap();
        let out = datagrams(&server, &client, &a_clean_handshake(1));
        assert_eq!(
            out,
            Outcome {
                connected: 1,
                retries: 1,
                refused: 0
            }
        );
    }

    #[test]
    fn hostile_datagrams_and_corrupted_packets_do_not_panic() {
        let (server, client) = configs().unwrap();
        // Garbage from many networks, a corrupted Initial, drops, swaps, time passing,
        // in flood mode and not.
        for mode in [0u8, 1] {
            let mut script = vec![mode];
            for a in 0..40u8 {
                script.extend([1, a, 30]);
                script.extend((0..30).map(|i| i ^ a));
            }
            script.extend([0, 4, 0xff, 0x00, 0x00, 0x01]);
            script.extend([4, 3, 0, 0, 2, 200, 0, 0]);
            let out = datagrams(&server, &client, &script);
            assert_eq!(out.connected, 0, "a corrupted Initial connects nothing");
        }
    }
}
