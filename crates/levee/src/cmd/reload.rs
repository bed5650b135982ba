//! `levee reload`: asks a running levee serve to re-read its configuration, through the
//! admin listener, or with `--pid` by sending it SIGHUP (what the systemd unit's
//! ExecReload runs: a minimal Debian has no /bin/kill, which comes with procps).

use std::process::ExitCode;

use anyhow::bail;
use clap::Args;
use http::StatusCode;

use super::purge::{admin_post, PurgeUsage};

#[derive(Debug, Args)]
#[command(
    after_help = "Without --pid the admin listener must be on: levee serve --admin-listen 127.0.0.1:9091.\nlevee reload --pid $(pidof levee) (or kill -HUP) does the same without it; levee then logs\n\"configuration reloaded\" or why it refused."
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
    /// Send SIGHUP to this levee serve process instead (no admin listener needed; the
    /// result is in its log).
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,
}

pub fn run(args: ReloadArgs) -> anyhow::Result<ExitCode> {
    if let Some(pid) = args.pid {
        // from_raw asserts a non-negative value: checked first.
        let Some(target) = (pid > 0)
            .then(|| rustix::process::Pid::from_raw(pid))
            .flatten()
        else {
            bail!("--pid {pid} is not a process id: give levee serve's (systemd: $MAINPID)");
        };
        rustix::process::kill_process(target, rustix::process::Signal::HUP).map_err(|e| {
            anyhow::anyhow!(
                "could not send SIGHUP to process {pid}: {e} (is it levee serve, and yours?)"
            )
        })?;
        println!(
            "levee: SIGHUP sent to {pid}; its log says whether the configuration was reloaded"
        );
        return Ok(ExitCode::SUCCESS);
    }
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
