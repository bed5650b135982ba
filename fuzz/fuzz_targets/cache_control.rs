//! Cache-Control, Pragma and Expires as a response and as a request carry them.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut h = http::HeaderMap::new();
    for (i, line) in data.split(|b| *b == b'\n').enumerate() {
        let Ok(v) = http::HeaderValue::from_bytes(line) else { continue };
        let name = match i % 3 {
            0 => http::header::CACHE_CONTROL,
            1 => http::header::PRAGMA,
            _ => http::header::EXPIRES,
        };
        h.append(name, v);
    }
    let _ = levee_cache::CacheControl::from_headers(&h);
    let _ = levee_cache::CacheControl::from_request_headers(&h);
});
