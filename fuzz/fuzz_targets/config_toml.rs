//! levee.toml: parsed, merged over the defaults and validated; errors, never panics.
#![no_main]
use levee_config::{Combine, Options, Settings};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    let Ok(options) = toml::from_str::<Options>(data) else { return };
    let with_backend: Options =
        toml::from_str("backend = \"http://127.0.0.1:9\"").unwrap_or_default();
    let _ = Settings::from_options(options.clone());
    let _ = Settings::from_options(options.combine(with_backend));
});
