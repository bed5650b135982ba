//! Reload: new handshakes get the new certificates, open connections carry on, and a
//! reload that fails changes nothing.

use levee_tls::rustls::HandshakeKind;
use levee_tls::{CertStore, Error, Settings, DEFAULT_ALPN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::fixtures::{connect, handshake, Ca, Client, Dir};

#[tokio::test]
async fn a_reload_swaps_the_certificate_new_handshakes_get() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let old = ca.issue(&["a.example.com"]);
    let store = CertStore::load(&[dir.pair("old", &old)], Settings::default()).unwrap();
    let acceptor = store.acceptor(DEFAULT_ALPN);
    let client = Client::new(&ca, &[]);

    let (mut open_client, mut open_server, before) =
        connect(&acceptor, &client, "a.example.com").await.unwrap();
    assert_eq!(before.cert, old.der);

    let new = ca.issue(&["a.example.com", "b.example.com"]);
    let new_pair = dir.pair("new", &new);
    let new_file = new_pair.cert.clone();
    store.reload(&[new_pair]).unwrap();

    // A client that resumes its session skips the certificate: it keeps the one it
    // checked before the reload, as with any server (the session key is not the
    // certificate's). A new client gets the new certificate.
    let resumed = handshake(&acceptor, &client, "a.example.com")
        .await
        .unwrap();
    assert_eq!(resumed.kind, HandshakeKind::Resumed);
    assert_eq!(resumed.cert, old.der);
    let fresh = Client::new(&ca, &[]);
    let after = handshake(&acceptor, &fresh, "a.example.com").await.unwrap();
    assert_eq!(after.cert, new.der);
    let b = handshake(&acceptor, &fresh, "b.example.com").await.unwrap();
    assert_eq!(b.cert, new.der);
    assert_eq!(store.expiry()[0].file, new_file);
    assert!(store.covers("b.example.com"));

    // The connection opened before the reload still carries data both ways.
    open_client.write_all(b"ping").await.unwrap();
    open_client.flush().await.unwrap();
    let mut got = [0u8; 4];
    open_server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
    open_server.write_all(b"pong").await.unwrap();
    open_server.flush().await.unwrap();
    open_client.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"pong");
}

#[tokio::test]
async fn a_failed_reload_keeps_the_certificates_in_use() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let old = ca.issue(&["a.example.com"]);
    let old_pair = dir.pair("old", &old);
    let old_file = old_pair.cert.clone();
    let store = CertStore::load(&[old_pair], Settings::default()).unwrap();
    let acceptor = store.acceptor(DEFAULT_ALPN);
    let client = Client::new(&ca, &[]);

    // A good pair then one whose key is another certificate's: nothing may change.
    let good = dir.pair("good", &ca.issue(&["a.example.com"]));
    let other = dir.pair("other", &ca.issue(&["b.example.com"]));
    let mut bad = dir.pair("bad", &ca.issue(&["b.example.com"]));
    bad.key = other.key.clone();
    let err = store.reload(&[good, bad]).unwrap_err();
    assert!(matches!(err, Error::KeyMismatch { .. }), "{err:?}");
    assert_eq!(err.file(), Some(other.key.as_path()));

    let err = store.reload(&[]).unwrap_err();
    assert!(matches!(err, Error::NoCertificates), "{err:?}");

    let got = handshake(&acceptor, &client, "a.example.com")
        .await
        .unwrap();
    assert_eq!(got.cert, old.der);
    let expiry = store.expiry();
    assert_eq!(expiry.len(), 1);
    assert_eq!(expiry[0].file, old_file);
    assert!(!store.covers("b.example.com"));
}
