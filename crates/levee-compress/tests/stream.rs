//! CompressBody and DecompressBody over streamed bodies.
// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use common::{html, mixed, Rng};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use levee_compress::{compress, decompress, BoxError, Coding, CompressBody, DecompressBody, Level};
use tokio::sync::mpsc;
use Coding::{Br, Gzip, Identity, Zstd};

const MIB: usize = 1024 * 1024;
const CODED: [Coding; 3] = [Gzip, Br, Zstd];
/// What one frame of a coded body may hold (16 KiB, with room for BytesMut rounding).
const FRAME_MAX: usize = 32 * 1024;

/// A body fed by a channel: pending until the test sends something, ended when the
/// sender is dropped, like a backend that streams its page.
struct ChanBody(mpsc::Receiver<Result<Frame<Bytes>, BoxError>>, bool);

impl Body for ChanBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let p = self.0.poll_recv(cx);
        if let Poll::Ready(None) = p {
            self.1 = true;
        }
        p
    }

    fn is_end_stream(&self) -> bool {
        self.1
    }
}

type Tx = mpsc::Sender<Result<Frame<Bytes>, BoxError>>;

fn channel() -> (Tx, ChanBody) {
    let (tx, rx) = mpsc::channel(4);
    (tx, ChanBody(rx, false))
}

async fn send(tx: &Tx, data: &[u8]) {
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(data))))
        .await
        .unwrap();
}

/// Sends `data` in chunks of random sizes from another task, yielding in between so
/// that the reader often finds the body pending.
fn stream_in_chunks(data: Vec<u8>, seed: u64, max_chunk: usize) -> ChanBody {
    let (tx, body) = channel();
    tokio::spawn(async move {
        let mut rng = Rng::new(seed);
        let mut rest = &data[..];
        while !rest.is_empty() {
            let n = rng.range(1, max_chunk).min(rest.len());
            send(&tx, &rest[..n]).await;
            rest = &rest[n..];
            if rng.range(0, 3) == 0 {
                tokio::task::yield_now().await;
            }
        }
    });
    body
}

/// Collects a body's data, checking the size of every frame.
async fn collect<B>(mut body: B) -> Result<Vec<u8>, BoxError>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            assert!(data.len() <= FRAME_MAX, "frame of {} bytes", data.len());
            assert!(!data.is_empty(), "empty frame");
            out.extend_from_slice(&data);
        }
    }
    assert!(body.is_end_stream());
    Ok(out)
}

/// The next data frame, failing the test if none comes within a few seconds.
async fn next_data<B>(body: &mut B) -> Option<Bytes>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("the body produced nothing although its input was ready")?;
    Some(frame.unwrap().into_data().unwrap())
}

#[tokio::test]
async fn compress_body_matches_one_shot_decompression() {
    let inputs = [html(MIB, 21), mixed(MIB, 22), b"tiny".to_vec()];
    for c in Coding::ALL {
        for (i, data) in inputs.iter().enumerate() {
            for level in [Level::Fast, Level::Default] {
                let body = stream_in_chunks(data.clone(), i as u64, 9000);
                let packed = collect(CompressBody::new(body, c, level)).await.unwrap();
                let back = decompress(c, &packed, usize::MAX).unwrap();
                assert!(back == *data, "{c} {level:?} input {i}");
            }
        }
    }
}

#[tokio::test]
async fn decompress_body_matches_one_shot_decompression() {
    let inputs = [html(MIB, 23), mixed(MIB, 24), b"tiny".to_vec()];
    for c in Coding::ALL {
        for (i, data) in inputs.iter().enumerate() {
            let packed = compress(c, data, Level::Default).unwrap();
            let one_shot = decompress(c, &packed, usize::MAX).unwrap();
            let body = stream_in_chunks(packed.to_vec(), 100 + i as u64, 3000);
            let streamed = collect(DecompressBody::new(body, c)).await.unwrap();
            assert!(streamed == one_shot, "{c} input {i}");
            assert!(streamed == *data, "{c} input {i}");
        }
    }
}

#[tokio::test]
async fn compress_then_decompress_streaming() {
    let data = html(300_000, 25);
    for c in Coding::ALL {
        let body = stream_in_chunks(data.clone(), 26, 5000);
        let out = collect(DecompressBody::new(
            CompressBody::new(body, c, Level::Fast),
            c,
        ))
        .await
        .unwrap();
        assert!(out == data, "{c}");
    }
}

#[tokio::test]
async fn compress_body_flushes_when_the_inner_body_is_pending() {
    let head = html(3000, 27);
    let tail = html(5000, 28);
    for c in CODED {
        let (tx, body) = channel();
        let mut compressed = CompressBody::new(body, c, Level::Fast);
        // The decoder reads what the encoder produced, also through a channel.
        let (dtx, dbody) = channel();
        let mut decoded = DecompressBody::new(dbody, c);

        send(&tx, &head).await;
        // The inner body is now pending, and still open: the head must come out anyway.
        let first = next_data(&mut compressed).await.unwrap();
        assert!(!first.is_empty());
        assert!(!compressed.is_end_stream());
        dtx.send(Ok(Frame::data(first))).await.unwrap();
        let mut got = Vec::new();
        while got.len() < head.len() {
            got.extend_from_slice(&next_data(&mut decoded).await.unwrap());
        }
        assert_eq!(got, head, "{c}: the flushed prefix decodes to the head");

        // Nothing more until more input comes.
        let idle = tokio::time::timeout(Duration::from_millis(50), compressed.frame()).await;
        assert!(idle.is_err(), "{c}: output without new input");

        send(&tx, &tail).await;
        drop(tx);
        let rest = collect(compressed).await.unwrap();
        dtx.send(Ok(Frame::data(Bytes::from(rest)))).await.unwrap();
        drop(dtx);
        let rest = collect(decoded).await.unwrap();
        assert_eq!(rest, tail, "{c}");
    }
}

#[tokio::test]
async fn decompress_body_frames_stay_small_on_a_bomb() {
    let zeros = vec![0u8; 64 * MIB];
    for c in CODED {
        let packed = compress(c, &zeros, Level::Fast).unwrap();
        let mut body = DecompressBody::new(Full::new(packed), c);
        // Read 4 MiB of it: every frame is small however much the input expands.
        let mut total = 0;
        while total < 4 * MIB {
            let data = next_data(&mut body).await.unwrap();
            assert!(data.len() <= FRAME_MAX, "{c}: frame of {}", data.len());
            assert!(data.iter().all(|&b| b == 0));
            total += data.len();
        }
    }
}

#[tokio::test]
async fn empty_bodies() {
    for c in Coding::ALL {
        let empty = Full::new(Bytes::new());
        assert!(
            collect(DecompressBody::new(empty, c))
                .await
                .unwrap()
                .is_empty(),
            "{c}"
        );
        let (tx, body) = channel();
        drop(tx);
        assert!(
            collect(DecompressBody::new(body, c))
                .await
                .unwrap()
                .is_empty(),
            "{c}"
        );

        let empty = Full::new(Bytes::new());
        let packed = collect(CompressBody::new(empty, c, Level::Fast))
            .await
            .unwrap();
        assert!(decompress(c, &packed, 0).unwrap().is_empty(), "{c}");
    }
}

#[tokio::test]
async fn truncated_or_corrupt_stream_is_an_error() {
    let data = html(100_000, 29);
    for c in CODED {
        let packed = compress(c, &data, Level::Default).unwrap();
        let cut = packed.slice(..packed.len() - 3);
        let r = collect(DecompressBody::new(
            stream_in_chunks(cut.to_vec(), 30, 1000),
            c,
        ))
        .await;
        assert!(r.is_err(), "{c}: truncated");

        let noise = Rng::new(31).bytes(5000);
        let r = collect(DecompressBody::new(stream_in_chunks(noise, 32, 700), c)).await;
        if c != Br {
            assert!(r.is_err(), "{c}: noise");
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("backend went away")]
struct BackendGone;

#[tokio::test]
async fn inner_errors_come_out_as_they_went_in() {
    for c in Coding::ALL {
        let (tx, body) = channel();
        send(&tx, &html(10_000, 33)).await;
        tx.send(Err(Box::new(BackendGone))).await.unwrap();
        let e = collect(CompressBody::new(body, c, Level::Fast))
            .await
            .unwrap_err();
        assert!(e.is::<BackendGone>(), "{c}: {e:?}");

        let (tx, body) = channel();
        if c != Identity {
            let packed = compress(c, &html(10_000, 34), Level::Fast).unwrap();
            send(&tx, &packed[..packed.len() / 2]).await;
        }
        tx.send(Err(Box::new(BackendGone))).await.unwrap();
        let e = collect(DecompressBody::new(body, c)).await.unwrap_err();
        assert!(e.is::<BackendGone>(), "{c}: {e:?}");
    }
}

#[tokio::test]
async fn identity_passes_frames_through() {
    let (tx, body) = channel();
    send(&tx, b"hello").await;
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-t", http::HeaderValue::from_static("1"));
    tx.send(Ok(Frame::trailers(trailers.clone())))
        .await
        .unwrap();
    drop(tx);
    let mut b = CompressBody::new(body, Identity, Level::Fast);
    let f = b.frame().await.unwrap().unwrap();
    assert_eq!(f.into_data().unwrap(), "hello");
    let f = b.frame().await.unwrap().unwrap();
    assert_eq!(f.into_trailers().unwrap(), trailers);
    assert!(b.frame().await.is_none());
}

#[tokio::test]
async fn size_hints() {
    let full = Full::new(Bytes::from_static(b"abc"));
    let b = CompressBody::new(full.clone(), Identity, Level::Fast);
    assert_eq!(b.size_hint().exact(), Some(3));
    let b = CompressBody::new(full.clone(), Gzip, Level::Fast);
    assert_eq!(b.size_hint().exact(), None);
    assert!(!b.is_end_stream());
    let out = collect(DecompressBody::new(
        CompressBody::new(full, Br, Level::Fast),
        Br,
    ))
    .await
    .unwrap();
    assert_eq!(out, b"abc");
}

#[test]
fn bodies_are_send_and_unpin() {
    // hyper needs Send response bodies; ProxyBody is Unpin and so is its wrapper.
    fn check<T: Send + Unpin + 'static>() {}
    check::<CompressBody<Full<Bytes>>>();
    check::<DecompressBody<Full<Bytes>>>();
    check::<CompressBody<ChanBody>>();
}
