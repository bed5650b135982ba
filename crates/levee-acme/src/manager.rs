//! The manager: which names need a certificate, the stored ones served at start, and the
//! loop that orders, renews and retries, one order at a time (gentle on the CA's rate
//! limits; each order bounded in time), until shutdown.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use instant_acme::{Account, NewAccount};
use levee_tls::rustls::pki_types::pem::PemObject;
use levee_tls::rustls::pki_types::CertificateDer;
use levee_tls::CertStore;
use tokio::sync::watch;

use crate::client::Client;
use crate::error::Error;
use crate::order::{self, Answerers};
use crate::schedule::{backoff, renew_at, until};
use crate::storage::Storage;
use crate::{Config, Tokens, HTTP01_PREFIX};

/// One order, from the new order to the stored certificate, at most.
const ORDER_TIMEOUT: Duration = Duration::from_secs(180);

/// Keeps a certificate for each of its names; cheap to clone (shared state).
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    certs: Arc<CertStore>,
    storage: Storage,
    client: Client,
    tokens: Tokens,
    /// Per name: when to order next (Unix seconds), failures in a row.
    start: Vec<Due>,
    orders: AtomicU64,
    issued: AtomicU64,
    failures: AtomicU64,
}

#[derive(Clone)]
struct Due {
    name: String,
    at: i64,
    failures: u32,
}

impl Manager {
    /// Opens `config.dir`, checks `config.ca`, keeps the names ACME can serve (saying
    /// why it leaves any out) and serves every stored certificate that is still valid.
    /// No network yet: that is [`run`](Self::run)'s.
    pub fn new(mut config: Config, certs: Arc<CertStore>) -> Result<Manager, Error> {
        let storage = Storage::open(&config.dir)?;
        let client = Client::new(config.ca.as_deref())?;
        config.names = usable_names(&config.names, &certs);
        let now = unix(SystemTime::now());
        let mut start = Vec::new();
        for name in &config.names {
            let at = match load_stored(&storage, &certs, name, now) {
                Some((not_before, not_after)) => renew_at(not_before, not_after),
                None => now,
            };
            start.push(Due {
                name: name.clone(),
                at,
                failures: 0,
            });
        }
        if config.names.is_empty() {
            eprintln!(
                "levee: ACME has no name to get a certificate for: list the hosts of each \
                 site (hosts = [...]); names covered by certificate files, wildcards and IP \
                 addresses are not ordered"
            );
        }
        Ok(Manager {
            inner: Arc::new(Inner {
                config,
                certs,
                storage,
                client,
                tokens: Tokens::default(),
                start,
                orders: AtomicU64::new(0),
                issued: AtomicU64::new(0),
                failures: AtomicU64::new(0),
            }),
        })
    }

    /// The names it keeps certificates for.
    pub fn names(&self) -> &[String] {
        &self.inner.config.names
    }

    /// The key authorization for a pending HTTP-01 `token`, the body of
    /// `GET /.well-known/acme-challenge/TOKEN`; `None` (404) for any other token.
    pub fn http01(&self, token: &str) -> Option<String> {
        self.inner.tokens.get(token)
    }

    /// The HTTP-01 answer for a request path: `None` when the path is not under
    /// [`HTTP01_PREFIX`], `Some(None)` for an unknown token.
    pub fn http01_path(&self, path: &str) -> Option<Option<String>> {
        path.strip_prefix(HTTP01_PREFIX).map(|t| self.http01(t))
    }

    /// Orders placed since start.
    pub fn orders(&self) -> u64 {
        self.inner.orders.load(Ordering::Relaxed)
    }

    /// Certificates issued and stored since start.
    pub fn issued(&self) -> u64 {
        self.inner.issued.load(Ordering::Relaxed)
    }

    /// Orders (or account registrations) that failed since start.
    pub fn failures(&self) -> u64 {
        self.inner.failures.load(Ordering::Relaxed)
    }

    /// Orders what is due, one at a time, until `stop` changes (or its sender goes).
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let inner = &self.inner;
        let mut due = inner.start.clone();
        let mut account: Option<Account> = None;
        loop {
            let Some(next) = due.iter_mut().min_by_key(|d| d.at) else {
                let _ = stop.changed().await;
                return;
            };
            let wait = until(unix(SystemTime::now()), next.at);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return,
            }
            let name = next.name.clone();
            let attempt = tokio::time::timeout(ORDER_TIMEOUT, inner.order(&mut account, &name));
            let result = tokio::select! {
                r = attempt => r.unwrap_or_else(|_| Err(Error::Timeout(name.clone(), ORDER_TIMEOUT))),
                _ = stop.changed() => return,
            };
            let now = unix(SystemTime::now());
            match result {
                Ok((not_before, not_after)) => {
                    next.failures = 0;
                    next.at = renew_at(not_before, not_after);
                }
                Err(e) => {
                    inner.failures.fetch_add(1, Ordering::Relaxed);
                    next.failures += 1;
                    let delay = backoff(next.failures);
                    next.at = now.saturating_add(i64::try_from(delay.as_secs()).unwrap_or(0));
                    let keeping = match inner.certs.issued(&name) {
                        Some(_) => "; the certificate in use stays meanwhile",
                        None => "",
                    };
                    tracing::warn!(name, error = %e, retry_in = ?delay, "ACME order failed");
                    eprintln!(
                        "levee: no certificate for {name} from ACME: {e}; retrying in {}s{keeping}",
                        delay.as_secs()
                    );
                }
            }
        }
    }
}

impl Inner {
    /// One order for `name`, stored and served: the new certificate's validity.
    async fn order(&self, account: &mut Option<Account>, name: &str) -> Result<(i64, i64), Error> {
        let acct = match account {
            Some(a) => a.clone(),
            None => {
                let a = self.account().await?;
                *account = Some(a.clone());
                a
            }
        };
        self.orders.fetch_add(1, Ordering::Relaxed);
        tracing::info!(name, "ACME order");
        let answerers = Answerers {
            certs: &self.certs,
            tokens: &self.tokens,
            prefer: self.config.challenge,
        };
        let issued = order::issue(&acct, name, &answerers).await?;
        let (not_before, not_after, until_text) = validity(&issued.chain_pem).ok_or_else(|| {
            Error::Order(format!(
                "the ACME server sent no readable certificate for {name}"
            ))
        })?;
        let pair = self
            .storage
            .save(name, &issued.chain_pem, &issued.key_pem)?;
        self.certs
            .set_issued(name, &pair)
            .map_err(|cause| Error::Certificate {
                name: name.to_owned(),
                cause,
            })?;
        self.issued.fetch_add(1, Ordering::Relaxed);
        tracing::info!(name, not_after = %until_text, "certificate issued by ACME");
        eprintln!("levee: certificate for {name} issued by ACME, valid until {until_text}");
        Ok((not_before, not_after))
    }

    /// The stored account for this server, or a new one (stored).
    async fn account(&self) -> Result<Account, Error> {
        let directory = &self.config.directory;
        let builder = || Account::builder_with_http(Box::new(self.client.clone()));
        if let Some(creds) = self.storage.account(directory) {
            return Ok(builder().from_credentials(creds).await?);
        }
        let contact = format!("mailto:{}", self.config.email);
        let (account, creds) = builder()
            .create(
                &NewAccount {
                    contact: &[&contact],
                    terms_of_service_agreed: true,
                    only_return_existing: false,
                },
                directory.clone(),
                None,
            )
            .await?;
        self.storage.save_account(directory, &creds)?;
        tracing::info!(directory, id = account.id(), "ACME account registered");
        Ok(account)
    }
}

/// The names ACME can get certificates for, lowercase, each once; the others said why.
fn usable_names(names: &[String], certs: &CertStore) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in names {
        let name = raw.trim_end_matches('.').to_ascii_lowercase();
        if out.contains(&name) || certs.covers(&name) {
            continue;
        }
        let why_not = if name.starts_with("*.") {
            Some("a wildcard needs the DNS-01 challenge, which levee does not answer; give a certificate file for it")
        } else if name.parse::<std::net::IpAddr>().is_ok() {
            Some("an IP address, not a name")
        } else if name.is_empty()
            || name.starts_with(['.', '-'])
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            Some("not a DNS name")
        } else {
            None
        };
        match why_not {
            Some(why) => eprintln!("levee: ACME leaves out {raw}: {why}"),
            None => out.push(name),
        }
    }
    out
}

/// Serves the stored certificate of `name` if it is still valid: its validity.
fn load_stored(storage: &Storage, certs: &CertStore, name: &str, now: i64) -> Option<(i64, i64)> {
    if !storage.has(name) {
        return None;
    }
    let pair = storage.pair(name);
    let pem = std::fs::read_to_string(&pair.cert).ok()?;
    let (not_before, not_after, until_text) = validity(&pem)?;
    if not_after <= now {
        eprintln!("levee: the stored certificate for {name} has expired; ordering a new one");
        return None;
    }
    match certs.set_issued(name, &pair) {
        Ok(_) => {
            eprintln!(
                "levee: certificate for {name} loaded from {}, valid until {until_text}",
                pair.cert.display()
            );
            Some((not_before, not_after))
        }
        Err(e) => {
            eprintln!("levee: the stored certificate for {name} cannot be served ({e}); ordering a new one");
            None
        }
    }
}

/// The leaf's notBefore and notAfter (Unix seconds), and notAfter as text.
fn validity(chain_pem: &str) -> Option<(i64, i64, String)> {
    let leaf = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .next()?
        .ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&leaf).ok()?;
    let v = cert.validity();
    Some((
        v.not_before.timestamp(),
        v.not_after.timestamp(),
        v.not_after.to_string(),
    ))
}

fn unix(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_dns_names_not_covered_by_files_are_ordered() {
        let certs = CertStore::load(
            &[],
            levee_tls::Settings {
                runtime_certificates: true,
                ..Default::default()
            },
        )
        .unwrap();
        let names: Vec<String> = [
            "A.example.com.",
            "a.example.com",
            "*.example.com",
            "127.0.0.1",
            "bad/name",
            "b.example.com",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            usable_names(&names, &certs),
            ["a.example.com", "b.example.com"]
        );
    }
}
