//! HTTP dates as levee reads them (`Expires`, `Date`, `Last-Modified`,
//! `If-Modified-Since`): names are case-insensitive, so a value and its lowercase and
//! uppercase forms are the same date or all invalid.
#![no_main]
use std::time::{Duration, UNIX_EPOCH};

use levee_cache::date::parse_at;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    // A fixed now: the two-digit years of RFC 850 depend on it.
    let now = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
    let date = parse_at(data, now);
    assert_eq!(parse_at(&data.to_ascii_lowercase(), now), date, "{data:?}");
    assert_eq!(parse_at(&data.to_ascii_uppercase(), now), date, "{data:?}");
});
