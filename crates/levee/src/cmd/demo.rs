//! `levee demo`: the seed experiment in one command. Starts a slow origin that behaves
//! like XE or gnuboard (every page takes 20 ms and starts a PHP session), puts levee in
//! front of it with default settings, loads both at a few concurrency levels, prints the
//! speed-up and writes an HTML report with both curves.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use levee_config::{OneOrMany, Options, Settings};
use tokio::net::TcpListener;

use crate::cmd::origin::{self, OriginArgs, OriginStats};

/// Arguments of `levee demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// How long to load each target at each concurrency level.
    #[arg(long, short = 'd', default_value = "2s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Concurrent clients of the headline measurement (levels 1 and 8 are measured too,
    /// for the charts).
    #[arg(long, short = 'c', default_value_t = 64)]
    pub concurrency: usize,
    /// Where to write the HTML report with throughput and latency charts.
    #[arg(long, default_value = "levee-demo.html")]
    pub html: PathBuf,
    /// Time the origin takes per page.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    pub delay: Duration,
    /// Cache-Control the origin sends (MoniWiki's micro-caching patch by default).
    #[arg(long, default_value = "public, s-maxage=3, max-age=0")]
    pub cache_control: String,
    /// Pages the origin renders at once (php-fpm's default pm.max_children is 5).
    #[arg(long, default_value_t = 5)]
    pub workers: usize,
    /// After measuring, keep the origin and levee running until Ctrl-C.
    #[arg(long)]
    pub serve: bool,
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(demo(args))
}

async fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let origin_listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot bind the demo origin")?;
    let origin_addr = origin_listener.local_addr()?;
    let origin_args = OriginArgs {
        listen: origin_addr,
        delay: args.delay,
        cache_control: Some(args.cache_control.clone()),
        no_session: false,
        body_size: 4096,
        header_bytes: 0,
        workers: args.workers,
    };
    let stats = Arc::new(OriginStats::default());
    tokio::spawn(origin::serve(origin_listener, origin_args, stats.clone()));

    let settings = Settings::from_options(Options {
        listen: Some(OneOrMany::One("127.0.0.1:0".into())),
        backend: Some(levee_config::OneOrMany::One(format!(
            "http://{origin_addr}"
        ))),
        ..Options::default()
    })?;
    let server = levee_proxy::Server::bind(settings).await?;
    let levee_addr = *server
        .local_addrs()
        .first()
        .context("levee bound no address")?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let levee = tokio::spawn(server.run(async {
        let _ = stop_rx.await;
    }));

    println!("levee demo");
    println!(
        "  origin  http://{origin_addr}  {:?} per page, {} workers, Set-Cookie: PHPSESSID on every response,",
        args.delay, args.workers
    );
    println!("          Cache-Control: {}", args.cache_control);
    println!("  levee   http://{levee_addr}  default settings, in front of the origin");
    println!();

    let origin_url = format!("http://{origin_addr}/wiki/FrontPage");
    let levee_url = format!("http://{levee_addr}/wiki/FrontPage");
    let mut levels = vec![1, 8, args.concurrency.max(1)];
    levels.sort_unstable();
    levels.dedup();
    println!(
        "loading each at {levels:?} concurrent clients, {:?} per level ...",
        args.duration
    );
    let direct = measure(&origin_url, "origin direct", &levels, args.duration).await?;
    let origin_before = stats.requests.load(std::sync::atomic::Ordering::Relaxed);
    let through = measure(&levee_url, "through levee", &levels, args.duration).await?;
    let origin_after = stats.requests.load(std::sync::atomic::Ordering::Relaxed);

    println!();
    println!(
        "  {:<16} {:>8} {:>12} {:>10} {:>10} {:>8}",
        "", "clients", "requests/s", "p50 ms", "p99 ms", "errors"
    );
    for (name, r) in [("origin direct", &direct), ("through levee", &through)] {
        for s in &r.steps {
            println!(
                "  {:<16} {:>8} {:>12.0} {:>10.2} {:>10.2} {:>8}",
                name,
                s.concurrency,
                s.rps,
                s.latency.p50_ms,
                s.latency.p99_ms,
                s.errors.total()
            );
        }
    }
    let last = |r: &levee_bench::Report| r.steps.last().map_or(0.0, |s| s.rps);
    let speedup = if last(&direct) > 0.0 {
        last(&through) / last(&direct)
    } else {
        0.0
    };
    let levee_requests: u64 = through.steps.iter().map(|s| s.responses).sum();
    println!();
    println!(
        "  speed-up at {} clients: {speedup:.0}x; the origin rendered {} {} for levee's {} requests",
        args.concurrency,
        origin_after - origin_before,
        if origin_after - origin_before == 1 { "page" } else { "pages" },
        levee_requests
    );
    println!("  anonymous pages were cached although every response set PHPSESSID;");
    println!("  a request that sends a PHPSESSID cookie always reaches the origin");
    if args.serve {
        println!("    curl -si -H 'Cookie: PHPSESSID=me' {levee_url}   # X-Cache: PASS");
    } else {
        println!("  (see for yourself: `levee demo --serve` keeps both running for curl)");
    }

    match levee_bench::write_html_many(&[direct, through], &args.html) {
        Ok(()) => println!("\n  charts: {}", args.html.display()),
        Err(e) => eprintln!("levee demo: could not write the HTML report: {e:#}"),
    }

    if args.serve {
        println!();
        println!("serving until Ctrl-C: try curl -si {levee_url}");
        crate::cmd::serve::shutdown_signal().await;
    }
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), levee).await;
    Ok(ExitCode::SUCCESS)
}

/// A short sweep over `levels`, labelled for the report.
async fn measure(
    url: &str,
    label: &str,
    levels: &[usize],
    step: Duration,
) -> anyhow::Result<levee_bench::Report> {
    let threads = levee_bench::default_threads();
    let opts = levee_bench::Options {
        threads,
        ..levee_bench::Options::default()
    };
    let plan = levee_bench::Plan::build(vec![levee_bench::RequestSpec::get(url)], opts)?;
    let load = levee_bench::Load {
        concurrency: levels.to_vec(),
        stop: levee_bench::Stop::Duration(step),
        rate: None,
        warmup: Duration::from_millis(200),
    };
    let mut report = levee_bench::run_async(Arc::new(plan), load).await?;
    report.label = Some(label.to_string());
    Ok(report)
}
