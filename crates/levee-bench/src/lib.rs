//! `levee bench`: a load tester that shows how a server behaves under overload.

use std::process::ExitCode;

/// Arguments of `levee bench`.
#[derive(Debug, clap::Args)]
pub struct BenchCommand {
    /// The URL to load.
    pub url: Option<String>,
}

/// Runs `levee bench` to completion.
pub fn main(_cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("levee bench is not built yet")
}
