//! WebSockets through levee (issue 44): a real client (tokio-tungstenite) through levee
//! to a real server (Debian's python3-websockets), over HTTP/1.1, TLS and HTTP/2
//! (RFC 8441); per route; to app processes; the bounds per network and in all; the
//! idle timeout; a reload that keeps an open WebSocket; a stop that closes it with 1001.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use levee_test::websocket::WsServer;
use levee_test::{levee, Levee, Origin, Reply};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws<S> = WebSocketStream<S>;

/// How long any one exchange may take before the test fails instead of hanging.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// A WebSocket to levee's `path` from `from` (a loopback address of the client's own).
async fn connect_from(
    levee: SocketAddr,
    from: IpAddr,
    path: &str,
) -> Result<Ws<MaybeTlsStream<TcpStream>>, tungstenite::Error> {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    let stream = socket.connect(levee).await.unwrap();
    let url = format!("ws://levee.test:{}{path}", levee.port());
    let mut req = tungstenite::client::IntoClientRequest::into_client_request(url).unwrap();
    req.headers_mut()
        .insert("origin", "https://levee.test".parse().unwrap());
    let (ws, _) = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::client_async_with_config(
            req,
            MaybeTlsStream::Plain(stream),
            Some(
                tungstenite::protocol::WebSocketConfig::default()
                    .max_message_size(None)
                    .max_frame_size(None),
            ),
        ),
    )
    .await
    .expect("the handshake timed out")?;
    Ok(ws)
}

async fn connect(levee: &Levee, path: &str) -> Ws<MaybeTlsStream<TcpStream>> {
    connect_from(levee.addr(), IpAddr::V4(Ipv4Addr::LOCALHOST), path)
        .await
        .unwrap()
}

/// The next message that is not a ping or pong.
async fn next<S>(ws: &mut Ws<S>) -> Message
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let m = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("no message in time")
            .expect("the WebSocket ended")
            .expect("a WebSocket error");
        if !matches!(m, Message::Ping(_) | Message::Pong(_)) {
            return m;
        }
    }
}

/// Reads until the connection ends (the client's side of a close handshake is sent as
/// it reads on).
async fn ended<S>(ws: &mut Ws<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let end = async { while let Some(Ok(_)) = ws.next().await {} };
    tokio::time::timeout(WAIT, end)
        .await
        .expect("the connection did not end");
}

/// The status levee (or the backend) refused a handshake with.
fn refused<T: std::fmt::Debug>(r: Result<T, tungstenite::Error>) -> u16 {
    match r {
        Err(tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        other => panic!("not refused: {other:?}"),
    }
}

async fn echo_checks<S>(ws: &mut Ws<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    ws.send(Message::text("hello")).await.unwrap();
    assert_eq!(next(ws).await, Message::text("hello"));
    let bin: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    ws.send(Message::binary(bin.clone())).await.unwrap();
    assert_eq!(next(ws).await, Message::binary(bin));
    // Ping: answered by the server, through levee.
    ws.send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .unwrap();
    let pong = loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Message::Pong(p) => break p,
            _ => continue,
        }
    };
    assert_eq!(&pong[..], b"are you there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_binary_ping_64_mib_both_ways_at_once_and_close_codes() {
    let Some(server) = WsServer::start() else {
        return;
    };
    let log = tempfile::tempdir().unwrap();
    let log_file = log.path().join("access.log");
    let levee = levee!()
        .backend(&server.url())
        .config(&format!(
            "[log]\naccess = \"json\"\naccess_file = \"{}\"\n",
            log_file.display()
        ))
        .start();
    let mut ws = connect(&levee, "/chat?room=1").await;
    echo_checks(&mut ws).await;

    // What the server saw of the handshake: the path as sent, Origin kept, levee's
    // forwarding fields, nothing of the client's connection.
    ws.send(Message::text("headers")).await.unwrap();
    let seen: serde_json::Value = match next(&mut ws).await {
        Message::Text(t) => serde_json::from_str(&t).unwrap(),
        m => panic!("{m:?}"),
    };
    assert_eq!(seen["path"], "/chat?room=1");
    let h = &seen["headers"];
    assert_eq!(h["origin"], "https://levee.test", "{seen}");
    assert_eq!(h["x-forwarded-for"], "127.0.0.1", "{seen}");
    assert_eq!(h["x-forwarded-proto"], "http", "{seen}");
    assert_eq!(h["upgrade"], "websocket", "{seen}");

    // A 64 MiB message, both ways.
    let big: Vec<u8> = (0..64u32 << 20).map(|i| (i % 251) as u8).collect();
    ws.send(Message::binary(big.clone())).await.unwrap();
    match next(&mut ws).await {
        Message::Binary(b) => assert!(b.len() == big.len() && b[..] == big[..], "64 MiB differ"),
        m => panic!("{m:?}"),
    }
    drop(big);

    // Many messages both ways at once: the server bursts 5,000 while the client sends
    // 5,000 that come back.
    let (mut tx, mut rx) = ws.split();
    let sender = tokio::spawn(async move {
        tx.send(Message::text("burst:5000")).await.unwrap();
        for i in 0..5000 {
            tx.send(Message::text(format!("c{i}"))).await.unwrap();
        }
        tx
    });
    let (mut burst, mut echoed, mut done) = (0, 0, false);
    while !(done && echoed == 5000) {
        match tokio::time::timeout(WAIT, rx.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Message::Text(t) if t.as_str() == "done" => done = true,
            Message::Text(t) if t.starts_with('m') => {
                assert_eq!(t.as_str(), format!("m{burst}"), "the burst in order");
                burst += 1;
            }
            Message::Text(t) if t.starts_with('c') => {
                assert_eq!(t.as_str(), format!("c{echoed}"), "the echoes in order");
                echoed += 1;
            }
            m => panic!("{m:?}"),
        }
    }
    assert_eq!(burst, 5000);
    let tx = sender.await.unwrap();
    let mut ws = tx.reunite(rx).unwrap();

    // The server closes with a code of its own: the client gets it.
    ws.send(Message::text("close:4001")).await.unwrap();
    match next(&mut ws).await {
        Message::Close(Some(f)) => assert_eq!(f.code, CloseCode::from(4001)),
        m => panic!("{m:?}"),
    }
    ended(&mut ws).await;
    // The client closes: the server answers with the same code.
    let mut ws = connect(&levee, "/").await;
    ws.close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "bye".into(),
    }))
    .await
    .unwrap();
    match next(&mut ws).await {
        Message::Close(Some(f)) => assert_eq!(f.code, CloseCode::Normal),
        m => panic!("{m:?}"),
    }
    ended(&mut ws).await;

    // Counted, and one access log line each at close, with its bytes.
    levee
        .wait_metric("levee_websockets_open", |n| n == 0.0)
        .await;
    assert_eq!(levee.metric("levee_websockets_opened_total").await, 2.0);
    assert!(levee.metric_sum("levee_websocket_bytes_total").await > 2.0 * (64 << 20) as f64);
    levee_test::eventually(WAIT, || {
        std::fs::read_to_string(&log_file)
            .unwrap_or_default()
            .matches("WEBSOCKET")
            .count()
            == 2
    })
    .await;
    let text = std::fs::read_to_string(&log_file).unwrap();
    let line = text.lines().find(|l| l.contains("/chat?room=1")).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["status"], 101, "{line}");
    assert!(v["bytes"].as_u64().unwrap() > 64 << 20, "{line}");
    assert!(v["reason"].as_str().unwrap().contains("backend"), "{line}");
    assert_eq!(
        text.lines().count(),
        2,
        "one line per WebSocket, at close:\n{text}"
    );
}

/// A self-signed certificate for `name`, written to `dir`, and the levee configuration
/// of an HTTPS listener serving it; the certificate is what the client trusts.
pub(crate) fn https_for(dir: &std::path::Path, name: &str) -> (rcgen::Certificate, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (c, k) = (dir.join("c.pem"), dir.join("c.key"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    let config = format!(
        "listen_tls = [\"127.0.0.1:0\"]\n[tls]\ncert = [{:?}]\nkey = [{:?}]\n",
        c.display().to_string(),
        k.display().to_string()
    );
    (cert, config)
}

/// A rustls client trusting only `ca_der`, offering `alpn`.
pub(crate) fn tls_client(ca_der: &[u8], alpn: &[u8]) -> tokio_rustls::TlsConnector {
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(ca_der.to_vec()))
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_over_tls_and_over_http2() {
    let Some(server) = WsServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (cert, tls_config) = https_for(dir.path(), "ws.levee.test");
    let levee = levee!().backend(&server.url()).config(&tls_config).start();
    let addr = levee.tls_addr().await;
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("ws.levee.test").unwrap();

    // wss:// over HTTP/1.1.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = tls_client(cert.der(), b"http/1.1")
        .connect(name.clone(), tcp)
        .await
        .unwrap();
    let url = format!("wss://ws.levee.test:{}/secure", addr.port());
    let (mut ws, resp) = tokio_tungstenite::client_async(url, tls).await.unwrap();
    assert_eq!(resp.status(), 101);
    echo_checks(&mut ws).await;
    ws.send(Message::text("headers")).await.unwrap();
    match next(&mut ws).await {
        Message::Text(t) => assert!(t.contains("\"x-forwarded-proto\": \"https\""), "{t}"),
        m => panic!("{m:?}"),
    }

    // HTTP/2: extended CONNECT (RFC 8441) on an h2 connection, the stream a WebSocket.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = tls_client(cert.der(), b"h2")
        .connect(name, tcp)
        .await
        .unwrap();
    let (mut send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut sent = None;
    // The server's SETTINGS (ENABLE_CONNECT_PROTOCOL) arrive after the handshake: the
    // client refuses an extended CONNECT until then.
    for _ in 0..100 {
        let mut req = http::Request::builder()
            .method(http::Method::CONNECT)
            .uri(format!("https://ws.levee.test:{}/over-h2", addr.port()))
            .header("sec-websocket-version", "13")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        req.extensions_mut()
            .insert(hyper::ext::Protocol::from_static("websocket"));
        send.ready().await.unwrap();
        match send.send_request(req).await {
            Ok(r) => {
                sent = Some(r);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let resp = sent.expect("extended CONNECT accepted");
    assert_eq!(resp.status(), 200, "{resp:?}");
    let io = hyper::upgrade::on(resp).await.unwrap();
    let mut ws =
        WebSocketStream::from_raw_socket(hyper_util::rt::TokioIo::new(io), Role::Client, None)
            .await;
    echo_checks(&mut ws).await;
    ws.send(Message::text("headers")).await.unwrap();
    match next(&mut ws).await {
        Message::Text(t) => assert!(t.contains("\"path\": \"/over-h2\""), "{t}"),
        m => panic!("{m:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_takes_websockets_to_their_server_and_a_refusal_passes_as_it_is() {
    let Some(server) = WsServer::start() else {
        return;
    };
    let pages = Origin::start(|_| Reply::text("a page"));
    let levee = levee!()
        .backend(&pages.url())
        .config(&format!(
            "[[site]]\ndefault = true\nbackend = \"{}\"\n[[site.route]]\npath = \"/ws/\"\nbackend = \"{}\"\n",
            pages.url(),
            server.url()
        ))
        .start();
    let mut ws = connect(&levee, "/ws/live").await;
    echo_checks(&mut ws).await;
    // The same route under another spelling (the route is chosen on the normalized path).
    let mut ws = connect(&levee, "//ws/live").await;
    ws.send(Message::text("x")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("x"));
    // The page server answers an upgrade with a page (no 101): the client gets it.
    let r = connect_from(levee.addr(), IpAddr::V4(Ipv4Addr::LOCALHOST), "/other").await;
    assert_eq!(refused(r), 200);
    // The WebSocket server says no: its 403 reaches the client.
    let r = connect_from(levee.addr(), IpAddr::V4(Ipv4Addr::LOCALHOST), "/ws/refuse").await;
    assert_eq!(refused(r), 403);
    // Pages still go to their backend, and are cached as usual.
    assert_eq!(levee.get("/page").await.text(), "a page");
}

/// App processes (`--app`): levee starts the WebSocket server itself, as it would a Node
/// or Reverb process, and WebSockets pass to it. An open WebSocket holds no app slot:
/// with one process taking one request at a time, a second WebSocket opens while the
/// first is open, and both echo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_pass_to_app_processes_and_hold_no_app_slot() {
    let dir = tempfile::tempdir().unwrap();
    let Some(command) = levee_test::websocket::app_command(dir.path()) else {
        return;
    };
    let levee = levee!()
        .args(&["--app", &command, "--app-processes", "1"])
        .start();
    let mut first = connect(&levee, "/ws").await;
    echo_checks(&mut first).await;
    let mut second = connect(&levee, "/ws").await;
    for (ws, text) in [(&mut first, "one"), (&mut second, "two")] {
        ws.send(Message::text(text)).await.unwrap();
        assert_eq!(next(ws).await, Message::text(text));
    }
    // The handshake's fields reached the process as for an HTTP backend.
    second.send(Message::text("headers")).await.unwrap();
    let seen: serde_json::Value = match next(&mut second).await {
        Message::Text(t) => serde_json::from_str(&t).unwrap(),
        m => panic!("{m:?}"),
    };
    assert_eq!(seen["headers"]["origin"], "https://levee.test", "{seen}");
    assert_eq!(seen["headers"]["upgrade"], "websocket", "{seen}");
    second.close(None).await.unwrap();
    ended(&mut second).await;
    first.send(Message::text("still")).await.unwrap();
    assert_eq!(next(&mut first).await, Message::text("still"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fastcgi_backend_gets_no_upgrade_and_the_client_a_clear_answer() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("index.php"), "<?php echo 'a page';").unwrap();
    let php = levee_test::PhpFpm::start(root.path());
    let levee = levee!()
        .backend(&format!("fastcgi+unix:{}", php.socket_path().display()))
        .args(&["--root", &root.path().display().to_string()])
        .start();
    let r = connect_from(levee.addr(), IpAddr::V4(Ipv4Addr::LOCALHOST), "/ws").await;
    assert_eq!(refused(r), 501);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_upgrade_past_a_networks_share_or_the_total_is_refused() {
    let Some(server) = WsServer::start() else {
        return;
    };
    let levee = levee!()
        .backend(&server.url())
        .config("[limits]\nwebsocket_per_network = 2\nwebsocket_max = 3\n")
        .start();
    let from = |n: u8| IpAddr::V4(Ipv4Addr::new(127, 0, n, 1));
    let a1 = connect_from(levee.addr(), from(1), "/").await.unwrap();
    let _a2 = connect_from(levee.addr(), from(1), "/").await.unwrap();
    assert_eq!(refused(connect_from(levee.addr(), from(1), "/").await), 429);
    let _b1 = connect_from(levee.addr(), from(2), "/").await.unwrap();
    assert_eq!(refused(connect_from(levee.addr(), from(3), "/").await), 503);
    assert_eq!(
        levee.metric_sum("levee_websockets_refused_total").await,
        2.0,
        "both refusals counted"
    );
    // One closes: its network may open another.
    drop(a1);
    levee
        .wait_metric("levee_websockets_open", |n| n == 2.0)
        .await;
    let mut again = connect_from(levee.addr(), from(1), "/").await.unwrap();
    again.send(Message::text("still")).await.unwrap();
    assert_eq!(next(&mut again).await, Message::text("still"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_websocket_is_closed_and_a_lively_one_is_not() {
    let Some(server) = WsServer::start() else {
        return;
    };
    let levee = levee!()
        .backend(&server.url())
        .config("[limits]\nwebsocket_idle_timeout = \"1s\"\n")
        .start();
    let mut quiet = connect(&levee, "/").await;
    let mut lively = connect(&levee, "/").await;
    // The lively one talks every 300 ms for 3 s; the quiet one says nothing.
    for i in 0..10 {
        lively.send(Message::text(format!("{i}"))).await.unwrap();
        assert_eq!(next(&mut lively).await, Message::text(format!("{i}")));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The quiet one was closed by levee (its connection ends).
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match quiet.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the idle WebSocket is still open");
    assert_eq!(
        levee.metric_sum("levee_websockets_closed_total").await,
        1.0,
        "one closed (idle)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_an_open_websocket_and_a_stop_closes_it_with_1001() {
    let Some(server) = WsServer::start() else {
        return;
    };
    let mut levee = levee!()
        .backend(&server.url())
        .config("[limits]\nshutdown_timeout = \"1s\"\n")
        .start();
    let mut ws = connect(&levee, "/").await;
    ws.send(Message::text("before")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("before"));
    levee.signal("HUP");
    levee.wait_log("configuration reloaded").await;
    ws.send(Message::text("after the reload")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("after the reload"));
    levee.sigterm();
    match next(&mut ws).await {
        Message::Close(Some(f)) => assert_eq!(f.code, CloseCode::Away),
        m => panic!("{m:?}"),
    }
    assert!(
        levee.wait_exit(WAIT).is_some_and(|s| s.success()),
        "levee exits once its WebSockets are closed"
    );
}

/// A real browser: headless Chromium loads a page through levee that opens a WebSocket
/// (to a route's server) and an EventSource (the site's backend), and shows what each
/// received; the DOM is read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_gets_its_websocket_and_its_event_source_through_levee() {
    let Some(server) = WsServer::start() else {
        return;
    };
    let Some(bin) = levee_test::tools::require(&levee_test::tools::CHROMIUM) else {
        return;
    };
    const PAGE: &str = r#"<!doctype html><html><body>
<p id="ws">ws: waiting</p><p id="sse">sse: waiting</p>
<script>
const ws = new WebSocket("ws://" + location.host + "/ws/echo");
let echoed = false, n = 0;
// The open EventSource holds Chromium's virtual time (a pending request), so the DOM is
// dumped once the stream ends, with what both brought.
const es = new EventSource("/events");
const done = () => { if (echoed && n >= 2) es.close(); };
ws.onopen = () => ws.send("hello from the browser");
ws.onmessage = (e) => {
  document.getElementById("ws").textContent = "ws: " + e.data;
  echoed = true;
  ws.close(1000);
  done();
};
es.onmessage = (e) => {
  n += 1;
  document.getElementById("sse").textContent = "sse: " + e.data + " (" + n + ")";
  done();
};
</script></body></html>"#;
    let pages = Origin::start(|r| match r.uri.as_str() {
        "/events" => Reply::ok()
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .chunks(vec![
                (Duration::ZERO, bytes::Bytes::from("data: first event\n\n")),
                (
                    Duration::from_millis(300),
                    bytes::Bytes::from("data: second event\n\n"),
                ),
                // The stream stays open 10 s: the page's pending request holds Chromium's
                // virtual time (and so the DOM dump) while the WebSocket's echo comes,
                // however busy the machine (closing the EventSource does not release it).
                (Duration::from_secs(10), bytes::Bytes::from(": idle\n\n")),
            ]),
        _ => Reply::text(PAGE)
            .header("content-type", "text/html; charset=utf-8")
            .header("cache-control", "no-store"),
    });
    let levee = levee!()
        .config(&format!(
            "[[site]]\ndefault = true\nbackend = \"{}\"\n[[site.route]]\npath = \"/ws/\"\nbackend = \"{}\"\n",
            pages.url(),
            server.url()
        ))
        .start();
    let dir = tempfile::tempdir().unwrap();
    let url = levee.url("/");
    let (dom, stderr) = tokio::task::spawn_blocking({
        let (bin, profile) = (bin.clone(), dir.path().join("profile"));
        move || {
            levee_test::tools::run_chromium(
                &bin,
                &profile,
                &["--dump-dom", "--virtual-time-budget=5000"],
                &url,
            )
        }
    })
    .await
    .unwrap();
    assert!(
        dom.contains("ws: hello from the browser"),
        "the WebSocket's echo is not on the page:\n{dom}\n{stderr}"
    );
    assert!(
        dom.contains("sse: second event (2)"),
        "the events are not on the page:\n{dom}\n{stderr}"
    );
    levee
        .wait_metric("levee_websockets_opened_total", |n| n >= 1.0)
        .await;

    // The dashboard shows the WebSockets open: one, held open while Chromium reads it.
    let mut held = connect(&levee, "/ws/held").await;
    held.send(Message::text("x")).await.unwrap();
    assert_eq!(next(&mut held).await, Message::text("x"));
    levee
        .wait_metric("levee_websockets_open", |n| n == 1.0)
        .await;
    let admin = format!("http://{}/", levee.admin_addr().await);
    let (board, stderr) = tokio::task::spawn_blocking(move || {
        levee_test::tools::run_chromium(
            &bin,
            &dir.path().join("profile2"),
            &["--dump-dom", "--virtual-time-budget=4000"],
            &admin,
        )
    })
    .await
    .unwrap();
    assert!(
        board.contains("data-websockets=\"1\"") && board.contains("1 WebSockets open"),
        "the dashboard does not show the open WebSocket:\n{board}\n{stderr}"
    );
    held.close(None).await.unwrap();
    ended(&mut held).await;
}
