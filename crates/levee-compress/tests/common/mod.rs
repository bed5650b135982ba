//! Test data shared by the integration tests.
#![allow(dead_code)]

/// xorshift64*: deterministic pseudo-random bytes without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// HTML-like text of `n` bytes: repetitive markup with varying words, as a PHP page.
pub fn html(n: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "levee", "cache", "proxy", "wiki", "board", "article", "comment", "reply", "member",
        "notice", "gallery", "search", "profile", "login", "archive", "tag",
    ];
    let mut rng = Rng::new(seed);
    let mut out = String::with_capacity(n + 256);
    out.push_str("<!DOCTYPE html><html lang=\"ko\"><head><meta charset=\"utf-8\"><title>levee</title></head><body>\n");
    let mut i = 0u64;
    while out.len() < n {
        i += 1;
        let a = WORDS[rng.range(0, WORDS.len() - 1)];
        let b = WORDS[rng.range(0, WORDS.len() - 1)];
        out.push_str(&format!(
            "<li class=\"item {a}\"><a href=\"/index.php?mid={b}&amp;document_srl={}\">{a} {b} #{i}</a> <span class=\"date\">2024-0{}-1{}</span></li>\n",
            rng.next_u64() % 100_000,
            rng.range(1, 9),
            rng.range(0, 9),
        ));
    }
    let mut v = out.into_bytes();
    v.truncate(n);
    v
}

/// Text then random bytes: both halves of a real mixed workload.
pub fn mixed(n: usize, seed: u64) -> Vec<u8> {
    let mut v = html(n / 2, seed);
    v.extend_from_slice(&Rng::new(seed ^ 0xdead_beef).bytes(n - n / 2));
    v
}
