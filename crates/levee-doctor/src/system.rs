//! `levee doctor --system`: is this host ready for load? Kernel and process limits
//! against levee's settings, memory against the cache, and php-fpm's pool (found as
//! `levee serve` finds it: `levee_fastcgi::pool::discover`) against the RAM. Each check
//! has the current value, the recommended one and the command that sets it. Reading
//! is in [`read`]; judging, in [`evaluate`], is pure.

use std::path::{Path, PathBuf};

use levee_config::{Backend, FastCgiAddress, Settings};
use serde::Serialize;

/// One check of the host.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub current: String,
    pub recommended: String,
    pub ok: bool,
    /// What sets it (empty when nothing needs to).
    pub command: String,
    pub why: &'static str,
}

/// What was read from the host; `None` where it could not be.
#[derive(Debug, Clone, Default)]
pub struct Host {
    pub nofile: Option<u64>,
    pub somaxconn: Option<u64>,
    pub syn_backlog: Option<u64>,
    pub port_range: Option<(u64, u64)>,
    pub tw_reuse: Option<u64>,
    pub file_max: Option<u64>,
    pub mem_total: Option<u64>,
    pub fpm: Option<Fpm>,
}

/// php-fpm's pool as found.
#[derive(Debug, Clone)]
pub struct Fpm {
    pub pool: String,
    pub file: PathBuf,
    pub max_children: usize,
    pub memory_limit: u64,
}

/// Reads the host: /proc, the process's limits, php-fpm's pool for the settings'
/// FastCGI backends.
pub fn read(settings: &Settings) -> Host {
    let sys = |p: &str| std::fs::read_to_string(Path::new("/proc/sys").join(p)).ok();
    let num = |p: &str| sys(p).and_then(|s| s.trim().parse().ok());
    Host {
        nofile: std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("Max open files"))?;
                line.split_whitespace().nth(3)?.parse().ok()
            }),
        somaxconn: num("net/core/somaxconn"),
        syn_backlog: num("net/ipv4/tcp_max_syn_backlog"),
        port_range: sys("net/ipv4/ip_local_port_range").and_then(|s| {
            let mut it = s.split_whitespace().filter_map(|n| n.parse().ok());
            Some((it.next()?, it.next()?))
        }),
        tw_reuse: num("net/ipv4/tcp_tw_reuse"),
        file_max: num("fs/file-max"),
        mem_total: std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
        }),
        fpm: settings.sites.iter().find_map(fpm_of),
    }
}

fn fpm_of(site: &levee_config::Site) -> Option<Fpm> {
    let Backend::FastCgi(addr) = &site.backend else {
        return None;
    };
    let address = match addr {
        FastCgiAddress::Tcp(a) => levee_fastcgi::Address::Tcp(a.clone()),
        FastCgiAddress::Unix(p) => levee_fastcgi::Address::Unix(p.clone()),
    };
    let pool =
        levee_fastcgi::pool::discover(&address, site.fastcgi.pool_config.as_deref()).ok()??;
    Some(Fpm {
        memory_limit: memory_limit(&pool.file).unwrap_or(128 << 20),
        pool: pool.name,
        file: pool.file,
        max_children: pool.max_children,
    })
}

/// `memory_limit` of a pool: its own `php_admin_value`/`php_value`, else the php.ini of
/// the php-fpm the pool file belongs to (`/etc/php/8.2/fpm/pool.d/www.conf` →
/// `/etc/php/8.2/fpm/php.ini`).
fn memory_limit(pool_file: &Path) -> Option<u64> {
    let find = |text: &str, keys: &[&str]| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            keys.contains(&k.trim()).then(|| parse_size(v.trim()))?
        })
    };
    if let Ok(text) = std::fs::read_to_string(pool_file) {
        if let Some(v) = find(
            &text,
            &["php_admin_value[memory_limit]", "php_value[memory_limit]"],
        ) {
            return Some(v);
        }
    }
    let mut dir = pool_file.parent();
    while let Some(d) = dir {
        if let Ok(text) = std::fs::read_to_string(d.join("php.ini")) {
            return find(&text, &["memory_limit"]);
        }
        dir = d.parent();
    }
    None
}

/// PHP's shorthand sizes: 128M, 1G, 512K, bytes.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim_matches('"');
    let (n, mult) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 1 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    n.trim().parse::<u64>().ok().map(|n| n * mult)
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

fn unknown() -> String {
    "unknown".into()
}

/// The checks for `host` under `settings`.
pub fn evaluate(host: &Host, settings: &Settings) -> Vec<Check> {
    let conns = settings.limits.max_connections as u64;
    // A client connection and a backend connection each, and room for files and logs.
    let want_nofile = (conns * 2 + 1024).max(65536);
    let mut out = Vec::new();
    let mut sysctl = |name: &'static str, key: &str, current: Option<u64>, want: u64, why| {
        out.push(Check {
            name,
            current: current.map_or_else(unknown, |v| v.to_string()),
            recommended: format!(">= {want}"),
            ok: current.is_some_and(|v| v >= want),
            command: format!("sysctl -w {key}={want}  (persist in /etc/sysctl.d/90-levee.conf)"),
            why,
        });
    };
    sysctl(
        "net.core.somaxconn",
        "net.core.somaxconn",
        host.somaxconn,
        4096,
        "the listen backlog: connections beyond it are dropped during a burst",
    );
    sysctl(
        "net.ipv4.tcp_max_syn_backlog",
        "net.ipv4.tcp_max_syn_backlog",
        host.syn_backlog,
        4096,
        "half-open connections kept during a burst",
    );
    sysctl(
        "net.ipv4.tcp_tw_reuse",
        "net.ipv4.tcp_tw_reuse",
        host.tw_reuse,
        1,
        "reuses TIME_WAIT ports for new backend connections",
    );
    sysctl(
        "fs.file-max",
        "fs.file-max",
        host.file_max,
        want_nofile,
        "open files of the whole system",
    );
    out.push(Check {
        name: "open files (ulimit -n)",
        current: host.nofile.map_or_else(unknown, |v| v.to_string()),
        recommended: format!(">= {want_nofile} (2 x max_connections {conns} + 1024)"),
        ok: host.nofile.is_some_and(|v| v >= want_nofile),
        command: format!(
            "ulimit -n {want_nofile}, or LimitNOFILE={want_nofile} in levee's systemd unit"
        ),
        why: "each client and backend connection is an open file: past the limit, accept fails",
    });
    let span = host.port_range.map(|(lo, hi)| hi.saturating_sub(lo));
    out.push(Check {
        name: "net.ipv4.ip_local_port_range",
        current: host
            .port_range
            .map_or_else(unknown, |(lo, hi)| format!("{lo} {hi}")),
        recommended: "a span of 28000 or more, like 1024 65535".into(),
        ok: span.is_some_and(|s| s >= 28000),
        command: "sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"".into(),
        why: "ports for connections to an HTTP backend",
    });
    let cache = settings.cache.size;
    out.push(Check {
        name: "memory for the cache",
        current: host.mem_total.map_or_else(unknown, |m| {
            format!("cache.size {} of {} RAM", mib(cache), mib(m))
        }),
        recommended: "cache.size at most half the RAM".into(),
        ok: host.mem_total.is_some_and(|m| cache <= m / 2),
        command: host.mem_total.map_or_else(String::new, |m| {
            format!("levee serve --cache-size {}MiB", (m / 4) >> 20)
        }),
        why: "the cache must not push php-fpm or the database into swap",
    });
    if let Some(f) = &host.fpm {
        let need = f.max_children as u64 * f.memory_limit;
        let room = host.mem_total.map(|m| m.saturating_sub(cache));
        let fits = room.map(|r| r / f.memory_limit.max(1));
        out.push(Check {
            name: "php-fpm pm.max_children x memory_limit",
            current: format!(
                "{} x {} = {} (pool [{}] in {})",
                f.max_children,
                mib(f.memory_limit),
                mib(need),
                f.pool,
                f.file.display()
            ),
            recommended: room.map_or_else(unknown, |r| {
                format!("at most {} (RAM less the cache)", mib(r))
            }),
            ok: room.is_some_and(|r| need <= r),
            command: fits.map_or_else(String::new, |n| {
                format!("pm.max_children = {n} in {}", f.file.display())
            }),
            why: "php-fpm's workers at their memory limit must fit in RAM, or the host swaps under load",
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use levee_config::{OneOrMany, Options};

    fn settings() -> Settings {
        Settings::from_options(Options {
            backend: OneOrMany::from_flags(&["http://127.0.0.1:9".into()]),
            ..Options::default()
        })
        .unwrap()
    }

    #[test]
    fn low_limits_are_named_with_the_command_that_raises_them() {
        let host = Host {
            nofile: Some(1024),
            somaxconn: Some(128),
            syn_backlog: Some(8192),
            port_range: Some((49152, 65535)),
            tw_reuse: Some(2),
            file_max: Some(9_000_000),
            mem_total: Some(2 << 30),
            fpm: Some(Fpm {
                pool: "www".into(),
                file: "/etc/php/8.2/fpm/pool.d/www.conf".into(),
                max_children: 50,
                memory_limit: 128 << 20,
            }),
        };
        let checks = evaluate(&host, &settings());
        let bad: Vec<&str> = checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
        assert_eq!(
            bad,
            [
                "net.core.somaxconn",
                "open files (ulimit -n)",
                "net.ipv4.ip_local_port_range",
                "php-fpm pm.max_children x memory_limit"
            ]
        );
        let fpm = checks.last().unwrap();
        assert!(fpm.command.contains("pm.max_children = 14"), "{fpm:?}");
        assert!(checks[0]
            .command
            .starts_with("sysctl -w net.core.somaxconn=4096"));
    }

    #[test]
    fn php_sizes() {
        assert_eq!(parse_size("128M"), Some(128 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("\"256M\""), Some(256 << 20));
        assert_eq!(parse_size("-1"), None);
    }
}
