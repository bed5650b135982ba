//! A stream of FastCGI records from php-fpm.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| levee_fastcgi::__fuzz::records(data));
