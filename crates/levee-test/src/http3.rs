//! An HTTP/3 client for the tests: quinn and h3 (hyper's), trusting one certificate,
//! asking for one server name, on one QUIC connection for many requests.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes};
use http::{HeaderMap, Method, Request, StatusCode};

/// An answer read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/3 connection.
pub struct H3 {
    handle: H3Handle,
    endpoint: quinn::Endpoint,
    _driver: tokio::task::JoinHandle<()>,
}

/// A QUIC client configuration trusting only `ca_der`, offering ALPN `h3`.
pub fn client_config(ca_der: &[u8]) -> quinn::ClientConfig {
    client_config_with(ca_der, false)
}

/// The same, offering to send early data (0-RTT) when it resumes a session.
fn client_config_with(ca_der: &[u8], early_data: bool) -> quinn::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(ca_der.to_vec()))
        .unwrap();
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.enable_early_data = early_data;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    quinn::ClientConfig::new(Arc::new(crypto))
}

impl H3 {
    /// Connects to `addr` (UDP) for `name`, trusting `ca_der`.
    pub async fn connect(addr: SocketAddr, name: &str, ca_der: &[u8]) -> Result<H3, String> {
        Self::connect_with(addr, name, client_config(ca_der)).await
    }

    pub async fn connect_with(
        addr: SocketAddr,
        name: &str,
        config: quinn::ClientConfig,
    ) -> Result<H3, String> {
        let from = match addr {
            SocketAddr::V4(_) => "127.0.0.1".parse().unwrap(),
            SocketAddr::V6(_) => "::1".parse().unwrap(),
        };
        Self::connect_from(addr, from, name, config).await
    }

    /// From a client address of its own (a loopback address like 127.3.0.1: another
    /// client network for levee's lanes).
    pub async fn connect_from(
        addr: SocketAddr,
        from: std::net::IpAddr,
        name: &str,
        config: quinn::ClientConfig,
    ) -> Result<H3, String> {
        let bind = SocketAddr::new(from, 0);
        let mut endpoint = quinn::Endpoint::client(bind).map_err(|e| e.to_string())?;
        endpoint.set_default_client_config(config);
        let quic = endpoint
            .connect(addr, name)
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic))
            .await
            .map_err(|e| e.to_string())?;
        let driver = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(H3 {
            handle: H3Handle {
                send,
                name: name.to_string(),
                port: addr.port(),
            },
            endpoint,
            _driver: driver,
        })
    }

    /// `method path` with `headers` and `body`, read whole.
    pub async fn request(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Bytes>,
    ) -> Result<Answer, String> {
        self.handle.request(method, path, headers, body).await
    }

    /// Another handle on the same connection, for requests at once on it.
    pub fn handle(&self) -> H3Handle {
        self.handle.clone()
    }

    pub async fn get(&mut self, path: &str) -> Answer {
        self.request(Method::GET, path, &[], None).await.unwrap()
    }

    /// Closes the connection and waits until the server has been told.
    pub async fn close(self) {
        self.endpoint.close(0u32.into(), b"done");
        self.endpoint.wait_idle().await;
    }
}

/// Whether `addr` offers 0-RTT (its session ticket lets a client send early data) and
/// whether it accepts it: one connection makes a request (and so gets the server's
/// session ticket), then a second tries to send early data on it.
pub async fn zero_rtt(addr: SocketAddr, name: &str, ca_der: &[u8]) -> (bool, bool) {
    let config = client_config_with(ca_der, true);
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(config.clone());
    // The first connection: a request, so that the ticket has come before it closes.
    let quic = endpoint.connect(addr, name).unwrap().await.unwrap();
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
        .await
        .unwrap();
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let req = Request::builder()
        .uri(format!("https://{name}:{}/", addr.port()))
        .body(())
        .unwrap();
    let mut stream = send.send_request(req).await.unwrap();
    stream.finish().await.unwrap();
    let _ = stream.recv_response().await.unwrap();
    while stream.recv_data().await.unwrap().is_some() {}
    quic.close(0u32.into(), b"");
    drive.abort();
    // The second: early data if the server allows it.
    match endpoint.connect(addr, name).unwrap().into_0rtt() {
        Ok((_conn, accepted)) => (true, accepted.await),
        Err(_) => (false, false),
    }
}

/// A handle on an [`H3`] connection: GETs on their own streams, at once with others.
#[derive(Clone)]
pub struct H3Handle {
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    name: String,
    port: u16,
}

impl H3Handle {
    /// `GET path`, read whole; an error as text (a refused or reset stream).
    pub async fn get(&mut self, path: &str) -> Result<Answer, String> {
        self.request(Method::GET, path, &[], None).await
    }

    /// `method path` with `headers` and `body`, read whole.
    pub async fn request(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Bytes>,
    ) -> Result<Answer, String> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("https://{}:{}{path}", self.name, self.port));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(()).map_err(|e| e.to_string())?;
        let mut stream = self
            .send
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(b) = body {
            stream.send_data(b).await.map_err(|e| e.to_string())?;
        }
        stream.finish().await.map_err(|e| e.to_string())?;
        let resp = stream.recv_response().await.map_err(|e| e.to_string())?;
        let mut body = Vec::new();
        while let Some(chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
            body.put(chunk);
        }
        Ok(Answer {
            status: resp.status(),
            headers: resp.headers().clone(),
            body: Bytes::from(body),
        })
    }
}
