//! The `levee` binary: parses the command line and hands over to one subcommand.
//! Exit codes: 0 success, 1 the work failed, 2 bad usage or configuration.

mod cmd;
mod logging;

/// jemalloc instead of glibc's malloc. Measured on the FastCGI path (a request allocates
/// and frees headers, CGI parameters and buffers on two threads): 100 -> 78 us of CPU per
/// request, levee from 0.86x to 1.08x nginx's throughput. glibc also held freed memory
/// between long-lived cached bodies; mimalloc was tried and kept twice the RSS per
/// cached page.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// `levee --version`: the version, the git commit it was built from (`unknown` from a
/// tarball) and the build date (SOURCE_DATE_EPOCH's when set), see build.rs.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("LEVEE_GIT_COMMIT"),
    " ",
    env!("LEVEE_BUILD_DATE"),
    ")"
);

/// levee: a caching reverse proxy and load tester for slow dynamic sites.
///
/// Put `levee serve` in front of a PHP CMS, wiki or forum (an HTTP server, or php-fpm
/// directly): anonymous visitors get cached pages even when the application starts a
/// session on every request, while logged-in users always reach the application. Static
/// files, compression and overload protection come with it.
#[derive(Debug, Parser)]
#[command(name = "levee", version = VERSION, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the caching reverse proxy in front of a backend.
    Serve(Box<cmd::serve::ServeArgs>),
    /// See levee work: a slow session-starting origin, direct vs through levee.
    Demo(cmd::demo::DemoArgs),
    /// Measure how a server behaves under load.
    Bench(Box<levee_bench::BenchCommand>),
    /// Run a slow demo origin that starts a PHP session on every page.
    Origin(cmd::origin::OriginArgs),
    /// Drop stored responses by URL, prefix or tag (through levee serve's admin listener).
    Purge(cmd::purge::PurgeArgs),
    /// Make a running levee serve re-read its configuration (like SIGHUP).
    Reload(cmd::reload::ReloadArgs),
    /// Audit a site: what a cache can store, what levee will do, what to change.
    Doctor(Box<cmd::doctor::DoctorArgs>),
    /// Print the completion script of a shell (bash, zsh, fish).
    Completions(cmd::completions::CompletionsArgs),
    /// Print levee(1), the manual page, in roff (for packaging).
    #[command(hide = true)]
    Manpage,
}

/// `levee bench`, with the doctor's audit of the URL in its report when `--doctor`.
fn bench(mut cmd: levee_bench::BenchCommand) -> anyhow::Result<ExitCode> {
    if let (true, Some(url)) = (cmd.doctor, cmd.url.clone()) {
        eprintln!("levee: auditing {url} with levee doctor first");
        let text = cmd::doctor::audit_text(&url)?;
        if cmd.html.is_none() {
            print!("{text}");
        }
        cmd.appendix.push(levee_bench::Appendix {
            title: "levee doctor".into(),
            text,
        });
    }
    levee_bench::main(cmd)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init();
    let result = match cli.command {
        Command::Serve(args) => cmd::serve::run(*args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Bench(cmd) => bench(*cmd),
        Command::Origin(args) => cmd::origin::run(args),
        Command::Purge(args) => cmd::purge::run(args),
        Command::Reload(args) => cmd::reload::run(args),
        Command::Doctor(args) => cmd::doctor::run(*args),
        Command::Completions(args) => cmd::completions::run(args, Cli::command()),
        Command::Manpage => cmd::manpage::run(Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("levee: {err:#}");
            ExitCode::from(exit_code(&err))
        }
    }
}

/// 2 for what the user must change (the configuration, the command line), 1 for work
/// that failed (a port in use, a server that stopped answering).
fn exit_code(err: &anyhow::Error) -> u8 {
    let usage = err.chain().any(|e| {
        e.is::<levee_config::ConfigError>()
            || e.is::<levee_bench::UsageError>()
            || e.is::<cmd::purge::PurgeUsage>()
            || e.is::<cmd::doctor::DoctorUsage>()
            // A certificate or key file that cannot be used: the configuration's.
            || e.is::<levee_tls::Error>()
            // A Redis URL levee cannot read (`serve --check`).
            || e.is::<levee_redis::RedisError>()
            || matches!(
                e.downcast_ref::<levee_proxy::ServeError>(),
                Some(
                    levee_proxy::ServeError::Tls(_)
                        | levee_proxy::ServeError::Acme(_)
                        // A disk directory levee cannot use, a Redis URL it cannot read.
                        | levee_proxy::ServeError::Tier(_)
                        // levee.socket and levee.toml disagree.
                        | levee_proxy::ServeError::Activation(_)
                )
            )
    });
    if usage {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names_the_commit_and_the_build_date() {
        // "0.1.0 (abcdef1234 2026-11-26)", or "(unknown ...)" built without git.
        let (version, rest) = VERSION.split_once(" (").unwrap();
        assert_eq!(version, env!("CARGO_PKG_VERSION"));
        let (commit, date) = rest.trim_end_matches(')').split_once(' ').unwrap();
        assert!(
            commit == "unknown" || commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{commit}"
        );
        let parts: Vec<&str> = date.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [4, 2, 2],
            "{date}"
        );
        assert!(
            date.chars().all(|c| c.is_ascii_digit() || c == '-'),
            "{date}"
        );
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn configuration_errors_exit_2_failures_1() {
        let config = anyhow::Error::new(levee_config::ConfigError::NoBackend);
        assert_eq!(exit_code(&config), 2);
        let wrapped = config.context("while starting");
        assert_eq!(exit_code(&wrapped), 2);
        let usage = anyhow::Error::new(levee_bench::UsageError(anyhow::anyhow!("-c 0")));
        assert_eq!(exit_code(&usage), 2);
        let bind = anyhow::anyhow!("cannot listen on 127.0.0.1:80: permission denied");
        assert_eq!(exit_code(&bind), 1);
    }
}
