//! The WebSocket benchmark's two ends (benchmarks/websockets.sh), on tokio-tungstenite:
//!
//!   ws_bench server PORT
//!       an echo server on 127.0.0.1:PORT (every message sent back), until killed
//!   ws_bench rtt URL CONNS SECS
//!       CONNS WebSockets, each sending a 64-byte message and waiting for its echo, again
//!       and again for SECS seconds: prints round trips per second
//!   ws_bench stream URL CONNS SECS
//!       CONNS WebSockets, each keeping 64 messages of 64 bytes in flight: prints
//!       messages echoed per second
//!
//! Loopback only, bounded in time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

/// Messages a `stream` connection keeps in flight.
const WINDOW: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    match args.first().map(String::as_str) {
        Some("server") => rt.block_on(server(args[1].parse().unwrap())),
        Some(mode @ ("rtt" | "stream")) => {
            let (url, conns, secs) = (
                args[1].clone(),
                args[2].parse().unwrap(),
                args[3].parse().unwrap(),
            );
            let n = rt.block_on(client(mode == "rtt", url, conns, Duration::from_secs(secs)));
            println!("{n:.0}");
        }
        _ => {
            eprintln!("usage: ws_bench server PORT | ws_bench rtt|stream URL CONNS SECS");
            std::process::exit(2);
        }
    }
}

async fn server(port: u16) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(async move {
            let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            let (mut tx, mut rx) = ws.split();
            while let Some(Ok(m)) = rx.next().await {
                if (m.is_text() || m.is_binary()) && tx.send(m).await.is_err() {
                    return;
                }
            }
        });
    }
}

async fn client(rtt: bool, url: String, conns: usize, secs: Duration) -> f64 {
    let count = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + secs;
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (url, count) = (url.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            let (ws, _) = tokio_tungstenite::connect_async(url)
                .await
                .expect("connect");
            let (mut tx, mut rx) = ws.split();
            let payload = vec![7u8; 64];
            let window = if rtt { 1 } else { WINDOW };
            for _ in 0..window {
                tx.send(Message::binary(payload.clone())).await.unwrap();
            }
            while Instant::now() < until {
                match rx.next().await {
                    Some(Ok(m)) if m.is_binary() => {
                        count.fetch_add(1, Ordering::Relaxed);
                        tx.send(Message::binary(payload.clone())).await.unwrap();
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                }
            }
        }));
    }
    let started = Instant::now();
    for t in tasks {
        let _ = t.await;
    }
    count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}
