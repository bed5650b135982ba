//! HTTP/2's own attacks: rapid reset (CVE-2023-44487), streams cancelled while levee
//! works, CONTINUATION floods (2024) and header blocks over the limit. Frames the h2
//! client will not send are written by hand.

use levee_test::{levee, Levee, Origin, Reply};

/// HTTP/2 rapid reset (CVE-2023-44487): a client opens streams and cancels each at once,
/// as fast as it can, on one connection. The connection is closed (h2's limit on streams
/// reset before they are accepted), the backend sees almost none of them, levee's memory
/// does not grow, and another client is served all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_rapid_reset_is_bounded_and_others_are_served() {
    let origin = Origin::fixed(|| {
        Reply::text("page")
            .header("cache-control", "max-age=60")
            .delay(std::time::Duration::from_millis(50))
    });
    let levee = levee!().backend(&origin.url()).start();
    assert_eq!(levee.get("/cached").await.x_cache(), "MISS");
    levee.wait_stored("/cached").await;
    let rss_before = levee.metric("levee_process_resident_bytes").await;

    let (flood, conn) = h2_flood(&levee, 20_000, None).await;
    // Meanwhile, another client keeps being served.
    for _ in 0..20 {
        let r = levee.get("/cached").await;
        assert_eq!(r.status, 200, "{}", r.summary());
    }
    let sent = flood.await.unwrap();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), conn).await;
    levee.wait_fills_done().await;
    let rss_after = levee.metric("levee_process_resident_bytes").await;
    assert!(
        rss_after - rss_before < 64.0 * 1024.0 * 1024.0,
        "{sent} reset streams grew levee by {} MiB",
        (rss_after - rss_before) / 1048576.0
    );
    assert!(
        origin.requests() < 200,
        "{} of {sent} cancelled requests reached the backend",
        origin.requests()
    );
    assert_eq!(levee.get("/cached").await.x_cache(), "HIT");
}

/// The slower variant: each stream is cancelled only once levee works on it (waits for
/// the backend), so h2's limit on streams reset before acceptance never applies. levee
/// counts requests cancelled before their answer and closes the connection once they
/// pass a hundred and outnumber the answered ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_cancelled_while_levee_works_close_the_connection() {
    let origin = Origin::fixed(|| Reply::text("page").delay(std::time::Duration::from_millis(200)));
    let levee = levee!().backend(&origin.url()).start();
    let (flood, _conn) = h2_flood(&levee, 2_000, Some(std::time::Duration::from_millis(20))).await;
    levee.wait_log("rapid reset").await;
    let sent = flood.await.unwrap();
    assert!(
        sent < 2_000,
        "every one of {sent} cancelled requests was taken"
    );
    assert_eq!(levee.get("/after").await.status, 200);
}

/// One HTTP/2 connection (prior knowledge) sending up to `n` GETs of distinct URLs,
/// each cancelled (RST_STREAM) at once, or after `wait`. Returns how many were sent, and
/// the connection's task.
async fn h2_flood(
    levee: &Levee,
    n: u32,
    wait: Option<std::time::Duration>,
) -> (
    tokio::task::JoinHandle<u32>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = tokio::net::TcpStream::connect(levee.addr()).await.unwrap();
    let (mut client, conn) = h2::client::handshake(tcp).await.unwrap();
    let conn = tokio::spawn(conn);
    let flood = tokio::spawn(async move {
        let mut sent = 0u32;
        for i in 0..n {
            client = match client.ready().await {
                Ok(c) => c,
                Err(_) => break,
            };
            let req = http::Request::get(format!("http://localhost/flood/{i}"))
                .body(())
                .unwrap();
            let Ok((response, _)) = client.send_request(req, true) else {
                break;
            };
            if let Some(wait) = wait {
                let _ = tokio::time::timeout(wait, response).await;
            }
            // Dropping the response cancels the stream: RST_STREAM(CANCEL).
            sent += 1;
        }
        sent
    });
    (flood, conn)
}

/// An HTTP/2 frame: 9-byte head (length, type, flags, stream), then the payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK: a literal header field without indexing, new name (RFC 7541 §6.2.2), with a
/// value of `len` bytes (< 16 511: two bytes of integer continuation at most).
fn hpack_literal(name: &str, len: usize) -> Vec<u8> {
    let mut b = vec![0x00, u8::try_from(name.len()).unwrap()];
    b.extend_from_slice(name.as_bytes());
    if len < 127 {
        b.push(u8::try_from(len).unwrap());
    } else {
        let rest = len - 127;
        b.push(0x7f);
        b.push(u8::try_from(rest & 0x7f).unwrap() | 0x80);
        b.push(u8::try_from(rest >> 7).unwrap());
    }
    b.extend(std::iter::repeat_n(b'a', len));
    b
}

/// The CONTINUATION flood (2024, CVE-2024-27316 and kin): a HEADERS frame without
/// END_HEADERS, then CONTINUATION frames of valid header fields without end, which a
/// server that buffers them all until the block ends keeps in memory forever. levee
/// (h2 with `max_header_list_size`) stops reading and closes the connection once the
/// block passes `max_header_bytes`: the flood gets only a few MiB into the socket
/// buffers, memory stays flat, and another client is served all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_continuation_flood_is_cut_off_and_others_are_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let origin = Origin::fixed(|| Reply::text("page").header("cache-control", "max-age=60"));
    let levee = levee!().backend(&origin.url()).start();
    assert_eq!(levee.get("/cached").await.x_cache(), "MISS");
    levee.wait_stored("/cached").await;
    let rss_before = levee.metric("levee_process_resident_bytes").await;

    let mut tcp = tokio::net::TcpStream::connect(levee.addr()).await.unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    tcp.write_all(&h2_frame(0x4, 0, 0, &[])).await.unwrap();
    // :method GET, :scheme http, :path /, then no END_HEADERS.
    tcp.write_all(&h2_frame(0x1, 0, 1, &[0x82, 0x86, 0x84]))
        .await
        .unwrap();
    let (mut read, mut write) = tcp.into_split();
    let flood = tokio::spawn(async move {
        // 16 KiB CONTINUATION frames, each a run of valid fields: 256 MiB in all, far
        // past any bound, should levee read on.
        let field = hpack_literal("x-flood", 1000);
        let payload: Vec<u8> = field.iter().copied().cycle().take(16 * 1024).collect();
        let frame = h2_frame(0x9, 0, 1, &payload);
        let mut sent = 0usize;
        for _ in 0..16 * 1024 {
            if write.write_all(&frame).await.is_err() {
                break;
            }
            sent += frame.len();
        }
        sent
    });
    // Meanwhile, another client keeps being served.
    for _ in 0..20 {
        let r = levee.get("/cached").await;
        assert_eq!(r.status, 200, "{}", r.summary());
    }
    let sent = tokio::time::timeout(std::time::Duration::from_secs(20), flood)
        .await
        .expect("the flood is cut off, not read forever")
        .unwrap();
    assert!(
        sent < 32 << 20,
        "levee took {} MiB of one header block",
        sent >> 20
    );
    // What levee said before closing: a GOAWAY (type 7) among its frames, or the
    // connection reset under the flood.
    let mut got = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        read.read_to_end(&mut got),
    )
    .await;
    let rss_after = levee.metric("levee_process_resident_bytes").await;
    assert!(
        rss_after - rss_before < 64.0 * 1024.0 * 1024.0,
        "the flood grew levee by {} MiB",
        (rss_after - rss_before) / 1048576.0
    );
    assert_eq!(origin.requests(), 1, "the flood never reached the backend");
    assert_eq!(levee.get("/cached").await.x_cache(), "HIT");
}

/// One header block over `max_header_bytes` (80 KiB against 64 KiB), complete (HEADERS,
/// then CONTINUATION frames up to END_HEADERS): refused on its stream (431, a reset or
/// the connection's end), and the backend never sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_header_list_over_the_limit_is_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let origin = Origin::fixed(|| Reply::text("page"));
    let levee = levee!().backend(&origin.url()).start();
    let mut tcp = tokio::net::TcpStream::connect(levee.addr()).await.unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    tcp.write_all(&h2_frame(0x4, 0, 0, &[])).await.unwrap();
    let mut block = vec![0x82, 0x86, 0x84];
    for _ in 0..80 {
        block.extend(hpack_literal("x-big", 1000));
    }
    let chunks: Vec<&[u8]> = block.chunks(16 * 1024).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let kind = if i == 0 { 0x1 } else { 0x9 };
        let end_headers = if i + 1 == chunks.len() { 0x4 } else { 0 };
        // END_STREAM (0x1) on the HEADERS frame: a GET without a body.
        let end_stream = if i == 0 { 0x1 } else { 0 };
        let _ = tcp
            .write_all(&h2_frame(kind, end_headers | end_stream, 1, chunk))
            .await;
    }
    // Read levee's frames until stream 1 is answered or the connection ends.
    let mut buf = Vec::new();
    let verdict = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let mut pos = 0;
            while buf.len() >= pos + 9 {
                let len = usize::from(buf[pos]) << 16
                    | usize::from(buf[pos + 1]) << 8
                    | usize::from(buf[pos + 2]);
                let (kind, stream) = (
                    buf[pos + 3],
                    u32::from_be_bytes([buf[pos + 5], buf[pos + 6], buf[pos + 7], buf[pos + 8]])
                        & 0x7fff_ffff,
                );
                if buf.len() < pos + 9 + len {
                    break;
                }
                let payload = &buf[pos + 9..pos + 9 + len];
                match (kind, stream) {
                    (0x3, 1) => return "reset".to_string(),
                    (0x7, _) => return "goaway".to_string(),
                    // A response head: `:status 431` is a literal of the static
                    // table's :status name (0x48), its value "431" Huffman-coded
                    // (0x83: three bytes, 0x69 0x90 0xff); a 200 would be 0x88.
                    (0x1, 1) if payload.starts_with(&[0x48, 0x83, 0x69, 0x90]) => {
                        return "431".to_string()
                    }
                    (0x1, 1) => return format!("answered: {payload:?}"),
                    _ => {}
                }
                pos += 9 + len;
            }
            let mut more = [0u8; 4096];
            match tcp.read(&mut more).await {
                Ok(0) | Err(_) => return "closed".to_string(),
                Ok(n) => buf.extend_from_slice(&more[..n]),
            }
        }
    })
    .await
    .expect("levee answers the oversized block");
    assert!(
        ["reset", "goaway", "431", "closed"].contains(&verdict.as_str()),
        "{verdict}"
    );
    assert_eq!(origin.requests(), 0, "{verdict}");
    assert_eq!(levee.get("/after").await.status, 200);
}
