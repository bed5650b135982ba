//! Range and If-Range against a file whose length the input's first 8 bytes give.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let len = u64::from_le_bytes(data[..8].try_into().unwrap_or([0; 8]));
    let mut h = http::HeaderMap::new();
    for (i, line) in data[8..].split(|b| *b == b'\n').enumerate() {
        let Ok(v) = http::HeaderValue::from_bytes(line) else { continue };
        let name = if i == 1 { http::header::IF_RANGE } else { http::header::RANGE };
        h.append(name, v);
    }
    levee_static::__fuzz::range(&h, len);
});
