//! A proven session's line, as the disk tier's `sessions` file and other nodes through
//! Redis give it back (both untrusted): never a panic, and whatever is read is written
//! back to the same line.
#![no_main]
use levee_cache::proof::ProofChange;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    if let Some(change) = ProofChange::from_line(data) {
        assert_eq!(ProofChange::from_line(&change.to_line()), Some(change));
    }
});
