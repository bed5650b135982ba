//! Measures ratio and speed of every gzip, brotli and zstd level on a sample, to choose
//! `Level::Fast` and `Level::Default` (the figures are in `src/codec.rs`).
//!
//! `cargo run --release -p levee-compress --example levels -- PAGE.html [MORE.html...]`
//! The files are concatenated and cut to 100 KiB; without arguments, a page of the Rust
//! book that ships with rustup's documentation is used if present.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

const SAMPLE: usize = 100 * 1024;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        let home = std::env::var("HOME").unwrap_or_default();
        let book = format!(
            "{home}/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/book"
        );
        paths.push(format!("{book}/ch02-00-guessing-game-tutorial.html"));
        paths.push(format!(
            "{book}/ch12-03-improving-error-handling-and-modularity.html"
        ));
    }
    let mut data = Vec::new();
    for p in &paths {
        data.extend_from_slice(&std::fs::read(p)?);
    }
    data.truncate(SAMPLE);
    println!("sample: {} bytes from {paths:?}", data.len());
    println!(
        "{:<8} {:>5} {:>8} {:>7} {:>10} {:>10}",
        "coding", "level", "bytes", "ratio", "comp MB/s", "dec MB/s"
    );

    for level in 1..=9 {
        let c = |d: &[u8]| -> std::io::Result<Vec<u8>> {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
            e.write_all(d)?;
            e.finish()
        };
        let d = |d: &[u8]| -> std::io::Result<Vec<u8>> {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(d).read_to_end(&mut out)?;
            Ok(out)
        };
        row("gzip", level as i32, &data, c, d)?;
    }
    for level in 0..=11 {
        let c = |d: &[u8]| -> std::io::Result<Vec<u8>> {
            let params = brotli::enc::BrotliEncoderParams {
                quality: level,
                lgwin: 22,
                size_hint: d.len(),
                ..Default::default()
            };
            let mut out = Vec::new();
            brotli::BrotliCompress(&mut &d[..], &mut out, &params)?;
            Ok(out)
        };
        let d = |d: &[u8]| -> std::io::Result<Vec<u8>> {
            let mut out = Vec::new();
            brotli::Decompressor::new(d, 4096).read_to_end(&mut out)?;
            Ok(out)
        };
        row("br", level, &data, c, d)?;
    }
    for level in [1, 2, 3, 4, 5, 6, 7, 9, 12, 15, 19] {
        let c = |d: &[u8]| zstd::bulk::compress(d, level);
        let d = |d: &[u8]| zstd::stream::decode_all(d);
        row("zstd", level, &data, c, d)?;
    }
    Ok(())
}

type Codec<'a> = &'a dyn Fn(&[u8]) -> std::io::Result<Vec<u8>>;

fn row(
    name: &str,
    level: i32,
    data: &[u8],
    c: impl Fn(&[u8]) -> std::io::Result<Vec<u8>>,
    d: impl Fn(&[u8]) -> std::io::Result<Vec<u8>>,
) -> std::io::Result<()> {
    let packed = c(data)?;
    if d(&packed)? != data {
        return Err(std::io::Error::other("round trip differs"));
    }
    let comp = speed(data.len(), &|x| c(x), data)?;
    let dec = speed(data.len(), &|x| d(x), &packed)?;
    println!(
        "{name:<8} {level:>5} {:>8} {:>7.2} {comp:>10.1} {dec:>10.1}",
        packed.len(),
        data.len() as f64 / packed.len() as f64
    );
    Ok(())
}

/// Best of several timed batches, in MB/s of uncompressed data.
fn speed(raw_len: usize, f: Codec<'_>, input: &[u8]) -> std::io::Result<f64> {
    let mut best = Duration::MAX;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(400) {
        let t = Instant::now();
        f(input)?;
        best = best.min(t.elapsed());
    }
    Ok(raw_len as f64 / best.as_secs_f64() / 1e6)
}
