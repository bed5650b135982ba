//! Accept-Encoding with q-values, and the coding chosen from it.
#![no_main]
use levee_compress::{Accepted, Coding};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    let accepted = Accepted::from_value(data);
    let chosen = accepted.choose(&[Coding::Zstd, Coding::Br, Coding::Gzip, Coding::Identity]);
    if let Some(c) = chosen {
        assert!(accepted.accepts(c) || c == Coding::Identity, "{data:?} -> {c:?}");
    }
});
