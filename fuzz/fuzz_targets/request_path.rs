//! Request paths: the static-file rules and the FastCGI router (try_files, PATH_INFO).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    levee_static::__fuzz::path(data);
    let _ = levee_fastcgi::route(std::path::Path::new("/nonexistent-levee-fuzz-root"), data, "index.php");
});
