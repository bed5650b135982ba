//! ACME (RFC 8555) against Pebble, offline: levee starts with an HTTPS listener and no
//! certificate file, gets one for its site's host from Pebble (whose DNS server says
//! 127.0.0.1 for every name) within 30 s, serves it (curl checks the chain against
//! Pebble's root), stores it privately and serves it again after a restart without a new
//! order. Both challenges: TLS-ALPN-01 on the HTTPS listener, HTTP-01 on the cleartext
//! one (whose path answers pending tokens only). A name no site lists never gets ordered.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use levee_test::pebble::free_port;
use levee_test::{levee, require, tools, Levee, Origin, Pebble, Reply, Req};

const NAME: &str = "a.levee.test";
const ISSUED: &str = "levee_acme_certificates_issued_total";
const ORDERS: &str = "levee_acme_orders_total";

/// Pebble, the ports it validates on (levee's), the directory levee keeps ACME in, and
/// the site's backend.
struct Setup {
    pebble: Pebble,
    http_port: u16,
    tls_port: u16,
    acme_dir: tempfile::TempDir,
    origin: Origin,
}

impl Setup {
    fn new() -> Setup {
        let (http_port, tls_port) = (free_port(), free_port());
        Setup {
            pebble: Pebble::start(http_port, tls_port),
            http_port,
            tls_port,
            acme_dir: tempfile::tempdir().unwrap(),
            origin: Origin::start(|_| Reply::text("from the origin")),
        }
    }

    /// levee with no certificate file, ACME on, one site for NAME.
    fn levee(&self, challenge: &str) -> Levee {
        let config = format!(
            "[tls]\nacme_email = \"admin@levee.test\"\nacme_directory = \"{}\"\n\
             acme_dir = \"{}\"\nacme_ca = \"{}\"\nacme_challenge = \"{challenge}\"\n\n\
             [[site]]\nhosts = [\"{NAME}\"]\n",
            self.pebble.directory(),
            self.acme_dir.path().display(),
            self.pebble.listener_ca().display(),
        );
        levee!()
            .backend(&self.origin.url())
            .args(&["--listen", &format!("127.0.0.1:{}", self.http_port)])
            .args(&["--listen-tls", &format!("127.0.0.1:{}", self.tls_port)])
            .config(&config)
            .start()
    }

    /// curl over https to `name` at levee's TLS port, trusting only Pebble's issuing
    /// root: Ok(body) when the certificate levee serves chains to it.
    fn curl(&self, name: &str) -> Result<String, String> {
        let root = self.pebble.issuing_root_file();
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "10", "--cacert"])
            .arg(&root)
            .arg("--resolve")
            .arg(format!("{name}:{}:127.0.0.1", self.tls_port))
            .arg(format!("https://{name}:{}/", self.tls_port))
            .output()
            .expect("run curl");
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    async fn wait_issued(&self, levee: &Levee) {
        levee
            .wait_metric_within(ISSUED, Duration::from_secs(30), |n| n >= 1.0)
            .await;
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_is_issued_by_pebble_within_30s_of_a_start_with_none() {
    require!(tools::PEBBLE);
    require!(tools::CURL);
    let setup = Setup::new();
    let levee = setup.levee("tls-alpn-01");
    setup.wait_issued(&levee).await;
    let body = setup.curl(NAME).unwrap_or_else(|e| {
        panic!(
            "curl: {e}\nlevee:\n{}\n{}",
            levee.stderr(),
            setup.pebble.log()
        )
    });
    assert_eq!(body, "from the origin");
    assert!(
        levee
            .stderr()
            .contains("levee: certificate for a.levee.test issued by ACME, valid until"),
        "{}",
        levee.stderr()
    );
    assert_eq!(levee.metric(ORDERS).await, 1.0);

    // Stored privately.
    let dir = setup.acme_dir.path();
    assert_eq!(mode(dir), 0o700);
    for file in ["a.levee.test.crt", "a.levee.test.key"] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    let accounts = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("account-"))
        .map(|e| mode(&e.path()))
        .collect::<Vec<_>>();
    assert_eq!(accounts, [0o600], "one account file, private");

    // A client asking for a name no site lists gets no certificate for it, and levee
    // orders nothing for it.
    assert!(setup.curl("b.levee.test").is_err());
    assert_eq!(levee.metric(ORDERS).await, 1.0);
    assert!(!dir.join("b.levee.test.crt").exists());
    drop(levee);

    // A restart serves the stored certificate at once, without a new order.
    let levee = setup.levee("tls-alpn-01");
    assert_eq!(setup.curl(NAME).as_deref(), Ok("from the origin"));
    assert!(
        levee
            .stderr()
            .contains("certificate for a.levee.test loaded from"),
        "{}",
        levee.stderr()
    );
    assert_eq!(levee.metric(ORDERS).await, 0.0);
    assert_eq!(levee.metric(ISSUED).await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_01_is_answered_on_the_cleartext_listener_for_pending_tokens_only() {
    require!(tools::PEBBLE);
    require!(tools::CURL);
    let setup = Setup::new();
    let levee = setup.levee("http-01");
    let cleartext = std::net::SocketAddr::from(([127, 0, 0, 1], setup.http_port));
    let unknown = Req::get("/.well-known/acme-challenge/no-such-token")
        .header("host", NAME)
        .send_to(cleartext)
        .await;
    assert_eq!(unknown.status, 404, "{}", unknown.summary());
    setup.wait_issued(&levee).await;
    assert_eq!(setup.curl(NAME).as_deref(), Ok("from the origin"));
    // Pebble fetched the token from levee, never from the backend.
    assert_eq!(
        setup
            .origin
            .requests_for("/.well-known/acme-challenge/no-such-token"),
        0
    );
    assert_eq!(setup.origin.requests(), 1, "only curl's request");
    assert_eq!(levee.metric(ORDERS).await, 1.0);
}
