//! Where levee's own log goes: standard error, as any command's, or, when systemd
//! connected standard error to the journal (`JOURNAL_STREAM`), straight to journald with
//! each event's fields as journal fields (`journalctl -u levee -o verbose` shows them).
//! `LEVEE_LOG` filters either way (default `warn`, and `error` for redis-rs, whose
//! Cluster connection warns at every retry of a dead node while levee-redis says each
//! change of primary once); the access log's `levee::access`
//! events, sent only under the journal (see levee-proxy's access_log.rs), always pass.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;

pub fn init() {
    let filter = || {
        EnvFilter::try_from_env("LEVEE_LOG").unwrap_or_else(|_| EnvFilter::new("warn,redis=error"))
    };
    if levee_proxy::is_journal_stream(std::io::stderr()) {
        match tracing_journald::layer() {
            Ok(journald) => {
                let filter = match "levee::access=info".parse() {
                    Ok(access) => filter().add_directive(access),
                    Err(_) => filter(),
                };
                tracing_subscriber::registry()
                    .with(journald.with_field_prefix(None).with_filter(filter))
                    .init();
                return;
            }
            // No journald socket after all (a container): standard error, as elsewhere.
            Err(e) => {
                eprintln!("levee: cannot log to the journal ({e}); logging to standard error")
            }
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .init();
}
