use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// levee: a caching reverse proxy and load tester for slow dynamic sites.
#[derive(Debug, Parser)]
#[command(name = "levee", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure how a server behaves under load.
    Bench(levee_bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(cmd) => levee_bench::main(cmd),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("levee: {err:#}");
            ExitCode::from(2)
        }
    }
}
