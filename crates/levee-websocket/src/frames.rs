//! Where the frames of a WebSocket byte stream begin and end (RFC 6455 §5.2), read from
//! the bytes levee relays without changing them, so that levee can end a connection
//! between two frames with a Close frame of its own, never inside one.
//!
//! Hand-written because relaying is all levee does with the frames: a WebSocket library
//! would parse and re-frame every message (and refuse extensions it does not know, such
//! as permessage-deflate's compressed frames); this only counts header and payload bytes.

/// The frame boundaries of one direction of a WebSocket.
#[derive(Debug, Default, Clone)]
pub struct Boundaries {
    /// The header bytes of the frame being read, while it is incomplete.
    header: [u8; 14],
    have: usize,
    /// Payload bytes left of the current frame, once its header is complete.
    left: u64,
}

impl Boundaries {
    /// Whether the bytes fed so far end exactly between two frames.
    pub fn at_boundary(&self) -> bool {
        self.have == 0 && self.left == 0
    }

    /// Reads `data` as the next bytes of the stream. With `stop_at_boundary`, stops at
    /// the first frame boundary within `data` (at once when already at one); returns how
    /// many bytes it read.
    pub fn feed(&mut self, data: &[u8], stop_at_boundary: bool) -> usize {
        let mut at = 0;
        while at < data.len() {
            if stop_at_boundary && self.at_boundary() {
                return at;
            }
            if self.left > 0 {
                let take = usize::try_from(self.left)
                    .unwrap_or(usize::MAX)
                    .min(data.len() - at);
                self.left -= take as u64;
                at += take;
                continue;
            }
            // A header byte.
            self.header[self.have] = data[at];
            self.have += 1;
            at += 1;
            if let Some(payload) = payload_len(&self.header[..self.have]) {
                self.have = 0;
                self.left = payload;
            }
        }
        at
    }
}

/// The payload length of a complete frame header, or `None` while it is incomplete.
fn payload_len(h: &[u8]) -> Option<u64> {
    if h.len() < 2 {
        return None;
    }
    let masked = h[1] & 0x80 != 0;
    let (len_bytes, short) = match h[1] & 0x7f {
        126 => (2, None),
        127 => (8, None),
        n => (0, Some(u64::from(n))),
    };
    let full = 2 + len_bytes + if masked { 4 } else { 0 };
    if h.len() < full {
        return None;
    }
    Some(match short {
        Some(n) => n,
        None => h[2..2 + len_bytes]
            .iter()
            .fold(0u64, |n, b| (n << 8) | u64::from(*b)),
    })
}

/// `1001 Going Away` (RFC 6455 §7.4.1): the server goes down.
pub const GOING_AWAY: u16 = 1001;

/// A Close frame with `code`, as a server sends it (unmasked).
pub fn close_from_server(code: u16) -> [u8; 4] {
    let [a, b] = code.to_be_bytes();
    [0x88, 0x02, a, b]
}

/// A Close frame with `code`, as a client sends it: masked with `key` (§5.3: any key
/// levee cannot be made to predict serves; it protects caches between, not content).
pub fn close_from_client(code: u16, key: [u8; 4]) -> [u8; 8] {
    let [a, b] = code.to_be_bytes();
    [
        0x88,
        0x82,
        key[0],
        key[1],
        key[2],
        key[3],
        a ^ key[0],
        b ^ key[1],
    ]
}

/// Bytes no one outside can predict, for the keys levee makes: a Close frame's mask, an
/// HTTP/2 handshake's `Sec-WebSocket-Key`. RFC 6455 asks only that they not be guessable
/// by the page's script (they protect caches in between, not content): std's per-process
/// random hash keys, mixed with the time, serve.
pub fn unpredictable() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 16];
    for half in out.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::Instant::now().elapsed().as_nanos());
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as a client sends it: masked, the payload length in its three forms.
    fn frame(len: usize, masked: bool) -> Vec<u8> {
        let mut f = vec![0x82];
        let m = if masked { 0x80 } else { 0 };
        match len {
            0..=125 => f.push(m | len as u8),
            126..=65535 => {
                f.push(m | 126);
                f.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                f.push(m | 127);
                f.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        if masked {
            f.extend_from_slice(&[1, 2, 3, 4]);
        }
        f.extend(std::iter::repeat_n(7u8, len));
        f
    }

    #[test]
    fn boundaries_are_found_in_any_chunking() {
        let mut stream = Vec::new();
        let mut ends = Vec::new();
        for (len, masked) in [
            (0, false),
            (5, true),
            (125, false),
            (126, true),
            (70_000, false),
            (3, true),
        ] {
            stream.extend(frame(len, masked));
            ends.push(stream.len());
        }
        for chunk in [1, 2, 3, 7, 100, 4096, stream.len()] {
            let mut b = Boundaries::default();
            let mut seen = Vec::new();
            let mut at = 0;
            for piece in stream.chunks(chunk) {
                let mut off = 0;
                while off < piece.len() {
                    let n = b.feed(&piece[off..], true);
                    if n == 0 {
                        // At a boundary: step over one byte of the next frame.
                        off += b.feed(&piece[off..off + 1], false);
                        at += 1;
                    } else {
                        off += n;
                        at += n;
                    }
                    if b.at_boundary() {
                        seen.push(at);
                    }
                }
            }
            assert_eq!(seen, ends, "chunks of {chunk}");
        }
    }

    #[test]
    fn a_split_header_is_not_a_boundary() {
        let f = frame(70_000, true);
        let mut b = Boundaries::default();
        assert!(b.at_boundary());
        assert_eq!(b.feed(&f[..3], true), 0, "at a boundary already");
        assert_eq!(b.feed(&f[..3], false), 3);
        assert!(!b.at_boundary());
        assert_eq!(b.feed(&f[3..], true), f.len() - 3);
        assert!(b.at_boundary());
    }

    #[test]
    fn close_frames() {
        assert_eq!(close_from_server(GOING_AWAY), [0x88, 2, 0x03, 0xe9]);
        let c = close_from_client(GOING_AWAY, [9, 8, 7, 6]);
        assert_eq!(c[..6], [0x88, 0x82, 9, 8, 7, 6]);
        assert_eq!([c[6] ^ 9, c[7] ^ 8], [0x03, 0xe9]);
    }
}
