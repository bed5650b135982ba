//! What the tests share: a test CA that issues certificates (rcgen), a directory to write
//! them to, and a rustls client that trusts the CA and reports what a handshake gave it.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use levee_tls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use levee_tls::rustls::client::WebPkiServerVerifier;
use levee_tls::rustls::crypto::ring::default_provider;
use levee_tls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use levee_tls::rustls::{
    self, CertificateError, ClientConfig, DigitallySignedStruct, HandshakeKind, ProtocolVersion,
    RootCertStore, SignatureScheme, SupportedProtocolVersion,
};
use levee_tls::tokio_rustls::{TlsAcceptor, TlsConnector};
use levee_tls::CertPair;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use time::OffsetDateTime;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

pub type ClientStream = levee_tls::tokio_rustls::client::TlsStream<DuplexStream>;
pub type ServerStream = levee_tls::tokio_rustls::server::TlsStream<DuplexStream>;

/// A certificate authority of the test's own, which the test clients trust.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub der: CertificateDer<'static>,
}

/// A certificate the CA issued, with its key, as PEM.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl Ca {
    pub fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "levee-tls test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            issuer: Issuer::new(params, key),
            der: cert.der().clone(),
        }
    }

    /// A certificate for `names`, valid from yesterday for 90 days.
    pub fn issue(&self, names: &[&str]) -> Leaf {
        self.issue_until(names, OffsetDateTime::now_utc() + time::Duration::days(90))
    }

    /// A certificate for `names` that expires at `not_after`.
    pub fn issue_until(&self, names: &[&str], not_after: OffsetDateTime) -> Leaf {
        let sans: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(sans).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("none"));
        params.not_before = not_after.min(OffsetDateTime::now_utc()) - time::Duration::days(30);
        params.not_after = not_after;
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }
}

/// A temporary directory for certificate files, removed with it.
pub struct Dir(tempfile::TempDir);

impl Dir {
    pub fn new() -> Dir {
        Dir(tempfile::tempdir().unwrap())
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// Writes `leaf` as `stem.pem` and `stem.key`: the pair for them.
    pub fn pair(&self, stem: &str, leaf: &Leaf) -> CertPair {
        CertPair::new(
            self.write(&format!("{stem}.pem"), &leaf.cert_pem),
            self.write(&format!("{stem}.key"), &leaf.key_pem),
        )
    }
}

pub const BOTH: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

/// How a test client connects.
pub struct Client {
    pub config: Arc<ClientConfig>,
}

impl Client {
    /// Trusts `ca`, checks the name as browsers do, offers `alpn`.
    pub fn new(ca: &Ca, alpn: &[&[u8]]) -> Client {
        Client::build(ca, alpn, BOTH, false)
    }

    /// Trusts `ca` but takes a certificate for another name than the one asked for: to
    /// see which certificate the server falls back on for no name or an unknown one.
    pub fn any_name(ca: &Ca) -> Client {
        Client::build(ca, &[], BOTH, true)
    }

    /// Offers only `versions`.
    pub fn versions(ca: &Ca, versions: &[&'static SupportedProtocolVersion]) -> Client {
        Client::build(ca, &[], versions, false)
    }

    fn build(
        ca: &Ca,
        alpn: &[&[u8]],
        versions: &[&'static SupportedProtocolVersion],
        any_name: bool,
    ) -> Client {
        let provider = Arc::new(default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(ca.der.clone()).unwrap();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .unwrap();
        let mut config = if any_name {
            let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyName(inner)))
                .with_no_client_auth()
        } else {
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Client {
            config: Arc::new(config),
        }
    }

    /// The same client without SNI: it still checks the certificate against `name`.
    pub fn without_sni(mut self) -> Client {
        Arc::make_mut(&mut self.config).enable_sni = false;
        self
    }
}

/// What a client learnt from a handshake.
#[derive(Debug)]
pub struct Handshake {
    /// The server's certificate (the chain's first).
    pub cert: CertificateDer<'static>,
    pub alpn: Option<Vec<u8>>,
    pub version: ProtocolVersion,
    pub kind: HandshakeKind,
}

/// Why a handshake failed, from both ends.
#[derive(Debug)]
pub struct Failed {
    pub client: io::Error,
    pub server: io::Error,
}

/// A handshake over an in-memory pipe, and the connection left open: the server has
/// sent one byte and the client has read it (which also takes in TLS 1.3's session
/// tickets, sent after the handshake).
pub async fn connect(
    acceptor: &TlsAcceptor,
    client: &Client,
    name: &str,
) -> Result<(ClientStream, ServerStream, Handshake), Failed> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let connector = TlsConnector::from(client.config.clone());
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let server = async {
        let mut tls = acceptor.accept(server_io).await?;
        tls.write_all(b"!").await?;
        tls.flush().await?;
        Ok::<_, io::Error>(tls)
    };
    let client = async {
        let mut tls = connector.connect(name, client_io).await?;
        let mut byte = [0u8; 1];
        tls.read_exact(&mut byte).await?;
        Ok::<_, io::Error>(tls)
    };
    // A deadline, not a pause: a hung handshake fails the test instead of hanging it.
    let both = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(client, server)
    });
    match both.await.expect("the handshake hung") {
        (Ok(client), Ok(server)) => {
            let conn = client.get_ref().1;
            let handshake = Handshake {
                cert: conn.peer_certificates().unwrap()[0].clone(),
                alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
                version: conn.protocol_version().unwrap(),
                kind: conn.handshake_kind().unwrap(),
            };
            Ok((client, server, handshake))
        }
        (client, server) => Err(Failed {
            client: client
                .err()
                .unwrap_or_else(|| io::Error::other("client succeeded")),
            server: server
                .err()
                .unwrap_or_else(|| io::Error::other("server succeeded")),
        }),
    }
}

/// A handshake, the connection then closed.
pub async fn handshake(
    acceptor: &TlsAcceptor,
    client: &Client,
    name: &str,
) -> Result<Handshake, Failed> {
    connect(acceptor, client, name).await.map(|(_, _, h)| h)
}

/// The rustls error inside an I/O error from tokio-rustls.
pub fn tls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>()
}

/// Checks the chain against the CA as usual, but accepts a certificate for another
/// name than the one asked for.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the name last, after the chain: a name error means the rest held.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
