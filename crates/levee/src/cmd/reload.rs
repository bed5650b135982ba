//! `levee reload`: asks a running levee serve to re-read its configuration (the same as
//! SIGHUP), through the admin listener.

use std::process::ExitCode;

use anyhow::bail;
use clap::Args;
use http::StatusCode;

use super::purge::{admin_post, PurgeUsage};

#[derive(Debug, Args)]
#[command(
    after_help = "The admin listener must be on: levee serve --admin-listen 127.0.0.1:9091.\nkill -HUP $(pidof levee) does the same without it."
)]
pub struct ReloadArgs {
    /// The admin listener's address (levee serve --admin-listen).
    #[arg(
        long,
        value_name = "ADDR",
        env = "LEVEE_ADMIN",
        default_value = "127.0.0.1:9091"
    )]
    pub admin: String,
    /// The admin token, if levee serve has one ([admin] token).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "LEVEE_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

pub fn run(args: ReloadArgs) -> anyhow::Result<ExitCode> {
    let (status, body) = admin_post(&args.admin, "/reload", args.token.as_deref())?;
    match status {
        StatusCode::OK => {
            println!("levee: {body}");
            Ok(ExitCode::SUCCESS)
        }
        StatusCode::BAD_REQUEST => bail!(PurgeUsage(body)),
        other => bail!("the admin listener answered {other}: {body}"),
    }
}
