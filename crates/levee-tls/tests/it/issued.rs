//! Certificates that arrive while serving (ACME): issued ones by exact name, behind the
//! file certificates, and TLS-ALPN-01 challenge certificates that only a ClientHello
//! offering `acme-tls/1` alone gets.

use std::sync::Arc;

use levee_tls::rustls::crypto::ring::default_provider;
use levee_tls::rustls::pki_types::pem::PemObject;
use levee_tls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use levee_tls::rustls::sign::CertifiedKey;
use levee_tls::{CertStore, Error, Settings, ACME_TLS_ALPN, DEFAULT_ALPN};

use crate::fixtures::{handshake, Ca, Client, Dir, Leaf};

fn runtime() -> Settings {
    Settings {
        runtime_certificates: true,
        ..Settings::default()
    }
}

/// The acceptor levee-proxy builds when ACME is on.
const WITH_ACME: &[&[u8]] = &[b"h2", b"http/1.1", ACME_TLS_ALPN];

fn certified(leaf: &Leaf) -> Arc<CertifiedKey> {
    let cert = CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap();
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    Arc::new(CertifiedKey::from_der(vec![cert], key, &default_provider()).unwrap())
}

#[test]
fn a_store_without_files_is_an_error_unless_certificates_come_at_runtime() {
    assert!(matches!(
        CertStore::load(&[], Settings::default()),
        Err(Error::NoCertificates)
    ));
    let store = CertStore::load(&[], runtime()).unwrap();
    assert!(store.expiry().is_empty());
    store.reload(&[]).unwrap();
}

#[tokio::test]
async fn an_issued_certificate_is_served_from_the_next_handshake_on() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let store = CertStore::load(&[], runtime()).unwrap();
    let acceptor = store.acceptor(DEFAULT_ALPN);
    let client = Client::new(&ca, &[]);
    assert!(
        handshake(&acceptor, &client, "a.example.com")
            .await
            .is_err(),
        "nothing to serve yet"
    );

    let first = ca.issue(&["a.example.com"]);
    let expiry = store
        .set_issued(
            "a.example.com",
            &dir.pair("a1", &first).serving(["a.example.com"]),
        )
        .unwrap();
    assert_eq!(expiry.names, ["a.example.com"]);
    let got = handshake(&acceptor, &client, "a.example.com")
        .await
        .unwrap();
    assert_eq!(got.cert, first.der);

    // A renewal replaces it in place (a new client: a resumed session keeps the
    // certificate it checked).
    let second = ca.issue(&["a.example.com"]);
    store
        .set_issued("A.example.com.", &dir.pair("a2", &second))
        .unwrap();
    let client = Client::new(&ca, &[]);
    let got = handshake(&acceptor, &client, "a.example.com")
        .await
        .unwrap();
    assert_eq!(got.cert, second.der);
    assert_eq!(store.expiry().len(), 1);
    assert_eq!(
        store.issued("a.example.com").unwrap().names,
        ["a.example.com"]
    );
}

#[tokio::test]
async fn a_file_certificate_beats_an_issued_one_for_the_same_name() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let file = ca.issue(&["a.example.com"]);
    let store = CertStore::load(&[dir.pair("file", &file)], runtime()).unwrap();
    let issued = ca.issue(&["a.example.com", "b.example.com"]);
    store
        .set_issued("a.example.com", &dir.pair("issued", &issued))
        .unwrap();
    store
        .set_issued("b.example.com", &dir.pair("issued", &issued))
        .unwrap();
    let acceptor = store.acceptor(DEFAULT_ALPN);
    let client = Client::new(&ca, &[]);
    let a = handshake(&acceptor, &client, "a.example.com")
        .await
        .unwrap();
    assert_eq!(a.cert, file.der);
    let b = handshake(&acceptor, &client, "b.example.com")
        .await
        .unwrap();
    assert_eq!(b.cert, issued.der);
    assert!(store.covers("a.example.com") && !store.covers("b.example.com"));
}

#[tokio::test]
async fn only_an_acme_tls_alpn_validation_gets_the_challenge_certificate() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let store = CertStore::load(&[], runtime()).unwrap();
    let served = ca.issue(&["a.example.com"]);
    store
        .set_issued("a.example.com", &dir.pair("a", &served))
        .unwrap();
    let challenge = ca.issue(&["a.example.com"]);
    store.set_challenge("a.example.com", certified(&challenge));
    let acceptor = store.acceptor(WITH_ACME);

    let validator = Client::new(&ca, &[ACME_TLS_ALPN]);
    let got = handshake(&acceptor, &validator, "a.example.com")
        .await
        .unwrap();
    assert_eq!(got.cert, challenge.der);
    assert_eq!(got.alpn.as_deref(), Some(ACME_TLS_ALPN));

    // A browser, or a client that offers acme-tls/1 among others, gets the real one.
    for alpn in [&[][..], &[&b"h2"[..], ACME_TLS_ALPN][..]] {
        let client = Client::new(&ca, alpn);
        let got = handshake(&acceptor, &client, "a.example.com")
            .await
            .unwrap();
        assert_eq!(got.cert, served.der);
        assert_ne!(got.alpn.as_deref(), Some(ACME_TLS_ALPN));
    }

    // No pending challenge for the name: refused, never the served certificate (new
    // clients each time: no session to resume).
    store.remove_challenge("a.example.com");
    let validator = Client::new(&ca, &[ACME_TLS_ALPN]);
    assert!(handshake(&acceptor, &validator, "a.example.com")
        .await
        .is_err());
    store.set_challenge("a.example.com", certified(&challenge));
    let validator = Client::new(&ca, &[ACME_TLS_ALPN]);
    assert!(handshake(&acceptor, &validator, "b.example.com")
        .await
        .is_err());
}

#[tokio::test]
async fn without_files_a_client_without_sni_gets_an_issued_certificate() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let store = CertStore::load(&[], runtime()).unwrap();
    let b = ca.issue(&["b.example.com"]);
    let a = ca.issue(&["a.example.com"]);
    store
        .set_issued("b.example.com", &dir.pair("b", &b))
        .unwrap();
    store
        .set_issued("a.example.com", &dir.pair("a", &a))
        .unwrap();
    let acceptor = store.acceptor(DEFAULT_ALPN);
    let client = Client::new(&ca, &[]).without_sni();
    let got = handshake(&acceptor, &client, "a.example.com")
        .await
        .unwrap();
    assert_eq!(got.cert, a.der, "the first name in order");
}

#[test]
fn an_issued_pair_that_does_not_cover_its_name_is_refused() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let store = CertStore::load(&[], runtime()).unwrap();
    let other = ca.issue(&["other.example.com"]);
    let err = store
        .set_issued(
            "a.example.com",
            &dir.pair("o", &other).serving(["a.example.com"]),
        )
        .unwrap_err();
    assert!(matches!(err, Error::NamesNotCovered { .. }), "{err}");
    assert!(store.issued("a.example.com").is_none());
}
