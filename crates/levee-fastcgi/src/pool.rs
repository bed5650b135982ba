//! php-fpm's capacity: `pm.max_children` of the pool that listens where levee connects,
//! read from php-fpm's own configuration.
//!
//! Why: a connection beyond php-fpm's workers waits in its listen backlog, where levee can
//! neither see it nor shed it, and php-fpm closes a kept-alive connection whenever another
//! is waiting there, so every request pays a connect. Knowing the pool's size, levee keeps
//! at most that many connections, all kept alive, and queues the rest itself.
//!
//! Where the configuration is found: the file given (`[fastcgi] pool_config`), else the
//! file each running php-fpm master names in its process title ("php-fpm: master process
//! (/etc/php/8.2/fpm/php-fpm.conf)"), else the usual paths of Debian, Fedora and source
//! builds. php-fpm's format is INI with `include` globs and `$pool` in values; no INI
//! crate follows includes or knows that variable, so this reads it by hand.

use std::path::{Path, PathBuf};

use crate::conn::Address;

/// A pool found, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolInfo {
    pub name: String,
    pub max_children: usize,
    /// The file that defines the pool.
    pub file: PathBuf,
}

/// Configurations php-fpm reads by default, for when no master's title says.
const USUAL: &[&str] = &[
    "/etc/php/*/fpm/php-fpm.conf",
    "/etc/php-fpm.conf",
    "/usr/local/etc/php-fpm.conf",
    "/etc/php*/php-fpm.conf",
];

/// The pool listening on `addr`, from `config` when given, else from the running
/// masters' and the usual configurations. `Err` only for a `config` that cannot be read
/// or that has no pool on `addr`: the operator named it, so silence would mislead.
pub fn discover(addr: &Address, config: Option<&Path>) -> Result<Option<PoolInfo>, String> {
    if let Some(file) = config {
        let pools = read_config(file).map_err(|e| format!("{}: {e}", file.display()))?;
        return match find(&pools, addr) {
            Some(p) => Ok(Some(p)),
            None => Err(format!(
                "{} defines no pool listening on {} (pools: {})",
                file.display(),
                addr,
                describe(&pools)
            )),
        };
    }
    let mut files = running_masters();
    for pattern in USUAL {
        files.extend(glob_paths(pattern));
    }
    let mut seen = Vec::new();
    for file in files {
        if seen.contains(&file) {
            continue;
        }
        if let Ok(pools) = read_config(&file) {
            if let Some(p) = find(&pools, addr) {
                return Ok(Some(p));
            }
        }
        seen.push(file);
    }
    Ok(None)
}

fn describe(pools: &[Pool]) -> String {
    if pools.is_empty() {
        return "none".into();
    }
    pools
        .iter()
        .map(|p| {
            format!(
                "[{}] listen = {}",
                p.name,
                p.listen.as_deref().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One `[pool]` section as read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pool {
    name: String,
    listen: Option<String>,
    max_children: Option<usize>,
    file: PathBuf,
}

fn find(pools: &[Pool], addr: &Address) -> Option<PoolInfo> {
    pools.iter().find_map(|p| {
        let listen = p.listen.as_deref()?;
        (listens_on(listen, addr)).then_some(())?;
        Some(PoolInfo {
            name: p.name.clone(),
            max_children: p.max_children.filter(|n| *n > 0)?,
            file: p.file.clone(),
        })
    })
}

/// Whether php-fpm's `listen` value is the address levee connects to.
fn listens_on(listen: &str, addr: &Address) -> bool {
    match addr {
        Address::Unix(path) => {
            if !listen.starts_with('/') {
                return false;
            }
            let listen = Path::new(listen);
            listen == path
                || matches!(
                    (listen.canonicalize(), path.canonicalize()),
                    (Ok(a), Ok(b)) if a == b
                )
        }
        Address::Tcp(hostport) => {
            let Some((host, port)) = split_host_port(hostport) else {
                return false;
            };
            // php-fpm accepts "9000", "127.0.0.1:9000", "[::1]:9000", "*:9000".
            let (lhost, lport) = match split_host_port(listen) {
                Some(hp) => hp,
                None if listen.chars().all(|c| c.is_ascii_digit()) => ("", listen),
                None => return false,
            };
            lport == port
                && (lhost.is_empty()
                    || matches!(lhost, "*" | "0.0.0.0" | "::" | "[::]")
                    || lhost.trim_matches(['[', ']']) == host.trim_matches(['[', ']'])
                    || (is_loopback(lhost) && is_loopback(host)))
        }
    }
}

fn is_loopback(host: &str) -> bool {
    matches!(
        host.trim_matches(['[', ']']),
        "127.0.0.1" | "localhost" | "::1"
    )
}

fn split_host_port(s: &str) -> Option<(&str, &str)> {
    let (host, port) = s.rsplit_once(':')?;
    (!port.is_empty() && port.chars().all(|c| c.is_ascii_digit())).then_some((host, port))
}

/// The pools a configuration file defines, following its includes (at most 8 deep).
fn read_config(file: &Path) -> std::io::Result<Vec<Pool>> {
    let mut pools = Vec::new();
    read_into(file, &mut pools, 0)?;
    Ok(pools)
}

fn read_into(file: &Path, pools: &mut Vec<Pool>, depth: usize) -> std::io::Result<()> {
    let text = std::fs::read_to_string(file)?;
    let parsed = parse(&text, file);
    for include in parsed.includes {
        let pattern = if Path::new(&include).is_absolute() {
            include
        } else {
            // php-fpm resolves a relative include against its prefix; the file's own
            // directory is the closest guess without it.
            let dir = file.parent().unwrap_or(Path::new("/"));
            dir.join(include).to_string_lossy().into_owned()
        };
        for path in glob_paths(&pattern) {
            if depth < 8 {
                // An unreadable included file is php-fpm's error to report, not ours.
                let _ = read_into(&path, pools, depth + 1);
            }
        }
    }
    pools.extend(parsed.pools);
    Ok(())
}

/// What one file says: its pools and the files it includes.
#[derive(Debug, Default)]
struct Parsed {
    pools: Vec<Pool>,
    includes: Vec<String>,
}

/// Parses php-fpm's INI dialect: `[section]`, `key = value`, `;` and `#` comments,
/// quoted values, `$pool` standing for the section's name.
fn parse(text: &str, file: &Path) -> Parsed {
    let mut out = Parsed::default();
    let mut section: Option<Pool> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            out.pools.extend(section.take());
            let name = name.trim();
            if !name.eq_ignore_ascii_case("global") && !name.is_empty() {
                section = Some(Pool {
                    name: name.to_string(),
                    listen: None,
                    max_children: None,
                    file: file.to_path_buf(),
                });
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let mut value = value.trim();
        if let Some((v, _)) = value.split_once(" ;") {
            value = v.trim();
        }
        let value = value.trim_matches('"').trim_matches('\'');
        match (key, section.as_mut()) {
            ("include", _) => out.includes.push(value.to_string()),
            ("listen", Some(p)) => p.listen = Some(value.replace("$pool", &p.name)),
            ("pm.max_children", Some(p)) => p.max_children = value.parse().ok(),
            _ => {}
        }
    }
    out.pools.extend(section);
    out
}

/// The configuration files running php-fpm masters name in their titles.
fn running_masters() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if let Some(file) = master_config(&String::from_utf8_lossy(&cmdline)) {
            files.push(file);
        }
    }
    files
}

/// "php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)" → the path.
fn master_config(title: &str) -> Option<PathBuf> {
    let rest = title
        .trim_end_matches('\0')
        .split("master process (")
        .nth(1)?;
    let path = rest.rsplit_once(')')?.0;
    path.starts_with('/').then(|| PathBuf::from(path))
}

fn glob_paths(pattern: &str) -> Vec<PathBuf> {
    match glob::glob(pattern) {
        Ok(paths) => paths.flatten().collect(),
        Err(_) => Vec::new(),
    }
}

#[doc(hidden)]
pub mod __fuzz {
    /// Parses `text` as a php-fpm configuration.
    pub fn parse(text: &str) -> usize {
        super::parse(text, std::path::Path::new("/fuzz.conf"))
            .pools
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_WWW: &str = "; Start a new pool named 'www'.\n[www]\nuser = www-data\nlisten = /run/php/php8.2-fpm.sock\n;listen = 9000\npm = dynamic\npm.max_children = 5\npm.start_servers = 2\n";

    #[test]
    fn debian_pool_file() {
        let pools = parse(DEBIAN_WWW, Path::new("/etc/php/8.2/fpm/pool.d/www.conf")).pools;
        let addr = Address::Unix("/run/php/php8.2-fpm.sock".into());
        let p = find(&pools, &addr).unwrap();
        assert_eq!((p.name.as_str(), p.max_children), ("www", 5));
        assert_eq!(find(&pools, &Address::Unix("/run/other.sock".into())), None);
    }

    #[test]
    fn pool_variable_quotes_comments_and_several_pools() {
        let text = "[global]\npid = /run/x.pid\n[a]\nlisten = \"/run/$pool.sock\" ; the socket\npm.max_children = 3\n[b]\nlisten = 127.0.0.1:9001\npm.max_children = 12\n[c]\nlisten = 9002\npm.max_children = 7\n";
        let pools = parse(text, Path::new("/x.conf")).pools;
        let get = |a: Address| find(&pools, &a).map(|p| p.max_children);
        assert_eq!(get(Address::Unix("/run/a.sock".into())), Some(3));
        assert_eq!(get(Address::Tcp("127.0.0.1:9001".into())), Some(12));
        assert_eq!(get(Address::Tcp("localhost:9001".into())), Some(12));
        assert_eq!(get(Address::Tcp("127.0.0.1:9002".into())), Some(7));
        assert_eq!(get(Address::Tcp("127.0.0.1:9003".into())), None);
    }

    #[test]
    fn includes_are_followed() {
        let dir = std::env::temp_dir().join(format!("levee-fpm-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pool.d")).unwrap();
        std::fs::write(
            dir.join("php-fpm.conf"),
            format!("[global]\ninclude={}/pool.d/*.conf\n", dir.display()),
        )
        .unwrap();
        std::fs::write(dir.join("pool.d/www.conf"), DEBIAN_WWW).unwrap();
        let addr = Address::Unix("/run/php/php8.2-fpm.sock".into());
        let found = discover(&addr, Some(&dir.join("php-fpm.conf")))
            .unwrap()
            .unwrap();
        assert_eq!(found.max_children, 5);
        assert_eq!(found.file, dir.join("pool.d/www.conf"));
        let err = discover(
            &Address::Tcp("127.0.0.1:1".into()),
            Some(&dir.join("php-fpm.conf")),
        )
        .unwrap_err();
        assert!(
            err.contains("[www] listen = /run/php/php8.2-fpm.sock"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn master_titles() {
        assert_eq!(
            master_config("php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)\0\0"),
            Some(PathBuf::from("/etc/php/8.2/fpm/php-fpm.conf"))
        );
        assert_eq!(master_config("php-fpm: pool www"), None);
    }
}
