//! Starts a real application as the integration tests do, and keeps it running until
//! SIGTERM or SIGINT (then stops its php-fpm and database and removes its files). For
//! `benchmarks/apps.sh`:
//!
//! ```text
//! cargo run --release -p levee-test --example app -- wordpress|mediawiki|dokuwiki
//! ```
//!
//! prints, once the application answers:
//!
//! ```text
//! SOCKET /tmp/…/php-fpm.sock   (php-fpm's Unix socket)
//! ROOT /tmp/…/www              (the document root)
//! FRONT /                      (the front page's path)
//! READY
//! ```

// Test support: like the tests, this program fails by panicking, with the reason.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use levee_test::apps::{DokuWiki, MediaWiki, WordPress};
use tokio::signal::unix::{signal, SignalKind};

enum App {
    WordPress(WordPress),
    MediaWiki(MediaWiki),
    DokuWiki(DokuWiki),
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let (app, front) = match name.as_str() {
        "wordpress" => (App::WordPress(WordPress::start()), "/"),
        "mediawiki" => (App::MediaWiki(MediaWiki::start()), "/index.php/Main_Page"),
        "dokuwiki" => (App::DokuWiki(DokuWiki::start()), "/doku.php?id=start"),
        _ => {
            eprintln!("usage: app wordpress|mediawiki|dokuwiki");
            std::process::exit(2);
        }
    };
    let args = match &app {
        App::WordPress(a) => a.levee_args(),
        App::MediaWiki(a) => a.levee_args(),
        App::DokuWiki(a) => a.levee_args(),
    };
    // levee_args() is ["--backend", "fastcgi+unix:SOCKET", "--root", ROOT].
    let socket = args[1].trim_start_matches("fastcgi+unix:");
    println!("SOCKET {socket}\nROOT {}\nFRONT {front}\nREADY", args[3]);
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    drop(app);
}
