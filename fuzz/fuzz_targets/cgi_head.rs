//! A CGI response head (Status:, Location:, header lines) from a PHP script.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| levee_fastcgi::__fuzz::cgi_head(data));
