//! Host values: a normalized host normalizes to itself, and the key is built from it.
#![no_main]
use levee_cache::key::normalize_host;
use levee_cache::{CacheKey, Scheme};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    if let Some(n) = normalize_host(data, Scheme::Http) {
        assert_eq!(normalize_host(&n, Scheme::Http).as_deref(), Some(&*n), "{data:?}");
        let mut h = http::HeaderMap::new();
        if let Ok(v) = http::HeaderValue::from_str(data) {
            h.insert(http::header::HOST, v);
            let uri: http::Uri = "/".parse().unwrap_or_default();
            let key = CacheKey::for_request(Scheme::Http, &uri, &h);
            assert_eq!(key.host(), n);
        }
    }
});
