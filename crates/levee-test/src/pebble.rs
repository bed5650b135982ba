//! Pebble, Let's Encrypt's ACME test server (Debian's `pebble` package), with
//! `pebble-challtestsrv` as its DNS server answering 127.0.0.1 for every name, so that
//! it validates `a.levee.test` against a levee on this machine. Everything offline, on
//! ephemeral ports; both processes are killed and waited for when the guard drops,
//! also when the test fails.
//!
//! Pebble's own HTTPS listener gets a certificate from a CA the guard makes
//! ([`Pebble::listener_ca`]: what levee's `acme_ca` trusts); the certificates Pebble
//! issues chain to another root, made by Pebble at start ([`Pebble::issuing_root_pem`]).

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

/// How long Pebble and its DNS server may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(20);

pub use crate::ports::free_port;

/// A running Pebble and its DNS server.
pub struct Pebble {
    pebble: Child,
    dns: Child,
    dir: tempfile::TempDir,
    acme: SocketAddr,
    management: SocketAddr,
}

impl Pebble {
    /// Pebble validating HTTP-01 on `http_port` and TLS-ALPN-01 on `tls_port` of
    /// 127.0.0.1 (levee's listeners). Panics if it does not start.
    pub fn start(http_port: u16, tls_port: u16) -> Pebble {
        let dir = tempfile::tempdir().unwrap();
        write_listener_cert(dir.path());
        let (acme, management) = (free_port(), free_port());
        let (dns_port, dns_management) = (free_port(), free_port());
        let config = serde_json::json!({
            "pebble": {
                "listenAddress": format!("127.0.0.1:{acme}"),
                "managementListenAddress": format!("127.0.0.1:{management}"),
                "certificate": dir.path().join("listener.pem"),
                "privateKey": dir.path().join("listener.key"),
                "httpPort": http_port,
                "tlsPort": tls_port,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": false,
            }
        });
        let config_file = dir.path().join("pebble.json");
        std::fs::write(&config_file, config.to_string()).unwrap();
        let log = |name: &str| std::fs::File::create(dir.path().join(name)).unwrap();
        let dns_addr = format!("127.0.0.1:{dns_port}");
        let dns = Command::new("/usr/bin/pebble-challtestsrv")
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .args(["-dns01", &dns_addr])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-management", &format!("127.0.0.1:{dns_management}")])
            .stdin(Stdio::null())
            .stdout(log("dns.log"))
            .stderr(log("dns.err"))
            .spawn()
            .expect("start pebble-challtestsrv");
        let pebble = Command::new("/usr/bin/pebble")
            .arg("-config")
            .arg(&config_file)
            .args(["-dnsserver", &dns_addr])
            // Deterministic: validate at once, never reject a good nonce, no reused
            // authorizations, one root.
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .env("PEBBLE_ALTERNATE_ROOTS", "0")
            .stdin(Stdio::null())
            .stdout(log("pebble.log"))
            .stderr(log("pebble.err"))
            .spawn()
            .expect("start pebble");
        let p = Pebble {
            pebble,
            dns,
            dir,
            acme: SocketAddr::from(([127, 0, 0, 1], acme)),
            management: SocketAddr::from(([127, 0, 0, 1], management)),
        };
        for addr in [
            p.acme,
            p.management,
            SocketAddr::from(([127, 0, 0, 1], dns_management)),
        ] {
            wait_listening(addr, &p);
        }
        p
    }

    /// The ACME directory URL, for levee's `acme_directory`.
    pub fn directory(&self) -> String {
        format!("https://{}/dir", self.acme)
    }

    /// The PEM file of the CA that signed Pebble's own HTTPS certificate: levee's
    /// `acme_ca`.
    pub fn listener_ca(&self) -> PathBuf {
        self.dir.path().join("listener-ca.pem")
    }

    /// The root Pebble issues under (its management listener's `/roots/0`), as PEM.
    pub fn issuing_root_pem(&self) -> String {
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "10", "--cacert"])
            .arg(self.listener_ca())
            .arg(format!("https://{}/roots/0", self.management))
            .output()
            .expect("run curl");
        assert!(
            out.status.success(),
            "cannot fetch Pebble's root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Writes the issuing root to a file in Pebble's directory and returns its path.
    pub fn issuing_root_file(&self) -> PathBuf {
        let path = self.dir.path().join("issuing-root.pem");
        std::fs::write(&path, self.issuing_root_pem()).unwrap();
        path
    }

    /// What Pebble and its DNS server wrote, for a failing test's message.
    pub fn log(&self) -> String {
        let read =
            |name: &str| std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        format!(
            "--- pebble ---\n{}{}\n--- challtestsrv ---\n{}{}",
            read("pebble.log"),
            read("pebble.err"),
            read("dns.log"),
            read("dns.err")
        )
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for child in [&mut self.pebble, &mut self.dns] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls until `addr` accepts a connection; panics with the logs if a process exits or
/// time runs out.
fn wait_listening(addr: SocketAddr, p: &Pebble) {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Pebble did not listen on {addr} within {START_TIMEOUT:?}:\n{}",
            p.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A CA of the test's own and a certificate from it for 127.0.0.1 and localhost: Pebble's
/// HTTPS listener. Writes listener-ca.pem, listener.pem, listener.key.
fn write_listener_cert(dir: &Path) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "levee test: Pebble's listener CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("listener-ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("listener.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("listener.key"), key.serialize_pem()).unwrap();
}
