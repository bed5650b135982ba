//! HTTP/3 (`--h3`) through quinn and hyper's h3: one QUIC connection per bench
//! connection (its own UDP socket, as separate clients have), one request at a time on
//! it, reconnected as needed. No other load tool on Debian speaks HTTP/3 (its h2load is
//! built without QUIC), which is why levee bench does.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes};

use crate::http1::Resp;
use crate::http2::server_of;
use crate::stats::Failure;
use crate::target::{Plan, Target};

type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// One HTTP/3 connection slot.
pub(crate) struct H3 {
    conn: Option<(Sender, quinn::Endpoint)>,
    addr: usize,
}

impl H3 {
    pub(crate) fn new() -> Self {
        H3 {
            conn: None,
            addr: usize::MAX,
        }
    }

    pub(crate) fn reset(&mut self) {
        if let Some((_, endpoint)) = self.conn.take() {
            endpoint.close(0u32.into(), b"");
        }
    }

    pub(crate) async fn request(
        &mut self,
        plan: &Plan,
        target: &Target,
        want_server: bool,
    ) -> Result<Resp, Failure> {
        if self.addr != target.addr {
            self.reset();
        }
        let sender = match self.conn.as_mut() {
            Some((s, _)) => s,
            None => {
                let host = target.uri.host().unwrap_or("localhost");
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let (s, e) = tokio::time::timeout(
                    plan.opts.connect_timeout,
                    connect(plan.addrs[target.addr], host, plan.opts.insecure),
                )
                .await
                .map_err(|_| Failure::Connect)??;
                self.addr = target.addr;
                &mut self.conn.insert((s, e)).0
            }
        };
        let result = exchange(sender, target, want_server).await;
        if result.is_err() || !plan.opts.keepalive {
            self.reset();
        }
        result
    }
}

async fn connect(
    addr: SocketAddr,
    host: &str,
    insecure: bool,
) -> Result<(Sender, quinn::Endpoint), Failure> {
    let bind: SocketAddr = match addr {
        SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
    };
    let mut endpoint = quinn::Endpoint::client(bind).map_err(|_| Failure::Connect)?;
    endpoint.set_default_client_config(client_config(insecure).map_err(|_| Failure::Connect)?);
    let quic = endpoint
        .connect(addr, host)
        .map_err(|_| Failure::Connect)?
        .await
        .map_err(|_| Failure::Connect)?;
    let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(quic))
        .await
        .map_err(|_| Failure::Connect)?;
    tokio::task::spawn_local(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    Ok((sender, endpoint))
}

/// TLS 1.3 with ALPN h3, trusting the system's roots, or (`--insecure`) any
/// certificate whose handshake signature is right, as `curl -k` does.
pub(crate) fn client_config(insecure: bool) -> Result<quinn::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?;
    let mut tls = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// `--insecure`: any certificate, the handshake's signatures still checked.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

async fn exchange(
    sender: &mut Sender,
    target: &Target,
    want_server: bool,
) -> Result<Resp, Failure> {
    let mut req = http::Request::new(());
    *req.method_mut() = target.method.clone();
    *req.uri_mut() = target.uri.clone();
    *req.headers_mut() = target.h2_headers.clone();
    let mut stream = sender.send_request(req).await.map_err(|_| Failure::Other)?;
    if !target.body.is_empty() {
        stream
            .send_data(target.body.clone())
            .await
            .map_err(|_| Failure::Other)?;
    }
    stream.finish().await.map_err(|_| Failure::Other)?;
    let resp = stream.recv_response().await.map_err(|_| Failure::Other)?;
    let status = resp.status().as_u16();
    let server = want_server.then(|| server_of(resp.headers())).flatten();
    let mut len = 0u64;
    while let Some(chunk) = stream.recv_data().await.map_err(|_| Failure::Other)? {
        len += chunk.remaining() as u64;
    }
    Ok(Resp {
        status,
        bytes: len,
        body_len: len,
        server,
        keep_alive: true,
    })
}
