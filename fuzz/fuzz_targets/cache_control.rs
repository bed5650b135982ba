//! Cache-Control, Pragma and Expires as a response and as a request carry them, and the
//! targeted fields (CDN-Cache-Control, Levee-Cache-Control: RFC 9213 Dictionaries).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut h = http::HeaderMap::new();
    for (i, line) in data.split(|b| *b == b'\n').enumerate() {
        let Ok(v) = http::HeaderValue::from_bytes(line) else { continue };
        let name = match i % 5 {
            0 => http::header::CACHE_CONTROL,
            1 => http::header::PRAGMA,
            2 => http::header::EXPIRES,
            3 => levee_cache::targeted::CDN_CACHE_CONTROL.clone(),
            _ => levee_cache::targeted::LEVEE_CACHE_CONTROL.clone(),
        };
        h.append(name, v);
    }
    let _ = levee_cache::CacheControl::from_headers(&h);
    let _ = levee_cache::CacheControl::from_request_headers(&h);
    let _ = levee_cache::targeted::targeted(&h);
    let _ = levee_cache::targeted::parse(data);
});
