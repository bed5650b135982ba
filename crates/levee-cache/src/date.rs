//! HTTP dates as a recipient must read them (RFC 9110 §5.6.7): the preferred
//! IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete formats, RFC 850
//! (`Sunday, 06-Nov-94 08:49:37 GMT`) and C's asctime (`Sun Nov  6 08:49:37 1994`).
//!
//! The one parser of every date levee receives (`Date`, `Expires`, `Last-Modified`,
//! `If-Modified-Since`, `If-Unmodified-Since`), used instead of `httpdate`, which reads
//! the three formats with their names in one case only: a lowercase month made an
//! `Expires` invalid, that is already expired (RFC 9111 §5.3).
//!
//! - Day names, month names and `GMT` are matched case-insensitively: RFC 9110 §5.6.7
//!   makes HTTP-date case-sensitive, and RFC 9111 §4.2 relaxes that for caches ("a cache
//!   recipient SHOULD match the field value case-insensitively").
//! - The layout is the grammar's: IMF-fixdate and asctime with a short day name,
//!   RFC 850 with a long one and a two-digit year, `GMT` the only zone (RFC 9111 §4.2:
//!   another zone is invalid for expiration).
//! - The day name must be one, but is not checked against the date: the numbers say when,
//!   and a wrong weekday is a sender's slip, not another instant (nginx and Go ignore it
//!   too).
//! - A two-digit RFC 850 year more than 50 years in the future is the most recent past
//!   year with those digits (§5.6.7's MUST), relative to levee's [clock](crate::clock).
//! - Nothing else is guessed: other zones, numeric offsets, missing seconds or extra text
//!   make the value invalid (`None`), which callers read the safe way (an invalid
//!   `Expires` is expired, an invalid `If-Modified-Since` is ignored).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parses an HTTP date in any of the three formats; `None` if it is not one.
pub fn parse_http_date(s: &str) -> Option<SystemTime> {
    parse_at(s, crate::clock::system_now())
}

/// [`parse_http_date`] with the current time given (it places two-digit years).
pub fn parse_at(s: &str, now: SystemTime) -> Option<SystemTime> {
    let mut c = Cursor(s.trim_matches([' ', '\t']).as_bytes());
    let day_name = c.alpha();
    let long_name = weekday(day_name)?;
    let fields = if c.eat(b',') {
        c.space()?;
        let (day, 2) = c.digits(2, 2)? else {
            return None;
        };
        let fields = if long_name {
            // rfc850-date: Sunday, 06-Nov-94
            c.byte(b'-')?;
            let month = month(c.alpha())?;
            c.byte(b'-')?;
            let (yy, 2) = c.digits(2, 2)? else {
                return None;
            };
            let year = full_year(yy, now);
            let time = time_of_day(&mut c)?;
            Fields {
                year,
                month,
                day,
                time,
            }
        } else {
            // IMF-fixdate: Sun, 06 Nov 1994
            c.space()?;
            let month = month(c.alpha())?;
            c.space()?;
            let (year, 4) = c.digits(4, 4)? else {
                return None;
            };
            let time = time_of_day(&mut c)?;
            Fields {
                year,
                month,
                day,
                time,
            }
        };
        fields.with_zone(&mut c)?
    } else {
        // asctime-date: Sun Nov  6 08:49:37 1994
        if long_name {
            return None;
        }
        c.space()?;
        let month = month(c.alpha())?;
        c.space()?;
        c.eat(b' ');
        let day = c.digits(1, 2)?;
        let time = time_of_day(&mut c)?;
        c.space()?;
        let (year, 4) = c.digits(4, 4)? else {
            return None;
        };
        Fields {
            year,
            month,
            day: day.0,
            time,
        }
    };
    if !c.0.is_empty() {
        return None;
    }
    fields.to_system_time()
}

struct Fields {
    year: u32,
    month: u32,
    day: u32,
    /// Hour, minute, second.
    time: (u32, u32, u32),
}

impl Fields {
    /// ` GMT`, in any case, then the end.
    fn with_zone(self, c: &mut Cursor<'_>) -> Option<Fields> {
        c.space()?;
        c.alpha().eq_ignore_ascii_case(b"GMT").then_some(self)
    }

    fn to_system_time(&self) -> Option<SystemTime> {
        let (h, m, s) = self.time;
        // second = 2DIGIT; 60 is a leap second (the next instant, as POSIX counts).
        if self.month == 0
            || self.month > 12
            || self.day == 0
            || self.day > days_in_month(self.year, self.month)
            || h > 23
            || m > 59
            || s > 60
        {
            return None;
        }
        let days = days_from_civil(i64::from(self.year), self.month, self.day);
        let secs = days * 86_400 + i64::from(h * 3600 + m * 60 + s);
        if secs >= 0 {
            UNIX_EPOCH.checked_add(Duration::from_secs(secs.unsigned_abs()))
        } else {
            UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
        }
    }
}

/// RFC 9110 §5.6.7: a two-digit year that would be more than 50 years in the future is
/// the most recent past year with the same last two digits.
fn full_year(yy: u32, now: SystemTime) -> u32 {
    let this_year = year_of(now);
    let mut year = this_year - this_year % 100 + yy;
    if year > this_year + 50 {
        year -= 100;
    } else if year + 100 <= this_year + 50 {
        year += 100;
    }
    year
}

fn year_of(t: SystemTime) -> u32 {
    let days = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    // Days to civil year (Howard Hinnant's algorithm, for dates after 1970).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    u32::try_from(year).unwrap_or(u32::MAX / 2)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        _ => 28,
    }
}

fn time_of_day(c: &mut Cursor<'_>) -> Option<(u32, u32, u32)> {
    c.space()?;
    let (h, 2) = c.digits(2, 2)? else { return None };
    c.byte(b':')?;
    let (m, 2) = c.digits(2, 2)? else { return None };
    c.byte(b':')?;
    let (s, 2) = c.digits(2, 2)? else { return None };
    Some((h, m, s))
}

const DAYS: [&[u8]; 7] = [
    b"monday",
    b"tuesday",
    b"wednesday",
    b"thursday",
    b"friday",
    b"saturday",
    b"sunday",
];
const MONTHS: [&[u8]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec",
];

/// A day name in any case: whether it is the long one (`Sunday`, RFC 850's) rather than
/// the short one (`Sun`, IMF-fixdate's and asctime's); `None` if it is neither.
fn weekday(name: &[u8]) -> Option<bool> {
    DAYS.iter().find_map(|d| {
        if name.eq_ignore_ascii_case(d) {
            Some(true)
        } else if name.eq_ignore_ascii_case(&d[..3]) {
            Some(false)
        } else {
            None
        }
    })
}

/// A month's three letters, in any case: 1 to 12.
fn month(name: &[u8]) -> Option<u32> {
    let i = MONTHS.iter().position(|m| name.eq_ignore_ascii_case(m))?;
    u32::try_from(i + 1).ok()
}

/// The rest of the value, read from the front.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    /// Letters up to the first other byte (may be none).
    fn alpha(&mut self) -> &'a [u8] {
        let n = self
            .0
            .iter()
            .take_while(|b| b.is_ascii_alphabetic())
            .count();
        let (word, rest) = self.0.split_at(n);
        self.0 = rest;
        word
    }

    /// Between `min` and `max` digits: their value and how many there were.
    fn digits(&mut self, min: usize, max: usize) -> Option<(u32, usize)> {
        let n = self.0.iter().take_while(|b| b.is_ascii_digit()).count();
        if n < min || n > max {
            return None;
        }
        let (digits, rest) = self.0.split_at(n);
        self.0 = rest;
        let value = digits
            .iter()
            .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
        Some((value, n))
    }

    fn eat(&mut self, b: u8) -> bool {
        match self.0.split_first() {
            Some((first, rest)) if *first == b => {
                self.0 = rest;
                true
            }
            _ => false,
        }
    }

    fn byte(&mut self, b: u8) -> Option<()> {
        self.eat(b).then_some(())
    }

    /// Exactly one SP.
    fn space(&mut self) -> Option<()> {
        self.byte(b' ')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-25, around when these tests were written.
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_795_000_000)
    }

    fn parse(s: &str) -> Option<SystemTime> {
        parse_at(s, now())
    }

    /// RFC 9110 §5.6.7's example instant: Sunday, 1994-11-06 08:49:37 UTC.
    const EXAMPLE: u64 = 784_111_777;

    #[test]
    fn the_three_formats_of_rfc_9110() {
        let t = Some(UNIX_EPOCH + Duration::from_secs(EXAMPLE));
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), t, "IMF-fixdate");
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT"), t, "rfc850-date");
        assert_eq!(parse("Sun Nov  6 08:49:37 1994"), t, "asctime-date");
    }

    #[test]
    fn names_are_read_in_any_case() {
        let t = Some(UNIX_EPOCH + Duration::from_secs(EXAMPLE));
        for s in [
            "sun, 06 nov 1994 08:49:37 gmt",
            "SUN, 06 NOV 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 Gmt",
            "SUNDAY, 06-nov-94 08:49:37 gmt",
            "sun NOV  6 08:49:37 1994",
        ] {
            assert_eq!(parse(s), t, "{s}");
        }
    }

    #[test]
    fn agrees_with_httpdate_where_httpdate_reads_the_value() {
        for secs in [0, 1, EXAMPLE, 951_782_400, 1_795_000_000, 253_402_300_799] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            let s = httpdate::fmt_http_date(t);
            assert_eq!(parse(&s), Some(t), "{s}");
            assert_eq!(parse(&s), httpdate::parse_http_date(&s).ok(), "{s}");
        }
        // 2000-02-29 (a leap day of a century divisible by 400), in asctime.
        assert_eq!(
            parse("Tue Feb 29 00:00:00 2000"),
            Some(UNIX_EPOCH + Duration::from_secs(951_782_400))
        );
    }

    #[test]
    fn two_digit_years_more_than_50_years_ahead_are_in_the_past() {
        // RFC 9110 §5.6.7, from 2026: 75 is 2075 (49 years ahead), 77 is 1977 (2077 would
        // be 51 years ahead); 26 is this year.
        let year = |s: &str| parse(s).map(year_of);
        assert_eq!(year("Friday, 01-Jan-75 00:00:00 GMT"), Some(2075));
        assert_eq!(year("Saturday, 01-Jan-77 00:00:00 GMT"), Some(1977));
        assert_eq!(year("Thursday, 01-Jan-26 00:00:00 GMT"), Some(2026));
        assert_eq!(year("Monday, 01-Jan-00 00:00:00 GMT"), Some(2000));
        // The layouts are the grammar's (cache-tests: dashes with a four-digit year are
        // no HTTP-date).
        assert_eq!(year("Sunday, 06-Nov-1994 08:49:37 GMT"), None);
        assert_eq!(year("Sun, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(year("Thu, 18-Aug-2050 02:01:18 GMT"), None);
        assert_eq!(year("Sunday, 06 Nov 1994 08:49:37 GMT"), None);
        assert_eq!(year("Sunday Nov  6 08:49:37 1994"), None);
    }

    #[test]
    fn the_weekday_is_not_checked_against_the_date() {
        assert_eq!(
            parse("Mon, 06 Nov 1994 08:49:37 GMT"),
            parse("Sun, 06 Nov 1994 08:49:37 GMT")
        );
        assert_eq!(parse("Funday, 06-Nov-94 08:49:37 GMT"), None);
    }

    #[test]
    fn before_1970_is_a_date_in_the_past() {
        let t = parse("Thu, 01 Jan 1925 00:00:00 GMT").unwrap();
        assert!(t < UNIX_EPOCH);
    }

    #[test]
    fn anything_else_is_invalid() {
        for s in [
            "",
            "0",
            "-1",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 +0000",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 29 Feb 1900 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT trailing",
            "Sun, 06 Nov 1994  08:49:37 GMT",
            "Sun,06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Novem 1994 08:49:37 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun Nov  6 08:49:37 94",
            "Sun Nov  6 08:49:37 1994 GMT",
            "1994-11-06T08:49:37Z",
            "Sun, 06 Nov 1994 08:49:37 GMT\u{e9}",
        ] {
            assert_eq!(parse(s), None, "{s:?}");
        }
    }

    #[test]
    fn surrounding_whitespace_is_ignored() {
        assert!(parse("  Sun, 06 Nov 1994 08:49:37 GMT\t").is_some());
    }
}
