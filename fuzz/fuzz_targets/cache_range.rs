//! Range and If-Range against a stored response whose length the input's first 8 bytes
//! give (levee-cache's range.rs, what the cache answers ranges with).
#![no_main]
use levee_cache::range::{decide, Ranges, Representation, COALESCE_GAP, MAX_SPECS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let len = u64::from_le_bytes(data[..8].try_into().unwrap_or([0; 8]));
    let mut request = http::HeaderMap::new();
    for (i, line) in data[8..].split(|b| *b == b'\n').enumerate() {
        let Ok(v) = http::HeaderValue::from_bytes(line) else { continue };
        let name = if i == 1 { http::header::IF_RANGE } else { http::header::RANGE };
        request.append(name, v);
    }
    let mut stored = http::HeaderMap::new();
    stored.insert(http::header::ETAG, http::HeaderValue::from_static("\"a\""));
    let rep = Representation { headers: &stored, len, origin_bytes: true };
    match decide(&request, rep) {
        Ranges::One(r) => assert!(r.start <= r.end && r.end < len, "{r:?} of {len}"),
        Ranges::Many(parts) => {
            assert!(parts.len() >= 2 && parts.len() <= MAX_SPECS);
            let mut sorted = parts.clone();
            sorted.sort_by_key(|r| r.start);
            for r in &sorted {
                assert!(r.start <= r.end && r.end < len, "{r:?} of {len}");
            }
            // Disjoint and apart: no byte is sent twice.
            for w in sorted.windows(2) {
                assert!(w[0].end.saturating_add(COALESCE_GAP) < w[1].start, "{parts:?}");
            }
        }
        Ranges::Full | Ranges::Unsatisfiable => {}
    }
});
