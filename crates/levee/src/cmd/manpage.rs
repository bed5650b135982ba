//! `levee manpage` (hidden): levee(1) in roff, generated from the command line's
//! definition (clap_mangen): the top-level page with each subcommand's options. The
//! Debian package ships it (packaging/build-deb.sh writes it before `cargo deb`).

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;

pub fn run(cli: clap::Command) -> anyhow::Result<ExitCode> {
    let mut out = Vec::new();
    let man = clap_mangen::Man::new(cli.clone());
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    // One section per subcommand, with its options, instead of one page each.
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        writeln!(out, ".SH \"LEVEE {}\"", name.to_uppercase())?;
        let sub_man = clap_mangen::Man::new(sub.clone());
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            writeln!(out, "{}", escape(&about.to_string()))?;
        }
        writeln!(out, ".PP\n\\fBlevee {name}\\fR [OPTIONS]")?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            writeln!(out, ".PP")?;
            // Its OPTIONS heading one level down (.SS), under the subcommand's .SH.
            let mut options = Vec::new();
            sub_man.render_options_section(&mut options)?;
            let options = String::from_utf8_lossy(&options).replace(".SH ", ".SS ");
            out.extend_from_slice(options.as_bytes());
        }
    }
    man.render_version_section(&mut out)?;
    writeln!(
        out,
        ".SH FILES\n.TP\n/etc/levee/levee.toml\nThe configuration levee.service runs with; every option is documented in /usr/share/doc/levee/levee.example.toml.\n.SH ENVIRONMENT\n.TP\nLEVEE_LOG\nWhat levee logs, like warn (the default), info or levee_proxy=debug.\n.SH \"SEE ALSO\"\nsystemctl(1), journalctl(1)"
    )?;
    std::io::stdout()
        .write_all(&out)
        .context("cannot write the manual page to standard output")?;
    Ok(ExitCode::SUCCESS)
}

/// Text for roff: a leading dot or quote would be read as a request; backslashes escape.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .lines()
        .map(|l| match l.starts_with('.') || l.starts_with('\'') {
            true => format!("\\&{l}"),
            false => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
