//! The HTTPS client instant-acme talks to the ACME server through: its own, rather than
//! instant-acme's hyper-rustls one, for two things that one lacks: a time limit on every
//! request (a stalled CA must not stall renewals forever) and an extra root beside the
//! system's (`acme_ca`: a private CA, or a test server such as Pebble). One connection
//! per request, HTTP/1.1: an order is a few dozen small requests, minutes apart.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use instant_acme::{BodyWrapper, BytesResponse, HttpClient};
use levee_tls::rustls::pki_types::pem::PemObject;
use levee_tls::rustls::pki_types::{CertificateDer, ServerName};
use levee_tls::rustls::{ClientConfig, RootCertStore};
use levee_tls::tokio_rustls::TlsConnector;
use tokio::net::TcpStream;

use crate::error::Error;

/// Connect, handshake, request and response body, all within this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// An ACME response is a small JSON document or a certificate chain.
const MAX_BODY: usize = 1 << 20;

/// An [`HttpClient`] over rustls (ring) trusting the system's roots and `extra_root`.
#[derive(Clone)]
pub(crate) struct Client {
    tls: TlsConnector,
}

impl Client {
    pub(crate) fn new(extra_root: Option<&Path>) -> Result<Client, Error> {
        let mut roots = RootCertStore::empty();
        // Missing or unreadable system roots are no error while acme_ca is given: a
        // private CA needs nothing else.
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(file) = extra_root {
            let bad = |reason: String| Error::Ca {
                file: file.to_owned(),
                reason,
            };
            let certs = CertificateDer::pem_file_iter(file)
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if certs.is_empty() {
                return Err(bad("it holds no \"BEGIN CERTIFICATE\" section".into()));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| bad(e.to_string()))?;
            }
        }
        if roots.is_empty() {
            return Err(Error::NoRoots);
        }
        let provider = Arc::new(levee_tls::rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Client {
            tls: TlsConnector::from(Arc::new(config)),
        })
    }
}

impl HttpClient for Client {
    fn request(
        &self,
        req: Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, instant_acme::Error>> + Send>> {
        let tls = self.tls.clone();
        Box::pin(async move {
            let uri = req.uri().to_string();
            match tokio::time::timeout(REQUEST_TIMEOUT, send(tls, req)).await {
                Ok(r) => r,
                Err(_) => Err(instant_acme::Error::Other(
                    format!("no answer from {uri} within {REQUEST_TIMEOUT:?}").into(),
                )),
            }
        })
    }
}

fn other(e: impl std::fmt::Display) -> instant_acme::Error {
    instant_acme::Error::Other(e.to_string().into())
}

async fn send(
    tls: TlsConnector,
    req: Request<BodyWrapper<Bytes>>,
) -> Result<BytesResponse, instant_acme::Error> {
    let uri = req.uri().clone();
    if uri.scheme_str() != Some("https") {
        return Err(other(format!(
            "{uri}: the ACME server must be reached over https"
        )));
    }
    let (Some(host), Some(authority)) = (uri.host(), uri.authority()) else {
        return Err(other(format!("{uri} has no host")));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(443);
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(|e| other(format!("cannot connect to {authority}: {e}")))?;
    let name = ServerName::try_from(host.to_owned()).map_err(other)?;
    let stream = tls
        .connect(name, tcp)
        .await
        .map_err(|e| other(format!("TLS with {authority}: {e}")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(other)?;
    // The connection ends with the exchange; bounded anyway, should the server stall.
    tokio::spawn(tokio::time::timeout(REQUEST_TIMEOUT, conn));
    let (mut parts, body) = req.into_parts();
    parts.uri = uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse::<Uri>()
        .map_err(other)?;
    let host_value = header::HeaderValue::from_str(authority.as_str()).map_err(other)?;
    parts.headers.insert(header::HOST, host_value);
    let resp = sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(other)?;
    let (parts, body) = resp.into_parts();
    let body = Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|e| other(format!("reading the answer of {authority}: {e}")))?
        .to_bytes();
    Ok(BytesResponse::from(Response::from_parts(
        parts,
        Full::new(body),
    )))
}
