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
//!   ws_bench idle URL CONNS SECS
//!       CONNS WebSockets held open and silent for SECS seconds, from 127.1.X.1 (200 per
//!       /24, as many browsers behind many networks would be); then each sends one
//!       message: prints "alive K of CONNS" (those whose echo came back)
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
        Some("idle") => {
            let (url, conns, secs) = (
                args[1].clone(),
                args[2].parse().unwrap(),
                args[3].parse().unwrap(),
            );
            let alive = rt.block_on(idle(url, conns, Duration::from_secs(secs)));
            println!("alive {alive} of {conns}");
        }
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
            eprintln!("usage: ws_bench server PORT | ws_bench rtt|stream|idle URL CONNS SECS");
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

async fn idle(url: String, conns: usize, secs: Duration) -> usize {
    let target: std::net::SocketAddr = url
        .trim_start_matches("ws://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let until = Instant::now() + secs;
    let mut tasks = Vec::new();
    for i in 0..conns {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let from = std::net::Ipv4Addr::new(127, 1, u8::try_from(i / 200).unwrap_or(255), 1);
            let socket = tokio::net::TcpSocket::new_v4().ok()?;
            socket.bind((from, 0).into()).ok()?;
            let tcp = socket.connect(target).await.ok()?;
            let (ws, _) = tokio_tungstenite::client_async(url, tcp).await.ok()?;
            let (mut tx, mut rx) = ws.split();
            tokio::time::sleep_until(until.into()).await;
            tx.send(Message::text("still here")).await.ok()?;
            let echo = tokio::time::timeout(Duration::from_secs(10), async {
                while let Some(Ok(m)) = rx.next().await {
                    if m.is_text() {
                        return true;
                    }
                }
                false
            });
            echo.await.ok()?.then_some(())
        }));
        // A browser population arrives over a second, not all in one instant.
        if i % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut alive = 0;
    for t in tasks {
        if let Ok(Some(())) = t.await {
            alive += 1;
        }
    }
    alive
}
