//! `levee completions SHELL`: the completion script of a shell, generated from the
//! command line's definition (clap_complete), printed for the package or the user to
//! install (bash: /usr/share/bash-completion/completions/levee, zsh: a `_levee` in
//! `$fpath`, fish: ~/.config/fish/completions/levee.fish).

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

pub fn run(args: CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<ExitCode> {
    // Written at once: a closed standard output (`| head`) is no reason to panic.
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "levee", &mut out);
    let _ = std::io::Write::write_all(&mut std::io::stdout(), &out);
    Ok(ExitCode::SUCCESS)
}
