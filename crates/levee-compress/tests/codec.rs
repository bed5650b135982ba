//! Whole-buffer codecs: round trips, limits, hostile input.
// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;

use common::{html, mixed, Rng};
use levee_compress::{compress, decompress, is_too_large, Coding, Level};
use Coding::{Br, Gzip, Identity, Zstd};

const MIB: usize = 1024 * 1024;
const CODED: [Coding; 3] = [Gzip, Br, Zstd];

#[test]
fn round_trips() {
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("one byte", b"x".to_vec()),
        ("html 1 MiB", html(MIB, 1)),
        ("random 1 MiB", Rng::new(2).bytes(MIB)),
        ("mixed 1 MiB", mixed(MIB, 3)),
    ];
    for c in Coding::ALL {
        for level in [Level::Fast, Level::Default] {
            for (name, data) in &inputs {
                let packed = compress(c, data, level).unwrap();
                let back = decompress(c, &packed, data.len()).unwrap();
                assert!(back == data[..], "{c} {level:?} {name}");
                if c == Identity {
                    assert_eq!(packed, data[..]);
                }
            }
        }
    }
}

#[test]
fn text_shrinks_and_random_does_not_grow_much() {
    let text = html(MIB, 4);
    let noise = Rng::new(5).bytes(MIB);
    for c in CODED {
        let t = compress(c, &text, Level::Default).unwrap();
        assert!(t.len() * 3 < text.len(), "{c}: {} bytes", t.len());
        let n = compress(c, &noise, Level::Default).unwrap();
        assert!(
            n.len() < noise.len() + noise.len() / 100,
            "{c}: {} bytes",
            n.len()
        );
    }
}

#[test]
fn empty_input_is_empty_output() {
    for c in Coding::ALL {
        assert!(decompress(c, &[], 0).unwrap().is_empty());
        assert!(decompress(c, &[], 10).unwrap().is_empty());
    }
}

#[test]
fn decompress_limit() {
    let data = html(MIB, 6);
    for c in Coding::ALL {
        let packed = compress(c, &data, Level::Fast).unwrap();
        assert_eq!(decompress(c, &packed, data.len()).unwrap(), data[..], "{c}");
        assert_eq!(decompress(c, &packed, usize::MAX).unwrap(), data[..], "{c}");
        for limit in [0, 1, 1000, data.len() - 1] {
            let e = decompress(c, &packed, limit).unwrap_err();
            assert!(is_too_large(&e), "{c} {limit}: {e}");
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        }
    }
}

#[test]
fn bomb_stops_at_the_limit() {
    // 64 MiB of zeros packs into a few KiB (or hundreds of bytes); decoding it with a
    // 1 MiB limit must stop there rather than expand it all.
    let zeros = vec![0u8; 64 * MIB];
    for c in CODED {
        let packed = compress(c, &zeros, Level::Fast).unwrap();
        assert!(packed.len() < 256 * 1024, "{c}: {}", packed.len());
        let e = decompress(c, &packed, MIB).unwrap_err();
        assert!(is_too_large(&e), "{c}: {e}");
    }
}

#[test]
fn truncated_input_is_an_error() {
    let data = html(200 * 1024, 7);
    for c in CODED {
        let packed = compress(c, &data, Level::Default).unwrap();
        for cut in [1, 5, 10, packed.len() / 2, packed.len() - 1] {
            let r = decompress(c, &packed[..cut], usize::MAX);
            assert!(r.is_err(), "{c} cut at {cut} of {}", packed.len());
        }
    }
}

#[test]
fn garbage_and_corruption_never_panic() {
    let mut rng = Rng::new(8);
    let data = html(64 * 1024, 9);
    for c in CODED {
        // Pure noise is never valid gzip or zstd (magic numbers); for brotli it may
        // decode to something, which is fine as long as nothing panics.
        for len in [1, 2, 3, 10, 100, 4096] {
            let noise = rng.bytes(len);
            let r = decompress(c, &noise, MIB);
            if c != Br {
                assert!(r.is_err(), "{c} {len}");
            }
        }
        let packed = compress(c, &data, Level::Fast).unwrap();
        for _ in 0..300 {
            let mut bad = packed.to_vec();
            for _ in 0..rng.range(1, 4) {
                let i = rng.range(0, bad.len() - 1);
                bad[i] ^= 1 << rng.range(0, 7);
            }
            if let Ok(out) = decompress(c, &bad, MIB) {
                assert!(out.len() <= MIB);
            }
        }
    }
}

#[test]
fn checksums_are_verified() {
    let data = html(10_000, 10);
    let mut packed = compress(Gzip, &data, Level::Default).unwrap().to_vec();
    let n = packed.len();
    packed[n - 6] ^= 0xff; // CRC32 in the gzip trailer
    assert!(decompress(Gzip, &packed, MIB).is_err());
}

#[test]
fn concatenated_members_and_frames() {
    let a = html(50_000, 11);
    let b = html(30_000, 12);
    let mut ab = a.clone();
    ab.extend_from_slice(&b);
    for c in [Gzip, Zstd] {
        let mut packed = compress(c, &a, Level::Fast).unwrap().to_vec();
        packed.extend_from_slice(&compress(c, &b, Level::Default).unwrap());
        assert_eq!(decompress(c, &packed, MIB).unwrap(), ab[..], "{c}");
    }
}

#[test]
fn zstd_windows_above_8_mib_are_refused() {
    // A frame declaring a 16 MiB window (as a level-22 or long-distance encoder would)
    // would make the decoder allocate it; RFC 9659 caps the zstd coding at 8 MiB.
    let data = html(100_000, 13);
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    e.set_parameter(zstd::zstd_safe::CParameter::WindowLog(24))
        .unwrap();
    e.write_all(&data).unwrap();
    let packed = e.finish().unwrap();
    assert!(decompress(Zstd, &packed, MIB).is_err());
    // The same data with an 8 MiB window passes.
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    e.set_parameter(zstd::zstd_safe::CParameter::WindowLog(23))
        .unwrap();
    e.write_all(&data).unwrap();
    let packed = e.finish().unwrap();
    assert_eq!(decompress(Zstd, &packed, MIB).unwrap(), data[..]);
}

#[test]
fn other_implementations_read_our_output() {
    // Decode with the plain single-member readers too, as a client would.
    use std::io::Read;
    let data = html(100_000, 14);
    let gz = compress(Gzip, &data, Level::Default).unwrap();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut out)
        .unwrap();
    assert_eq!(out, data);
    let zs = compress(Zstd, &data, Level::Default).unwrap();
    assert_eq!(zstd::stream::decode_all(&zs[..]).unwrap(), data);
    let br = compress(Br, &data, Level::Default).unwrap();
    let mut out = Vec::new();
    brotli::BrotliDecompress(&mut &br[..], &mut out).unwrap();
    assert_eq!(out, data);
}
