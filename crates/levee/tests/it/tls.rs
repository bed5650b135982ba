//! HTTPS (issue 21, first part): certificates chosen by SNI, HTTP/2 by ALPN, the scheme
//! in the cache key and to the backend, certificates reloaded by SIGHUP, a bad file
//! refused with exit 2, redirect_http and HSTS. Clients are real curl; certificates come
//! from a CA of the test's own (rcgen).

use std::path::{Path, PathBuf};
use std::process::Command;

use levee_test::{levee, tools, Origin, Reply};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A test CA; `pem` is what curl is told to trust.
pub(crate) struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
    pub(crate) der: Vec<u8>,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            der: cert.der().to_vec(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Writes a certificate for `names` and its key to `dir/stem.pem` and `.key`.
    pub(crate) fn issue(&self, dir: &Path, stem: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let (cert, key, _) = self.issue_with_spki(dir, stem, names);
        (cert, key)
    }

    /// As `issue`, and the base64 SHA-256 of the certificate's public key (what
    /// Chromium's `--ignore-certificate-errors-spki-list` takes).
    pub(crate) fn issue_with_spki(
        &self,
        dir: &Path,
        stem: &str,
        names: &[&str],
    ) -> (PathBuf, PathBuf, String) {
        use base64::Engine as _;
        use sha2::Digest as _;
        let params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (c, k) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        let spki = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(
            rcgen::PublicKeyData::subject_public_key_info(&key),
        ));
        (c, k, spki)
    }

    pub(crate) fn write(&self, dir: &Path, stem: &str) -> PathBuf {
        let p = dir.join(format!("{stem}.pem"));
        std::fs::write(&p, &self.pem).unwrap();
        p
    }
}

/// What curl got: status, HTTP version, headers (lowercase names), body.
pub(crate) struct Got {
    pub(crate) status: u16,
    pub(crate) version: String,
    headers: String,
    body: String,
}

impl Got {
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// `curl` over https to `host` (resolved to levee), trusting `ca`; extra args as given.
pub(crate) fn curl(
    host: &str,
    addr: std::net::SocketAddr,
    ca: &Path,
    path: &str,
    extra: &[&str],
) -> Got {
    let url = format!("https://{host}:{}{path}", addr.port());
    let resolve = format!("{host}:{}:127.0.0.1", addr.port());
    run_curl(
        &[
            &[
                "--resolve",
                &resolve,
                "--cacert",
                ca.to_str().unwrap(),
                &url,
            ][..],
            extra,
        ]
        .concat(),
    )
}

fn run_curl(args: &[&str]) -> Got {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-D",
            "-",
            "-w",
            "\n%{http_version}",
        ])
        .args(args)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "curl {args:?} failed: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (rest, version) = text.rsplit_once('\n').unwrap_or((&text, ""));
    let (head, body) = rest.split_once("\r\n\r\n").unwrap_or((rest, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Got {
        status,
        version: version.trim().to_string(),
        headers: head.to_string(),
        body: body.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sni_picks_each_sites_certificate_and_alpn_chooses_http2() {
    if tools::require(&tools::CURL).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("levee test CA");
    let (a_cert, a_key) = ca.issue(dir.path(), "a", &["a.test"]);
    let (b_cert, b_key) = ca.issue(dir.path(), "b", &["b.test"]);
    let ca_pem = ca.write(dir.path(), "ca");
    let origin = Origin::start(|r| {
        Reply::text(format!(
            "proto={}",
            r.header("x-forwarded-proto").unwrap_or("-")
        ))
        .header("cache-control", "max-age=60")
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--listen-tls", "127.0.0.1:0", "--hsts", "max-age=600"])
        .args(&[
            "--tls-cert",
            a_cert.to_str().unwrap(),
            "--tls-key",
            a_key.to_str().unwrap(),
        ])
        .args(&[
            "--tls-cert",
            b_cert.to_str().unwrap(),
            "--tls-key",
            b_key.to_str().unwrap(),
        ])
        .start();
    let tls = levee.tls_addr().await;
    // Each name gets its own certificate: curl checks the name against it.
    for host in ["a.test", "b.test"] {
        let got = curl(host, tls, &ca_pem, "/page", &["--http2"]);
        assert_eq!(got.status, 200, "{host}: {}", got.headers);
        assert_eq!(got.version, "2", "{host}: h2 by ALPN");
        assert_eq!(got.body, "proto=https", "the backend is told the scheme");
        assert_eq!(
            got.header("strict-transport-security").as_deref(),
            Some("max-age=600")
        );
    }
    let got = curl("a.test", tls, &ca_pem, "/page", &["--http1.1"]);
    assert_eq!(got.version, "1.1");
    assert_eq!(
        got.header("x-cache").as_deref(),
        Some("HIT"),
        "{}",
        got.headers
    );
    // The cleartext listener keeps serving, under its own key, without HSTS.
    let r = levee.get("/page").await;
    assert_eq!(
        r.x_cache(),
        "MISS",
        "http and https are two keys: {}",
        r.summary()
    );
    assert_eq!(r.text(), "proto=http");
    assert_eq!(r.header("strict-transport-security"), None);
    // Each certificate's expiry, for alerting.
    let metrics = levee.admin(levee_test::Req::get("/metrics")).await.text();
    let expiry: Vec<_> = metrics
        .lines()
        .filter(|l| l.starts_with("levee_tls_certificate_expiry_seconds{"))
        .collect();
    assert_eq!(expiry.len(), 2, "{metrics}");
    assert!(
        expiry.iter().any(|l| l.contains("names=\"a.test\"")),
        "{expiry:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_loads_renewed_certificates_for_new_handshakes() {
    if tools::require(&tools::CURL).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (old_ca, new_ca) = (Ca::new("old CA"), Ca::new("new CA"));
    let (cert, key) = old_ca.issue(dir.path(), "site", &["a.test"]);
    let (old_pem, new_pem) = (
        old_ca.write(dir.path(), "old"),
        new_ca.write(dir.path(), "new"),
    );
    let origin = Origin::fixed(|| Reply::text("ok"));
    let config = format!(
        "listen_tls = [\"127.0.0.1:0\"]\n[tls]\ncert = [{:?}]\nkey = [{:?}]\n",
        cert.display().to_string(),
        key.display().to_string()
    );
    let levee = levee!().backend(&origin.url()).config(&config).start();
    let tls = levee.tls_addr().await;
    assert_eq!(curl("a.test", tls, &old_pem, "/", &[]).status, 200);
    // Renewed in place (same file names, another issuer), then SIGHUP.
    new_ca.issue(dir.path(), "site", &["a.test"]);
    levee.signal("HUP");
    levee.wait_log("configuration reloaded").await;
    assert_eq!(curl("a.test", tls, &new_pem, "/", &[]).status, 200);
    // A key that does not match refuses the reload and keeps the certificate in use.
    let (_, other_key) = new_ca.issue(dir.path(), "other", &["a.test"]);
    std::fs::copy(&other_key, &key).unwrap();
    levee.signal("HUP");
    levee.wait_log("reload refused").await;
    assert!(
        levee.stderr().contains(&key.display().to_string()),
        "{}",
        levee.stderr()
    );
    assert_eq!(curl("a.test", tls, &new_pem, "/", &[]).status, 200);
}

#[test]
fn a_key_that_does_not_match_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("CA");
    let (cert, _) = ca.issue(dir.path(), "a", &["a.test"]);
    let (_, other_key) = ca.issue(dir.path(), "b", &["a.test"]);
    // `levee serve` with the mismatched pair and `extra`.
    let serve = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_levee"))
            .args(["serve", "--backend", "http://127.0.0.1:9"])
            .args(["--listen-tls", "127.0.0.1:0"])
            .args(["--tls-cert", cert.to_str().unwrap()])
            .args(["--tls-key", other_key.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = serve(&["--listen", "127.0.0.1:0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&other_key.display().to_string()),
        "{stderr}"
    );
    // --check reads the certificates too.
    let out = serve(&["--check"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_http_sends_cleartext_clients_to_https() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("CA");
    let (cert, key) = ca.issue(dir.path(), "a", &["a.test"]);
    let origin = Origin::fixed(|| Reply::text("ok"));
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--listen-tls", "127.0.0.1:0", "--redirect-http"])
        .args(&[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ])
        .start();
    let port = levee.tls_addr().await.port();
    let r = levee.get_with("/a/b?c=1", &[("host", "a.test")]).await;
    assert_eq!(r.status, 301, "{}", r.summary());
    assert_eq!(
        r.header("location").map(str::to_string),
        Some(format!("https://a.test:{port}/a/b?c=1"))
    );
    let r = levee_test::Req::new("POST", "/form")
        .header("host", "a.test:8080")
        .send(&levee)
        .await;
    assert_eq!(
        r.status,
        308,
        "the method and body are kept: {}",
        r.summary()
    );
    assert_eq!(origin.requests(), 0);
}

/// A renewal under load: clients keep making requests, each on a new TLS connection
/// (no resumption), while the certificate files are replaced and SIGHUP sent. No request
/// fails, and the handshakes after the reload get the new certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_swapped_under_load_fails_no_request() {
    use levee_tls::rustls::pki_types::pem::PemObject;
    use levee_tls::rustls::pki_types::{CertificateDer, ServerName};
    use levee_tls::rustls::{client::Resumption, RootCertStore};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = tempfile::tempdir().unwrap();
    let (old_ca, new_ca) = (Ca::new("old CA"), Ca::new("new CA"));
    let (cert, key) = old_ca.issue(dir.path(), "site", &["a.test"]);
    let origin = Origin::fixed(|| Reply::text("ok").header("cache-control", "max-age=60"));
    let config = format!(
        "listen_tls = [\"127.0.0.1:0\"]\n[tls]\ncert = [{:?}]\nkey = [{:?}]\n",
        cert.display().to_string(),
        key.display().to_string()
    );
    let levee = levee!().backend(&origin.url()).config(&config).start();
    let tls = levee.tls_addr().await;

    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from(old_ca.der.clone())).unwrap();
    roots.add(CertificateDer::from(new_ca.der.clone())).unwrap();
    let mut client = rustls_client(roots, levee_tls::rustls::DEFAULT_VERSIONS);
    // Every request a full handshake: a resumed session keeps the certificate it had.
    client.resumption = Resumption::disabled();
    let connector = levee_tls::tokio_rustls::TlsConnector::from(Arc::new(client));

    let (ok, failed, new_seen) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let new_leaf: Arc<std::sync::Mutex<Option<Vec<u8>>>> = Arc::default();
    let mut clients = Vec::new();
    for _ in 0..4 {
        let (connector, ok, failed, new_seen, stop, new_leaf) = (
            connector.clone(),
            ok.clone(),
            failed.clone(),
            new_seen.clone(),
            stop.clone(),
            new_leaf.clone(),
        );
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let one = async {
                    let tcp = tokio::net::TcpStream::connect(tls).await?;
                    let name = ServerName::try_from("a.test").unwrap();
                    let mut s = connector.connect(name, tcp).await?;
                    let leaf = s.get_ref().1.peer_certificates().map(|c| c[0].to_vec());
                    s.write_all(b"GET /page HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
                        .await?;
                    let mut buf = Vec::new();
                    let _ = s.read_to_end(&mut buf).await;
                    Ok::<_, std::io::Error>((buf, leaf))
                };
                match tokio::time::timeout(std::time::Duration::from_secs(5), one).await {
                    Ok(Ok((buf, leaf))) if buf.starts_with(b"HTTP/1.1 200") => {
                        ok.fetch_add(1, Ordering::SeqCst);
                        if leaf.is_some() && leaf == *new_leaf.lock().unwrap() {
                            new_seen.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }));
    }
    // Some load on the old certificate, then the renewal.
    let wait_for = |what: &Arc<AtomicUsize>, n: usize| {
        let what = what.clone();
        levee_test::eventually(std::time::Duration::from_secs(10), move || {
            what.load(Ordering::SeqCst) >= n
        })
    };
    assert!(wait_for(&ok, 50).await, "no load before the renewal");
    let pem = std::fs::read_to_string({
        new_ca.issue(dir.path(), "renewed", &["a.test"]);
        dir.path().join("renewed.pem")
    })
    .unwrap();
    *new_leaf.lock().unwrap() = Some(
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
            .to_vec(),
    );
    std::fs::copy(dir.path().join("renewed.pem"), &cert).unwrap();
    std::fs::copy(dir.path().join("renewed.key"), &key).unwrap();
    levee.signal("HUP");
    levee.wait_log("configuration reloaded").await;
    // Load goes on until many handshakes got the new certificate.
    assert!(
        wait_for(&new_seen, 50).await,
        "no handshake got the new certificate"
    );
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await.unwrap();
    }
    assert_eq!(
        failed.load(Ordering::SeqCst),
        0,
        "{} requests failed of {}",
        failed.load(Ordering::SeqCst),
        ok.load(Ordering::SeqCst)
    );
}

/// `[site.tls]`: each site brings its certificate; a name no site lists gets 421 over
/// TLS (the connection was made for another name) and 404 in cleartext.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_brings_its_certificate_and_unknown_hosts_get_421() {
    if tools::require(&tools::CURL).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("levee test CA");
    let (a_cert, a_key) = ca.issue(dir.path(), "a", &["a.test", "*.a.test"]);
    let (b_cert, b_key) = ca.issue(dir.path(), "b", &["b.test"]);
    let (x_cert, x_key) = ca.issue(dir.path(), "x", &["x.test"]);
    let ca_pem = ca.write(dir.path(), "ca");
    let a = Origin::fixed(|| Reply::text("site a"));
    let b = Origin::fixed(|| Reply::text("site b"));
    let config = format!(
        r#"
listen_tls = ["127.0.0.1:0"]
[tls]
cert = ["{x_cert}"]
key = ["{x_key}"]
[[site]]
hosts = ["a.test", "*.a.test"]
backend = "{a}"
[site.tls]
cert = "{a_cert}"
key = "{a_key}"
[[site]]
hosts = ["b.test", "x.test"]
backend = "{b}"
[site.tls]
cert = "{b_cert}"
key = "{b_key}"
"#,
        a = a.url(),
        b = b.url(),
        a_cert = a_cert.display(),
        a_key = a_key.display(),
        b_cert = b_cert.display(),
        b_key = b_key.display(),
        x_cert = x_cert.display(),
        x_key = x_key.display(),
    );
    let levee = levee!().config(&config).start();
    let tls = levee.tls_addr().await;
    for (host, body) in [
        ("a.test", "site a"),
        ("www.a.test", "site a"),
        ("b.test", "site b"),
        ("x.test", "site b"),
    ] {
        let got = curl(host, tls, &ca_pem, "/", &[]);
        assert_eq!((got.status, got.body.as_str()), (200, body), "{host}");
    }
    // A name no site lists: the default certificate (the first of [tls]) is presented,
    // and the request is refused as misdirected. -k: the name is not on it.
    let got = curl("nobody.test", tls, &ca_pem, "/", &["-k"]);
    assert_eq!(got.status, 421, "{}", got.headers);
    let r = levee_test::Req::get("/")
        .header("host", "nobody.test")
        .send(&levee)
        .await;
    assert_eq!(r.status, 404, "{}", r.summary());
}

/// Resumption across a reload (issue 35): a client that resumed before a SIGHUP resumes
/// after it too (the ticket key and session cache live in the certificate store, which a
/// reload keeps), whichever worker thread takes the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_tls_sessions_resumable() {
    use levee_tls::rustls::pki_types::{CertificateDer, ServerName};
    use levee_tls::rustls::{HandshakeKind, RootCertStore};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("resumption CA");
    let (cert, key) = ca.issue(dir.path(), "site", &["a.test"]);
    let origin = Origin::fixed(|| Reply::text("ok").header("cache-control", "max-age=60"));
    let config = format!(
        "workers = 2\nlisten_tls = [\"127.0.0.1:0\"]\n[tls]\ncert = [{:?}]\nkey = [{:?}]\n",
        cert.display().to_string(),
        key.display().to_string()
    );
    let levee = levee!().backend(&origin.url()).config(&config).start();
    let tls = levee.tls_addr().await;
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from(ca.der.clone())).unwrap();
    // TLS 1.3 and 1.2 (tickets, and the session cache for 1.2).
    for version in [
        &levee_tls::rustls::version::TLS13,
        &levee_tls::rustls::version::TLS12,
    ] {
        let client = rustls_client(roots.clone(), &[version]);
        let connector = levee_tls::tokio_rustls::TlsConnector::from(Arc::new(client));
        let get = || async {
            let tcp = tokio::net::TcpStream::connect(tls).await.unwrap();
            let name = ServerName::try_from("a.test").unwrap();
            let mut s = connector.connect(name, tcp).await.unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf).await;
            assert!(
                buf.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&buf)
            );
            s.get_ref().1.handshake_kind()
        };
        assert_eq!(get().await, Some(HandshakeKind::Full));
        // Several times: the connections spread over both worker threads.
        for _ in 0..4 {
            assert_eq!(
                get().await,
                Some(HandshakeKind::Resumed),
                "{:?}",
                version.version
            );
        }
        let reloads = levee.stderr().matches("configuration reloaded").count();
        levee.signal("HUP");
        assert!(
            levee_test::eventually(std::time::Duration::from_secs(5), || {
                levee.stderr().matches("configuration reloaded").count() > reloads
            })
            .await,
            "{}",
            levee.stderr()
        );
        for _ in 0..4 {
            assert_eq!(
                get().await,
                Some(HandshakeKind::Resumed),
                "{:?} after a reload",
                version.version
            );
        }
    }
}

/// A rustls client (on ring, as levee's own clients are) trusting `roots`.
fn rustls_client(
    roots: levee_tls::rustls::RootCertStore,
    versions: &[&'static levee_tls::rustls::SupportedProtocolVersion],
) -> levee_tls::rustls::ClientConfig {
    levee_tls::rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        levee_tls::rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth()
}
