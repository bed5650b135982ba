//! X-Forwarded-For and Forwarded lines from a trusted proxy, read for the client's
//! network (levee-proxy's client_net.rs): never a panic, always an address.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut h = http::HeaderMap::new();
    for (i, line) in data.split(|b| *b == b'\n').enumerate() {
        if let Ok(v) = http::HeaderValue::from_bytes(line) {
            let name = if i % 2 == 0 {
                http::header::HeaderName::from_static("x-forwarded-for")
            } else {
                http::header::FORWARDED
            };
            h.append(name, v);
        }
    }
    levee_proxy::__fuzz::client_net(&h);
});
