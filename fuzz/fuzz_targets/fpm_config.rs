//! php-fpm configuration files as levee reads them for pm.max_children: any text parses
//! without a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    let _ = levee_fastcgi::pool::__fuzz::parse(data);
});
