//! One order for one name (RFC 8555 §7.4): authorizations, the challenge answered by
//! levee itself (TLS-ALPN-01 through the certificate resolver, HTTP-01 through the token
//! map the proxy reads), finalization with a new key's signing request, the chain back.
//! Whatever way an order ends, its challenges are withdrawn (`Withdraw`).

use std::sync::Arc;
use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, ChallengeType, Identifier, NewOrder, OrderStatus, RetryPolicy,
};
use levee_tls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use levee_tls::rustls::sign::CertifiedKey;
use levee_tls::CertStore;
use rcgen::{CertificateParams, CustomExtension, DistinguishedName, KeyPair};

use crate::error::Error;
use crate::{Challenge, Tokens};

/// How long the CA may take to validate, then to issue, polled with a growing delay.
fn polling() -> RetryPolicy {
    RetryPolicy::new()
        .initial_delay(Duration::from_millis(250))
        .backoff(1.5)
        .timeout(Duration::from_secs(90))
}

/// A new certificate: the chain (PEM, leaf first) and its private key (PKCS#8 PEM).
pub(crate) struct Issued {
    pub(crate) chain_pem: String,
    pub(crate) key_pem: String,
}

/// What an order needs of the manager.
pub(crate) struct Answerers<'a> {
    pub(crate) certs: &'a CertStore,
    pub(crate) tokens: &'a Tokens,
    pub(crate) prefer: Challenge,
}

/// Orders a certificate for `name` and waits for it.
pub(crate) async fn issue(
    account: &Account,
    name: &str,
    with: &Answerers<'_>,
) -> Result<Issued, Error> {
    let ids = [Identifier::Dns(name.to_owned())];
    let mut order = account.new_order(&NewOrder::new(&ids)).await?;
    let mut withdraw = Withdraw {
        certs: with.certs,
        tokens: with.tokens,
        alpn: Vec::new(),
        http: Vec::new(),
    };
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz?;
        match authz.status {
            // Validated earlier for this account (a CA may reuse it): nothing to answer.
            AuthorizationStatus::Valid => continue,
            AuthorizationStatus::Pending => {}
            other => {
                return Err(Error::Order(format!(
                    "the authorization for {name} is {other:?}, not pending"
                )))
            }
        }
        let offered = |t: &ChallengeType| authz.challenges.iter().any(|c| c.r#type == *t);
        let kind = [with.prefer.kind(), with.prefer.other().kind()]
            .into_iter()
            .find(offered)
            .ok_or_else(|| {
                Error::Order(format!(
                    "the ACME server offers neither TLS-ALPN-01 nor HTTP-01 for {name}; \
                     levee answers no other challenge"
                ))
            })?;
        let mut challenge = authz
            .challenge(kind.clone())
            .ok_or_else(|| Error::Order(format!("no {kind:?} challenge for {name}")))?;
        let key_auth = challenge.key_authorization();
        match kind {
            ChallengeType::TlsAlpn01 => {
                let cert = alpn_certificate(name, key_auth.digest().as_ref(), with.certs)?;
                with.certs.set_challenge(name, cert);
                withdraw.alpn.push(name.to_owned());
            }
            _ => {
                let token = challenge.token.clone();
                with.tokens
                    .insert(token.clone(), key_auth.as_str().to_owned());
                withdraw.http.push(token);
            }
        }
        tracing::info!(name, challenge = ?kind, "ACME challenge ready");
        challenge.set_ready().await?;
    }
    let status = order.poll_ready(&polling()).await?;
    if status != OrderStatus::Ready {
        return Err(Error::Validation {
            name: name.to_owned(),
            reason: why_invalid(&mut order).await,
        });
    }
    drop(withdraw);
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec![name.to_owned()])?;
    params.distinguished_name = DistinguishedName::new();
    let csr = params.serialize_request(&key)?;
    order.finalize_csr(csr.der()).await?;
    let chain_pem = order.poll_certificate(&polling()).await?;
    Ok(Issued {
        chain_pem,
        key_pem: key.serialize_pem(),
    })
}

/// The CA's reason for an invalid order: the first failed challenge's problem.
async fn why_invalid(order: &mut instant_acme::Order) -> String {
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authz)) = authorizations.next().await {
        if let Ok(state) = authz.refresh().await {
            if let Some(problem) = state.challenges.iter().find_map(|c| c.error.as_ref()) {
                return problem.to_string();
            }
        }
    }
    "the order became invalid and the server gave no reason".into()
}

/// The self-signed certificate a TLS-ALPN-01 validation gets (RFC 8737 §3): the name,
/// and the acmeIdentifier extension (critical) holding the key authorization's SHA-256.
fn alpn_certificate(
    name: &str,
    digest: &[u8],
    certs: &CertStore,
) -> Result<Arc<CertifiedKey>, Error> {
    let mut params = CertificateParams::new(vec![name.to_owned()])?;
    params.distinguished_name = DistinguishedName::new();
    params.custom_extensions = vec![CustomExtension::new_acme_identifier(digest)];
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    // Not CertifiedKey::from_der: its key check parses the certificate with webpki,
    // which refuses the critical acmeIdentifier extension. The key is the one just made.
    let signing_key = certs
        .provider()
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| Error::Order(format!("cannot use the TLS-ALPN-01 key: {e}")))?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signing_key,
    )))
}

/// Withdraws an order's challenges when dropped: answered or failed, a token or a
/// challenge certificate is never left behind.
struct Withdraw<'a> {
    certs: &'a CertStore,
    tokens: &'a Tokens,
    alpn: Vec<String>,
    http: Vec<String>,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        for name in &self.alpn {
            self.certs.remove_challenge(name);
        }
        for token in &self.http {
            self.tokens.remove(token);
        }
    }
}
