//! Real handshakes against the store's acceptor: which certificate each name gets,
//! what no name or an unknown one gets, ALPN, protocol versions, session resumption.

use levee_tls::rustls::{self, HandshakeKind, ProtocolVersion};
use levee_tls::tokio_rustls::TlsAcceptor;
use levee_tls::{CertStore, Settings, UnknownName, DEFAULT_ALPN};

use crate::fixtures::{handshake, tls_error, Ca, Client, Dir, Leaf};

/// A store over three certificates: `a.example.com` (the default, being first),
/// `b.example.com`, and `*.example.org` with `exact.example.org` on a fourth.
struct Sites {
    ca: Ca,
    a: Leaf,
    b: Leaf,
    wild: Leaf,
    exact: Leaf,
    _dir: Dir,
}

impl Sites {
    fn new() -> Sites {
        let (ca, dir) = (Ca::new(), Dir::new());
        let a = ca.issue(&["a.example.com"]);
        let b = ca.issue(&["b.example.com"]);
        let wild = ca.issue(&["*.example.org"]);
        let exact = ca.issue(&["exact.example.org"]);
        Sites {
            ca,
            a,
            b,
            wild,
            exact,
            _dir: dir,
        }
    }

    fn store(&self, settings: Settings) -> CertStore {
        let dir = &self._dir;
        // The wildcard before the exact name: the exact one must still win.
        let pairs = [
            dir.pair("a", &self.a),
            dir.pair("b", &self.b),
            dir.pair("wild", &self.wild),
            dir.pair("exact", &self.exact),
        ];
        CertStore::load(&pairs, settings).unwrap()
    }

    fn acceptor(&self) -> TlsAcceptor {
        self.store(Settings::default()).acceptor(DEFAULT_ALPN)
    }
}

#[tokio::test]
async fn each_name_gets_its_own_certificate() {
    let sites = Sites::new();
    let acceptor = sites.acceptor();
    let client = Client::new(&sites.ca, &[]);
    let a = handshake(&acceptor, &client, "a.example.com")
        .await
        .unwrap();
    assert_eq!(a.cert, sites.a.der);
    let b = handshake(&acceptor, &client, "b.example.com")
        .await
        .unwrap();
    assert_eq!(b.cert, sites.b.der);
}

#[tokio::test]
async fn a_wildcard_serves_its_subdomains_and_an_exact_name_beats_it() {
    let sites = Sites::new();
    let acceptor = sites.acceptor();
    let client = Client::new(&sites.ca, &[]);
    let shop = handshake(&acceptor, &client, "shop.example.org")
        .await
        .unwrap();
    assert_eq!(shop.cert, sites.wild.der);
    let exact = handshake(&acceptor, &client, "exact.example.org")
        .await
        .unwrap();
    assert_eq!(exact.cert, sites.exact.der);
}

#[tokio::test]
async fn a_client_without_sni_gets_the_default_certificate() {
    let sites = Sites::new();
    let acceptor = sites.acceptor();
    // The client would check b's name; it gets a's, the first pair's.
    let client = Client::any_name(&sites.ca).without_sni();
    let got = handshake(&acceptor, &client, "b.example.com")
        .await
        .unwrap();
    assert_eq!(got.cert, sites.a.der);
}

#[tokio::test]
async fn an_unknown_name_gets_the_default_certificate_by_default() {
    let sites = Sites::new();
    let acceptor = sites.acceptor();
    let got = handshake(
        &acceptor,
        &Client::any_name(&sites.ca),
        "unknown.example.net",
    )
    .await
    .unwrap();
    assert_eq!(got.cert, sites.a.der);

    // A client that checks names, as browsers do, refuses it.
    let strict = handshake(
        &acceptor,
        &Client::new(&sites.ca, &[]),
        "unknown.example.net",
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            tls_error(&strict.client),
            Some(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. }
            ))
        ),
        "{strict:?}"
    );
}

#[tokio::test]
async fn an_unknown_name_fails_the_handshake_when_so_set() {
    let sites = Sites::new();
    let settings = Settings {
        unknown_name: UnknownName::Refuse,
        ..Settings::default()
    };
    let acceptor = sites.store(settings).acceptor(DEFAULT_ALPN);
    let client = Client::any_name(&sites.ca);

    let failed = handshake(&acceptor, &client, "unknown.example.net")
        .await
        .unwrap_err();
    assert!(
        matches!(tls_error(&failed.server), Some(rustls::Error::General(m)) if m.contains("no server certificate")),
        "{failed:?}"
    );
    assert!(
        matches!(
            tls_error(&failed.client),
            Some(rustls::Error::AlertReceived(
                rustls::AlertDescription::AccessDenied
            ))
        ),
        "{failed:?}"
    );

    // Known names, and clients that send no name, are served as before.
    let b = handshake(&acceptor, &client, "b.example.com")
        .await
        .unwrap();
    assert_eq!(b.cert, sites.b.der);
    let no_sni = handshake(&acceptor, &client.without_sni(), "b.example.com")
        .await
        .unwrap();
    assert_eq!(no_sni.cert, sites.a.der);
}

#[tokio::test]
async fn alpn_picks_h2_when_offered_and_http_1_1_otherwise() {
    let sites = Sites::new();
    let acceptor = sites.acceptor();
    let both = Client::new(&sites.ca, &[b"http/1.1", b"h2"]);
    let got = handshake(&acceptor, &both, "a.example.com").await.unwrap();
    assert_eq!(
        got.alpn.as_deref(),
        Some(&b"h2"[..]),
        "the server's order wins"
    );

    let h1 = Client::new(&sites.ca, &[b"http/1.1"]);
    let got = handshake(&acceptor, &h1, "a.example.com").await.unwrap();
    assert_eq!(got.alpn.as_deref(), Some(&b"http/1.1"[..]));

    let none = Client::new(&sites.ca, &[]);
    let got = handshake(&acceptor, &none, "a.example.com").await.unwrap();
    assert_eq!(got.alpn, None);
}

#[tokio::test]
async fn a_listener_may_offer_its_own_alpn_list() {
    let sites = Sites::new();
    let acceptor = sites.store(Settings::default()).acceptor(&[b"http/1.1"]);
    let both = Client::new(&sites.ca, &[b"h2", b"http/1.1"]);
    let got = handshake(&acceptor, &both, "a.example.com").await.unwrap();
    assert_eq!(got.alpn.as_deref(), Some(&b"http/1.1"[..]));
}

#[tokio::test]
async fn tls_1_2_and_1_3_are_both_served() {
    let sites = Sites::new();
    let acceptor = sites.acceptor();
    let v12 = Client::versions(&sites.ca, &[&rustls::version::TLS12]);
    let got = handshake(&acceptor, &v12, "a.example.com").await.unwrap();
    assert_eq!(got.version, ProtocolVersion::TLSv1_2);
    let v13 = Client::versions(&sites.ca, &[&rustls::version::TLS13]);
    let got = handshake(&acceptor, &v13, "a.example.com").await.unwrap();
    assert_eq!(got.version, ProtocolVersion::TLSv1_3);
}

#[tokio::test]
async fn a_returning_client_resumes_its_session() {
    let sites = Sites::new();
    let acceptor = sites.acceptor();
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        // One client config: it keeps the tickets and session IDs it was given.
        let client = Client::versions(&sites.ca, &[version]);
        let first = handshake(&acceptor, &client, "a.example.com")
            .await
            .unwrap();
        assert_eq!(first.kind, HandshakeKind::Full, "{:?}", version.version);
        let again = handshake(&acceptor, &client, "a.example.com")
            .await
            .unwrap();
        assert_eq!(again.kind, HandshakeKind::Resumed, "{:?}", version.version);
        assert_eq!(again.version, version.version);
        assert_eq!(again.cert, sites.a.der);
    }
}

#[tokio::test]
async fn the_earlier_pair_keeps_a_name_two_certificates_share() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let first = ca.issue(&["a.example.com"]);
    let second = ca.issue(&["a.example.com", "b.example.com"]);
    let pairs = [dir.pair("first", &first), dir.pair("second", &second)];
    let acceptor = CertStore::load(&pairs, Settings::default())
        .unwrap()
        .acceptor(DEFAULT_ALPN);
    let client = Client::new(&ca, &[]);
    let a = handshake(&acceptor, &client, "a.example.com")
        .await
        .unwrap();
    assert_eq!(a.cert, first.der);
    let b = handshake(&acceptor, &client, "b.example.com")
        .await
        .unwrap();
    assert_eq!(b.cert, second.der);
}
