//! The manager against a real ACME server, offline: Pebble validates a.levee.test
//! (its DNS server says 127.0.0.1) against a small server here that does what levee-proxy
//! does with the manager: the store's acceptor on the TLS port (a connection that
//! negotiated acme-tls/1 is closed after the handshake), HTTP-01 tokens on the cleartext
//! one. The full path through the real levee is tested in crates/levee/tests/it/acme.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use levee_acme::{Challenge, Config, Manager};
use levee_test::{eventually, require, tools, Pebble};
use levee_tls::rustls::pki_types::pem::PemObject;
use levee_tls::rustls::pki_types::{CertificateDer, ServerName};
use levee_tls::rustls::{ClientConfig, RootCertStore};
use levee_tls::tokio_rustls::TlsConnector;
use levee_tls::{CertStore, ACME_TLS_ALPN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NAME: &str = "a.levee.test";

/// The small server: bound before Pebble starts, so that its ports are known.
struct Server {
    tls: TcpListener,
    http: TcpListener,
}

impl Server {
    async fn bind() -> Server {
        Server {
            tls: TcpListener::bind("127.0.0.1:0").await.unwrap(),
            http: TcpListener::bind("127.0.0.1:0").await.unwrap(),
        }
    }

    fn ports(&self) -> (u16, u16) {
        let port = |l: &TcpListener| l.local_addr().unwrap().port();
        (port(&self.http), port(&self.tls))
    }

    /// Serves until the test ends (the runtime drops the tasks).
    fn serve(self, certs: Arc<CertStore>, manager: Manager) -> u16 {
        let tls_port = self.ports().1;
        let acceptor = certs.acceptor(&[b"http/1.1", ACME_TLS_ALPN]);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = self.tls.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if tls.get_ref().1.alpn_protocol() == Some(ACME_TLS_ALPN) {
                        return;
                    }
                    let _ = tls.write_all(b"ok").await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = self.http.accept().await {
                let manager = manager.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = tcp.read(&mut buf).await.unwrap_or(0);
                    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("/");
                    let resp = match manager.http01_path(path).flatten() {
                        Some(body) => format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        ),
                        None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into(),
                    };
                    let _ = tcp.write_all(resp.as_bytes()).await;
                });
            }
        });
        tls_port
    }
}

fn store() -> Arc<CertStore> {
    let settings = levee_tls::Settings {
        runtime_certificates: true,
        ..Default::default()
    };
    Arc::new(CertStore::load(&[], settings).unwrap())
}

fn config(pebble: &Pebble, dir: &Path, challenge: Challenge) -> Config {
    Config {
        email: "admin@levee.test".into(),
        directory: pebble.directory(),
        dir: dir.to_owned(),
        ca: Some(pebble.listener_ca()),
        names: vec![NAME.into()],
        challenge,
    }
}

/// A handshake with the server as a client that trusts only Pebble's issuing root:
/// fails unless the certificate served chains to it and is for NAME.
async fn verified_handshake(port: u16, pebble: &Pebble) -> Result<(), String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pebble.issuing_root_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = ClientConfig::builder_with_provider(Arc::new(
        levee_tls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from(NAME).unwrap();
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let mut body = String::new();
    let _ = tls.read_to_string(&mut body).await;
    Ok(())
}

async fn issues_with(challenge: Challenge) {
    require!(tools::PEBBLE);
    let server = Server::bind().await;
    let (http_port, tls_port) = server.ports();
    let pebble = Pebble::start(http_port, tls_port);
    let dir = tempfile::tempdir().unwrap();
    let certs = store();
    let manager = Manager::new(config(&pebble, dir.path(), challenge), certs.clone()).unwrap();
    assert_eq!(manager.names(), [NAME]);
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    server.serve(certs.clone(), manager.clone());
    let running = tokio::spawn(manager.clone().run(stop));

    let issued = eventually(Duration::from_secs(30), || certs.issued(NAME).is_some()).await;
    assert!(
        issued,
        "no certificate within 30 s ({} orders, {} failures)\n{}",
        manager.orders(),
        manager.failures(),
        pebble.log()
    );
    assert_eq!((manager.orders(), manager.issued()), (1, 1));
    verified_handshake(tls_port, &pebble).await.unwrap();
    for file in ["a.levee.test.crt", "a.levee.test.key"] {
        let mode = std::fs::metadata(dir.path().join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    assert!(
        manager.http01("no-such-token").is_none(),
        "no token once the order is done"
    );
    let _ = stop_tx.send(true);
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the manager stops when told")
        .unwrap();

    // Another start over the same directory serves the stored certificate at once,
    // without ordering.
    let certs = store();
    let manager = Manager::new(config(&pebble, dir.path(), challenge), certs.clone()).unwrap();
    assert!(certs.issued(NAME).is_some(), "served before any network");
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let server = Server::bind().await;
    let port = server.serve(certs, manager.clone());
    tokio::spawn(manager.clone().run(stop));
    verified_handshake(port, &pebble).await.unwrap();
    assert_eq!(manager.orders(), 0);
}

#[tokio::test]
async fn a_certificate_is_issued_over_tls_alpn_01_and_served_again_after_a_restart() {
    issues_with(Challenge::TlsAlpn01).await;
}

#[tokio::test]
async fn a_certificate_is_issued_over_http_01_and_served_again_after_a_restart() {
    issues_with(Challenge::Http01).await;
}

#[tokio::test]
async fn an_unknown_ca_is_a_retried_failure_not_a_crash() {
    require!(tools::PEBBLE);
    let server = Server::bind().await;
    let (http_port, tls_port) = server.ports();
    let pebble = Pebble::start(http_port, tls_port);
    let dir = tempfile::tempdir().unwrap();
    let certs = store();
    // No acme_ca: Pebble's listener is signed by a CA nothing trusts.
    let mut config = config(&pebble, dir.path(), Challenge::TlsAlpn01);
    config.ca = None;
    let manager = Manager::new(config, certs.clone()).unwrap();
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    tokio::spawn(manager.clone().run(stop));
    assert!(eventually(Duration::from_secs(20), || manager.failures() == 1).await);
    assert!(certs.issued(NAME).is_none());
}
