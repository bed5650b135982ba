//! Protocol versions from a client that still speaks the old ones: rustls has no TLS 1.1
//! client, so `openssl s_client` offers TLS 1.0 and 1.1 and the server must refuse both,
//! while the same client with TLS 1.2 is served (so a refusal is the server's doing, not
//! the client's). rustls stops at the first thing a pre-1.2 hello lacks, its
//! signature_algorithms extension: the server sees `PeerIncompatible`, the client a
//! handshake failure alert.

use std::process::Stdio;
use std::time::Duration;

use levee_tls::rustls;
use levee_tls::{CertStore, Settings, DEFAULT_ALPN};
use tokio::net::TcpListener;
use tokio::process::Command;

use crate::fixtures::{tls_error, Ca, Dir};

/// What the server and `s_client` made of one connection.
struct Outcome {
    server: std::io::Result<()>,
    client_ok: bool,
    client_output: String,
}

/// Whether openssl is here; a missing one fails the test unless
/// `LEVEE_TEST_SKIP_MISSING` names it (or `all`), as levee-test's tools do.
fn have_openssl() -> bool {
    let found = std::process::Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return true;
    }
    let skip = std::env::var("LEVEE_TEST_SKIP_MISSING").unwrap_or_default();
    if skip
        .split(',')
        .any(|t| t.trim() == "openssl" || t.trim() == "all")
    {
        eprintln!("openssl is missing: test skipped (LEVEE_TEST_SKIP_MISSING)");
        return false;
    }
    panic!("openssl is missing: apt-get install -y openssl (or LEVEE_TEST_SKIP_MISSING=openssl)");
}

async fn s_client(store: &CertStore, version_flag: &str) -> Outcome {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = store.acceptor(DEFAULT_ALPN);
    let server = async {
        let (tcp, _) = listener.accept().await?;
        acceptor.accept(tcp).await.map(drop)
    };
    let client = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", "a.example.com", version_flag])
        // TLS 1.0/1.1 ciphers sit below the security levels distributions configure:
        // lower it, so the client sends its hello and the server is what refuses it.
        .args(["-cipher", "DEFAULT@SECLEVEL=0"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    // A deadline, not a pause: a hung handshake fails the test instead of hanging it.
    let (server, client) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(server, client)
    })
    .await
    .expect("openssl s_client hung");
    let client = client.unwrap();
    Outcome {
        server,
        client_ok: client.status.success(),
        client_output: format!(
            "{}{}",
            String::from_utf8_lossy(&client.stdout),
            String::from_utf8_lossy(&client.stderr)
        ),
    }
}

#[tokio::test]
async fn tls_1_0_and_1_1_are_refused_and_1_2_is_served() {
    if !have_openssl() {
        return;
    }
    let (ca, dir) = (Ca::new(), Dir::new());
    let pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    let store = CertStore::load(&[pair], Settings::default()).unwrap();

    for old in ["-tls1", "-tls1_1"] {
        let got = s_client(&store, old).await;
        let err = got.server.as_ref().expect_err(old);
        assert!(
            matches!(tls_error(err), Some(rustls::Error::PeerIncompatible(_))),
            "{old}: the server should refuse the version: {err:?}"
        );
        assert!(!got.client_ok, "{old}: {}", got.client_output);
        // rustls answers an alert (handshake failure or protocol version), and no
        // cipher was agreed.
        assert!(
            got.client_output.contains("SSL alert number")
                && got.client_output.contains("Cipher is (NONE)"),
            "{old}: {}",
            got.client_output
        );
    }

    let got = s_client(&store, "-tls1_2").await;
    assert!(
        got.server.is_ok(),
        "{:?}\n{}",
        got.server,
        got.client_output
    );
    assert!(
        got.client_output.contains("Protocol  : TLSv1.2")
            || got.client_output.contains("Protocol: TLSv1.2"),
        "{}",
        got.client_output
    );
}
