//! The small conversions every table's settings share: a value the defaults must have
//! provided, durations, sizes, percentages, addresses.

use std::net::SocketAddr;
use std::time::Duration;

use crate::duration::{parse_duration, parse_size};
use crate::ConfigError;

/// More worker threads (or app processes) than this is a typo, not a machine.
pub(crate) const MAX_WORKERS: usize = 1024;

/// A value the merged options must have: the defaults table provides every one, so a
/// missing one is levee's bug, reported rather than panicking.
pub(crate) fn need<T>(value: Option<T>, option: &'static str) -> Result<T, ConfigError> {
    value.ok_or_else(|| {
        ConfigError::invalid(
            option,
            "no value and no built-in default (a bug in levee: please report it)",
        )
    })
}

pub(crate) fn duration(
    option: &'static str,
    value: Option<String>,
) -> Result<Duration, ConfigError> {
    parse_duration(option, &need(value, option)?)
}

pub(crate) fn size(option: &'static str, value: Option<String>) -> Result<u64, ConfigError> {
    parse_size(option, &need(value, option)?)
}

/// A duration that may be switched off with `off` or `0`.
pub(crate) fn optional_duration(
    option: &'static str,
    value: Option<String>,
) -> Result<Option<Duration>, ConfigError> {
    match need(value, option)?.as_str() {
        "off" | "0" | "0s" => Ok(None),
        s => parse_duration(option, s).map(Some),
    }
}

/// "25%" → 0.25.
pub(crate) fn percent(option: &'static str, s: &str) -> Result<f64, ConfigError> {
    s.trim()
        .strip_suffix('%')
        .and_then(|n| n.trim().parse::<f64>().ok())
        .filter(|n| (0.0..=100.0).contains(n))
        .map(|n| n / 100.0)
        .ok_or_else(|| {
            ConfigError::invalid(option, format!("{s:?} is not a percentage like \"25%\""))
        })
}

pub(crate) fn positive(option: &'static str, v: Option<usize>) -> Result<usize, ConfigError> {
    match need(v, option)? {
        0 => Err(ConfigError::invalid(option, "must be at least 1")),
        v => Ok(v),
    }
}

pub(crate) fn address(
    option: &'static str,
    s: &str,
    example: &str,
) -> Result<SocketAddr, ConfigError> {
    s.parse().map_err(|_| {
        ConfigError::invalid(
            option,
            format!("`{s}` is not an address; write it like {example}"),
        )
    })
}

/// Addresses or networks, as `127.0.0.1`, `10.0.0.0/8` or `::1/128`.
pub(crate) fn networks(
    option: &'static str,
    list: Vec<String>,
) -> Result<Vec<ipnet::IpNet>, ConfigError> {
    list.iter()
        .map(|a| {
            a.parse::<ipnet::IpNet>()
                .or_else(|_| a.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    ConfigError::invalid(
                        option,
                        format!("`{a}` is not an address or network; write it like 127.0.0.1, 10.0.0.0/8 or ::1/128"),
                    )
                })
        })
        .collect()
}

/// A percentage above 0%: at 0% a class of work would never reach the backend.
pub(crate) fn share(option: &'static str, v: Option<String>) -> Result<f64, ConfigError> {
    let s = percent(option, &need(v, option)?)?;
    if s <= 0.0 {
        return Err(ConfigError::invalid(
            option,
            "must be more than 0%: at 0% that work would never reach the backend; \"100%\" turns the limit off",
        ));
    }
    Ok(s)
}

/// A network prefix length for `max` bits (32 for IPv4, 128 for IPv6).
pub(crate) fn prefix_len(option: &'static str, v: Option<u8>, max: u8) -> Result<u8, ConfigError> {
    match need(v, option)? {
        n if n <= max => Ok(n),
        n => Err(ConfigError::invalid(
            option,
            format!("{n} is not a prefix length: write 0 to {max} (24 groups IPv4 clients by /24)"),
        )),
    }
}

/// `workers`: 0 and "auto" mean one per core.
pub(crate) fn workers(w: crate::options::Workers) -> Result<usize, ConfigError> {
    let n = match w {
        crate::options::Workers::Count(n) => n,
        crate::options::Workers::Word(w) if w.eq_ignore_ascii_case("auto") => 0,
        crate::options::Workers::Word(w) => {
            return Err(ConfigError::invalid(
                "workers",
                format!(
                "{w:?} is not a number of threads; write a number, or \"auto\" for one per core"
            ),
            ))
        }
    };
    Ok(match n {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n.min(MAX_WORKERS),
    })
}
