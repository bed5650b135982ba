//! Whole-buffer codecs, for objects that are compressed once when stored and served many
//! times, and decoded with a hard limit on what they may expand to.

use std::io::{self, Read, Write};

use bytes::Bytes;

use crate::{Coding, Level};

/// Encoder levels for one [`Level`].
pub(crate) struct Params {
    pub gzip: i32,
    pub br: i32,
    pub zstd: i32,
}

/// The levels, chosen on a 100 KiB sample of real HTML (two pages of the Rust book as
/// shipped with rustup, `examples/levels.rs`; release build on one core of this 2-core
/// machine while other builds ran, best of repeated runs; flate2 on its default
/// miniz_oxide backend):
///
/// ```text
/// coding level  bytes  ratio  compress  decompress (MB/s of HTML)
/// gzip     1    36259  2.82     220       720
/// gzip     2    29751  3.44     139       860
/// gzip     3    27605  3.71      83       950   <- Fast
/// gzip     4    27268  3.76      75       970
/// gzip     6    26732  3.83      38      1000   <- Default
/// gzip     9    26671  3.84      28      1000
/// br       1    42596  2.40     118       237
/// br       2    24628  4.16     123       930
/// br       3    24061  4.26     113       960
/// br       4    23056  4.44      80      1025   <- Fast
/// br       5    21728  4.71      52       990
/// br       6    21535  4.76      43      1050   <- Default
/// br       7    21457  4.77      21      1065
/// br      10    19273  5.31     1.7       610
/// br      11    18891  5.42     1.0       860
/// zstd     1    26055  3.93     695      1770
/// zstd     3    24424  4.19     515      1690   <- Fast
/// zstd     5    23319  4.39     171      1510
/// zstd     6    22743  4.50     123      1580   <- Default
/// zstd     7    22562  4.54      81      1630
/// zstd    19    21382  4.79     4.4      1440
/// ```
///
/// Fast (streamed while a client waits, paid on every response): gzip 1 is 31% bigger
/// than gzip 3 for 2.7× the speed, while gzip 3 is within 3.3% of gzip 6's size at 2.2×
/// its speed; brotli 4 is smaller than gzip 6 at twice its speed, brotli 5 costs 1.5×
/// more for 6% (brotli 2–3 are a little faster and 4–7% bigger; 4 is also what large
/// CDNs use on the fly); zstd 3 is zstd's own default and at ~500 MB/s costs nothing
/// beside a PHP backend, where zstd 1 saves little time and loses 7%.
///
/// Default (stored objects, compressed once per fill, but fills can be frequent when
/// anonymous HTML is micro-cached): gzip 6, the usual default, since 9 saves 0.2% for
/// 35% more time; brotli 6 (2.4 ms a page), 0.9% smaller than 5 for 17% more time, the
/// last level before the cost doubles (7, for 0.4%) and then explodes (10–11: 60–100 ms
/// a page); zstd 6, within 6% of brotli 6's size at almost three times its speed, where
/// 7 and beyond gain under 1% each for a third or more of the speed.
pub(crate) fn params(level: Level) -> Params {
    match level {
        Level::Fast => Params {
            gzip: 3,
            br: 4,
            zstd: 3,
        },
        Level::Default => Params {
            gzip: 6,
            br: 6,
            zstd: 6,
        },
    }
}

/// Window of the streaming brotli and zstd encoders: 1 MiB. Windows fill lazily, so this
/// only bounds long streams: a stream of more than 1 MiB holds 1 MiB of history instead
/// of 4 MiB (brotli's default) or 2 MiB (zstd 3's), and loses nothing measurable
/// (std's 920 KiB `Vec` page: ratio 9.94 for brotli 4 at 2^20 and 2^22, 9.01 for zstd 3).
/// Measured memory per open stream after one 81 KiB page (RSS of 200 streams): gzip
/// 0.33 MiB, brotli 4 1.6 MiB, zstd 3 1.0 MiB to compress; 0.1–0.3 MiB to decompress.
pub(crate) const STREAM_WINDOW_LOG: u32 = 20;

/// Largest zstd window accepted when decoding: 8 MiB, the limit RFC 9659 sets for the
/// `zstd` content coding. Without it a frame could make the decoder allocate up to
/// 128 MiB (zstd's own default limit) per stream. Our encoders stay within it: zstd
/// levels up to 19 use windows of at most 8 MiB, and ours are 6 and below.
pub(crate) const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// Compresses a whole buffer. `Identity` returns a copy.
pub fn compress(c: Coding, data: &[u8], level: Level) -> io::Result<Bytes> {
    let p = params(level);
    // HTML compresses 4-5×: a quarter of the input avoids most regrowth.
    let capacity = data.len() / 4 + 64;
    let mut out = match c {
        Coding::Identity => return Ok(Bytes::copy_from_slice(data)),
        Coding::Gzip => {
            let mut e = flate2::write::GzEncoder::new(
                Vec::with_capacity(capacity),
                flate2::Compression::new(p.gzip.unsigned_abs()),
            );
            e.write_all(data)?;
            e.finish()?
        }
        Coding::Br => {
            let params = brotli::enc::BrotliEncoderParams {
                quality: p.br,
                lgwin: 22,
                size_hint: data.len(),
                ..Default::default()
            };
            let mut out = Vec::with_capacity(capacity);
            brotli::BrotliCompress(&mut &data[..], &mut out, &params)?;
            out
        }
        // One shot with the size known: zstd then sizes its tables and window to the
        // input and records the content size in the frame header.
        Coding::Zstd => zstd::bulk::compress(data, p.zstd)?,
    };
    // Stored objects live long and are weighed by their length: give back the slack.
    out.shrink_to_fit();
    Ok(Bytes::from(out))
}

/// [`compress`] of the concatenation of `chunks`, without concatenating them first: a
/// response arrives in pieces, and copying a 100 KiB page only to compress it leaves a
/// 100 KiB hole in the heap next to each 20 KiB stored result (measured: twice the RSS
/// per cached page with glibc's malloc).
pub fn compress_chunks(c: Coding, chunks: &[Bytes], level: Level) -> io::Result<Bytes> {
    let total: usize = chunks.iter().map(|b| b.len()).sum();
    let p = params(level);
    let capacity = total / 4 + 64;
    let mut out = match c {
        Coding::Identity => {
            let mut v = Vec::with_capacity(total);
            for b in chunks {
                v.extend_from_slice(b);
            }
            return Ok(Bytes::from(v));
        }
        Coding::Gzip => gzip_chunks(chunks, total, p.gzip.unsigned_abs())?,
        Coding::Br => {
            let params = brotli::enc::BrotliEncoderParams {
                quality: p.br,
                lgwin: 22,
                size_hint: total,
                ..Default::default()
            };
            let mut out = Vec::with_capacity(capacity);
            let mut reader = Chunks {
                chunks,
                at: 0,
                off: 0,
            };
            brotli::BrotliCompress(&mut reader, &mut out, &params)?;
            out
        }
        Coding::Zstd => {
            let mut e = zstd::stream::write::Encoder::new(Vec::with_capacity(capacity), p.zstd)?;
            // As the one-shot API does: tables sized to the input, size in the header.
            e.set_pledged_src_size(Some(total as u64))?;
            e.include_contentsize(true)?;
            for b in chunks {
                e.write_all(b)?;
            }
            e.finish()?
        }
    };
    out.shrink_to_fit();
    Ok(Bytes::from(out))
}

thread_local! {
    /// One deflate state per thread and level, reset between uses. Setting one up costs
    /// ~300 KiB of allocation and zeroing, far more than compressing a 1 KiB page (a
    /// cache of small objects filled 4x slower with a fresh encoder per object).
    static DEFLATE: std::cell::RefCell<Option<(u32, flate2::Compress)>> =
        const { std::cell::RefCell::new(None) };
}

/// RFC 1952 gzip of the chunks: a fixed 10-byte header (no name, no time, as HTTP
/// compressors write it), raw deflate from the thread's reused state, CRC-32 and length.
fn gzip_chunks(chunks: &[Bytes], total: usize, level: u32) -> io::Result<Vec<u8>> {
    use flate2::{Compress, Compression, FlushCompress, Status};
    let mut out = Vec::with_capacity(total / 4 + 64);
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
    let mut crc = flate2::Crc::new();
    DEFLATE.with(|cell| -> io::Result<()> {
        let mut slot = cell.borrow_mut();
        let z = match &mut *slot {
            Some((l, z)) if *l == level => {
                z.reset();
                z
            }
            other => {
                &mut other
                    .insert((level, Compress::new(Compression::new(level), false)))
                    .1
            }
        };
        let mut feed = |input: &[u8], flush: FlushCompress| -> io::Result<Status> {
            let mut at = 0;
            if input.is_empty() && flush == FlushCompress::None {
                return Ok(Status::Ok);
            }
            loop {
                if out.capacity() - out.len() < 256 {
                    out.reserve(out.len().max(4096));
                }
                let (in_before, out_before) = (z.total_in(), z.total_out());
                let status = z.compress_vec(&input[at..], &mut out, flush)?;
                at += usize::try_from(z.total_in() - in_before).unwrap_or(0);
                if z.total_in() == in_before
                    && z.total_out() == out_before
                    && status == Status::BufError
                {
                    // No progress with room to write: never loop on it.
                    return Err(io::Error::other("deflate made no progress"));
                }
                let done = match flush {
                    FlushCompress::Finish => status == Status::StreamEnd,
                    _ => at >= input.len(),
                };
                if done {
                    return Ok(status);
                }
            }
        };
        for b in chunks {
            crc.update(b);
            feed(b, FlushCompress::None)?;
        }
        feed(&[], FlushCompress::Finish)?;
        Ok(())
    })?;
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
    out.extend_from_slice(&(total as u32).to_le_bytes());
    Ok(out)
}

/// `Read` over a list of buffers, in order.
struct Chunks<'a> {
    chunks: &'a [Bytes],
    at: usize,
    off: usize,
}

impl Read for Chunks<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while let Some(c) = self.chunks.get(self.at) {
            let rest = c.get(self.off..).unwrap_or(&[]);
            if rest.is_empty() {
                self.at += 1;
                self.off = 0;
                continue;
            }
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.off += n;
            return Ok(n);
        }
        Ok(0)
    }
}

/// Decompression produced more than the caller's limit.
#[derive(Debug, thiserror::Error)]
#[error("decompressed content exceeds the limit of {limit} bytes")]
pub struct TooLarge {
    pub limit: usize,
}

/// Whether an error of [`decompress`] is its output limit (as opposed to corrupt or
/// truncated input).
pub fn is_too_large(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<TooLarge>())
}

fn too_large(limit: usize) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, TooLarge { limit })
}

/// Decompresses a whole buffer, failing with [`TooLarge`] (see [`is_too_large`]) rather
/// than producing more than `max_output` bytes: the output buffer never grows beyond
/// `max_output`, so a decompression bomb costs at most that much memory, plus the
/// decoder's window (32 KiB for gzip, up to 16 MiB for brotli, up to 8 MiB for zstd) and
/// a 32 KiB read buffer. Decoding stops as soon as the limit is crossed.
///
/// Empty input is empty output for every coding (backends do label empty bodies
/// `gzip`); otherwise truncated or corrupt input is an error. Concatenated gzip members
/// and zstd frames are decoded in full, as RFC 1952 and RFC 8878 define them.
pub fn decompress(c: Coding, data: &[u8], max_output: usize) -> io::Result<Bytes> {
    if data.is_empty() {
        return Ok(Bytes::new());
    }
    let out = match c {
        Coding::Identity => {
            if data.len() > max_output {
                return Err(too_large(max_output));
            }
            return Ok(Bytes::copy_from_slice(data));
        }
        Coding::Gzip => read_limited(
            flate2::read::MultiGzDecoder::new(data),
            data.len(),
            max_output,
        )?,
        Coding::Br => read_limited(
            brotli::Decompressor::new(data, 4096),
            data.len(),
            max_output,
        )?,
        Coding::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(data)?;
            d.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            read_limited(d, data.len(), max_output)?
        }
    };
    Ok(Bytes::from(out))
}

/// Reads a decoder to its end into a buffer whose capacity never exceeds `max_output`
/// (`read_to_end` over `take` would be simpler but doubles its buffer, reaching up to
/// twice the limit), and that ends exactly as long as its content.
fn read_limited(mut r: impl Read, input_len: usize, max_output: usize) -> io::Result<Vec<u8>> {
    // Start from a guess (HTML expands 4-5×), not from the limit: most limits are far
    // above most objects.
    let guess = input_len.saturating_mul(4).min(16 << 20).min(max_output);
    let mut out: Vec<u8> = Vec::with_capacity(guess);
    let mut chunk = [0u8; 32 * 1024];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let len = out.len().saturating_add(n);
        if len > max_output {
            return Err(too_large(max_output));
        }
        if len > out.capacity() {
            let target = out.capacity().saturating_mul(2).max(len).min(max_output);
            out.reserve_exact(target - out.len());
        }
        out.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
    // Stored objects live long and are weighed by their length: give back the slack.
    out.shrink_to_fit();
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn chunked_compression_decodes_to_the_concatenation() {
        let text: Vec<u8> = (0..200_000u32)
            .map(|i| b"levee cache php "[(i % 16) as usize] ^ ((i / 977) as u8 & 1))
            .collect();
        let chunks: Vec<Bytes> = text
            .chunks(7919)
            .map(Bytes::copy_from_slice)
            .chain([Bytes::new()])
            .collect();
        for c in [Coding::Identity, Coding::Gzip, Coding::Br, Coding::Zstd] {
            let packed = compress_chunks(c, &chunks, Level::Default).unwrap();
            let back = decompress(c, &packed, 1 << 20).unwrap();
            assert_eq!(back, text, "{c:?}");
            if c != Coding::Identity {
                assert!(packed.len() < text.len() / 4, "{c:?}: {}", packed.len());
            }
        }
        // The thread's reused deflate state: switching levels and reusing it gives the
        // same bytes as a fresh gzip encoder would decode to.
        for level in [Level::Fast, Level::Default, Level::Default, Level::Fast] {
            for input in [&text[..10], &text[..], &[][..]] {
                let packed =
                    compress_chunks(Coding::Gzip, &[Bytes::copy_from_slice(input)], level).unwrap();
                let mut back = Vec::new();
                flate2::read::GzDecoder::new(&packed[..])
                    .read_to_end(&mut back)
                    .unwrap();
                assert_eq!(back, input);
            }
        }
    }
}
