//! Datagrams from anyone at levee's QUIC endpoint, beside a real client's handshake whose
//! packets the fuzzer corrupts, drops and reorders (levee-h3's harness).
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn configs() -> &'static (rustls::ServerConfig, rustls::ClientConfig) {
    static CONFIGS: OnceLock<(rustls::ServerConfig, rustls::ClientConfig)> = OnceLock::new();
    CONFIGS.get_or_init(|| levee_h3::__fuzz::configs().expect("the harness's certificates"))
}

fuzz_target!(|data: &[u8]| {
    let (server, client) = configs();
    levee_h3::__fuzz::datagrams(server, client, data);
});
