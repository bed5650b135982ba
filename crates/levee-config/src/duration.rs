//! Human-friendly durations ("3s", "500ms", "1h") and sizes ("256MiB").

use std::time::Duration;

use crate::ConfigError;

pub(crate) fn parse_duration(option: &'static str, s: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(s.trim()).map_err(|e| {
        ConfigError::invalid(
            option,
            format!("`{s}` is not a duration ({e}); write it like 3s, 500ms, 10m or 1h"),
        )
    })
}

pub(crate) fn parse_size(option: &'static str, s: &str) -> Result<u64, ConfigError> {
    s.trim()
        .parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| {
            ConfigError::invalid(
                option,
                format!("`{s}` is not a size ({e}); write it like 256MiB, 64KiB or 1GB"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("x", "256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_size("x", "64 KiB").unwrap(), 64 << 10);
        assert_eq!(parse_duration("x", "3s").unwrap(), Duration::from_secs(3));
        assert_eq!(
            parse_duration("x", "1d").unwrap(),
            Duration::from_secs(86400)
        );
        assert!(parse_size("x", "lots").is_err());
    }
}
