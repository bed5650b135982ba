//! Set-Cookie lines that teach session names, then Cookie fields classified by them.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (set, req) = match data.iter().position(|b| *b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, data),
    };
    let headers = |bytes: &[u8], name: http::HeaderName| {
        let mut h = http::HeaderMap::new();
        for line in bytes.split(|b| *b == b'\n') {
            if let Ok(v) = http::HeaderValue::from_bytes(line) {
                h.append(name.clone(), v);
            }
        }
        h
    };
    levee_proxy::__fuzz::cookies(
        &headers(set, http::header::SET_COOKIE),
        &headers(req, http::header::COOKIE),
    );
});
