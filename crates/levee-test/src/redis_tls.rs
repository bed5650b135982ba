//! TLS for the Redis fixtures: a private CA and a certificate it signed for 127.0.0.1
//! and localhost ([`RedisTls`]), the arguments that make redis-server speak TLS only
//! (clients, replication, the Cluster bus) with them, and the fixtures' own client's
//! connection, which checks the server's certificate against that CA ([`Stream`]).
//!
//! ```no_run
//! let Some(_) = levee_test::redis::require() else { return };
//! let tls = levee_test::RedisTls::new();
//! let redis = levee_test::Redis::start_tls(&tls);
//! let url = redis.url(); // rediss://127.0.0.1:PORT/0
//! let ca = tls.ca_path(); // for levee: SSL_CERT_FILE=<ca>
//! ```

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};
use rustls::pki_types::{CertificateDer, ServerName};

/// A private CA and a server certificate signed by it, as files in a temporary
/// directory (removed when the last clone is dropped): `ca.pem`, `redis.crt`,
/// `redis.key`. Clones share the files; a fixture keeps one for its restarts.
#[derive(Clone)]
pub struct RedisTls {
    dir: Arc<tempfile::TempDir>,
    /// What the fixtures' own client trusts: the CA, nothing else.
    client: Arc<rustls::ClientConfig>,
}

impl Default for RedisTls {
    fn default() -> RedisTls {
        RedisTls::new()
    }
}

impl RedisTls {
    /// A new CA, and a certificate for `127.0.0.1` (an IP address SAN) and `localhost`
    /// signed by it, for servers and clients alike (Redis presents it to its peers).
    pub fn new() -> RedisTls {
        let dir = tempfile::tempdir().expect("create a temp dir for the certificates");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "levee test Redis CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);

        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();

        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write ca.pem");
        std::fs::write(dir.path().join("redis.crt"), cert.pem()).expect("write redis.crt");
        std::fs::write(dir.path().join("redis.key"), key.serialize_pem()).expect("write redis.key");

        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(ca.der().to_vec()))
            .expect("the CA as a root");
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        RedisTls {
            dir: Arc::new(dir),
            client: Arc::new(client),
        }
    }

    /// The CA's certificate (PEM): what a client must trust, as `SSL_CERT_FILE` for
    /// levee.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server's certificate (PEM), for 127.0.0.1 and localhost.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.path().join("redis.crt")
    }

    /// The server's private key (PEM).
    pub fn key_path(&self) -> PathBuf {
        self.dir.path().join("redis.key")
    }

    /// redis-server's arguments to speak TLS only, on `port`: no cleartext port, its
    /// certificate, the CA it checks its peers (primary, Cluster nodes) against,
    /// clients without certificates, replication over TLS.
    pub(crate) fn server_args(&self, port: u16) -> Vec<OsString> {
        let mut a: Vec<OsString> = ["--port", "0", "--tls-port"].map(OsString::from).to_vec();
        a.push(port.to_string().into());
        for (flag, path) in self.files() {
            a.push(format!("--{flag}").into());
            a.push(path.into_os_string());
        }
        a.extend(["--tls-auth-clients", "no", "--tls-replication", "yes"].map(OsString::from));
        a
    }

    /// The same as `redis.conf`/`sentinel.conf` lines (a sentinel talks TLS to the
    /// data nodes and the other sentinels with `tls-replication yes`).
    pub(crate) fn conf_lines(&self, port: u16) -> String {
        let mut out = format!("port 0\ntls-port {port}\n");
        for (flag, path) in self.files() {
            out.push_str(&format!("{flag} \"{}\"\n", path.display()));
        }
        out.push_str("tls-auth-clients no\ntls-replication yes\n");
        out
    }

    /// redis-cli's arguments to reach such a server: `--tls --cacert CA`.
    pub(crate) fn cli_args(&self) -> Vec<String> {
        vec![
            "--tls".into(),
            "--cacert".into(),
            self.ca_path().display().to_string(),
        ]
    }

    fn files(&self) -> [(&'static str, PathBuf); 3] {
        [
            ("tls-cert-file", self.cert_path()),
            ("tls-key-file", self.key_path()),
            ("tls-ca-cert-file", self.ca_path()),
        ]
    }
}

/// A connection of the fixtures' own client to 127.0.0.1: cleartext, or TLS checking
/// the server's certificate (for 127.0.0.1) against [`RedisTls`]'s CA.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    /// Connects within `timeout` (the TLS handshake happens on the first read or
    /// write); reads and writes time out after `timeout` too, until changed.
    pub(crate) fn connect(
        port: u16,
        tls: Option<&RedisTls>,
        timeout: Duration,
    ) -> std::io::Result<Stream> {
        let addr = ([127, 0, 0, 1], port).into();
        let s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        let _ = s.set_nodelay(true);
        let Some(tls) = tls else {
            return Ok(Stream::Plain(s));
        };
        let name = ServerName::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST).into());
        let conn = rustls::ClientConnection::new(Arc::clone(&tls.client), name)
            .map_err(std::io::Error::other)?;
        Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(conn, s))))
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &s.sock,
        }
    }

    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.tcp().set_read_timeout(timeout)
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}
