//! Device classes: XE and Rhymix answer one URL with a desktop or a mobile page, chosen
//! from the `User-Agent` (or the visitor's own choice, kept in its `rx_uatype` cookie),
//! and send no `Vary`. Stored under the URL alone, a phone's page would be served to
//! desktops and the other way round.
//!
//! With a preset that names a rule, every request gets the class the application would
//! choose for it (`mark`, in an internal header), the stored page varies on that class
//! (fill.rs adds it to the entry's `Vary` key, never to the response), and a fill asks
//! the backend as a browser of that class, with a fixed `User-Agent` and nothing else
//! that chooses (`for_fill`): what the backend sees of a request that may be stored is
//! what the key covers. Purges of a URL remove both classes.

use base64::Engine;
use http::header::{HeaderMap, HeaderName, HeaderValue, COOKIE, USER_AGENT};
use levee_config::DeviceRule;
use md5::{Digest, Md5};
use regex::Regex;
use std::sync::OnceLock;

/// The internal request field that carries the class. A client's own is replaced.
pub static DEVICE: HeaderName = HeaderName::from_static("x-levee-device");

/// What a fill sends for each class: a desktop Firefox, a phone's Safari.
const DESKTOP_UA: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
const MOBILE_UA: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

/// Headers that make Rhymix choose the mobile page whatever the User-Agent says.
const MOBILE_HEADERS: [&str; 2] = ["x-wap-profile", "x-operamini-phone-ua"];

/// Sets the request's class (removing any the client sent); nothing without a rule.
pub fn mark(rule: Option<DeviceRule>, headers: &mut HeaderMap) {
    headers.remove(&DEVICE);
    let Some(rule) = rule else {
        return;
    };
    let mobile = match rule {
        DeviceRule::Rhymix => rhymix_mobile(headers),
        DeviceRule::Gnuboard => gnuboard_mobile(headers),
    };
    headers.insert(
        DEVICE.clone(),
        HeaderValue::from_static(if mobile { "mobile" } else { "desktop" }),
    );
}

/// A fill's request: the class's own User-Agent, without the fields that choose.
pub fn for_fill(headers: &mut HeaderMap) {
    let Some(class) = headers.remove(&DEVICE) else {
        return;
    };
    let ua = if class == "mobile" {
        MOBILE_UA
    } else {
        DESKTOP_UA
    };
    headers.insert(USER_AGENT, HeaderValue::from_static(ua));
    for h in MOBILE_HEADERS {
        headers.remove(h);
    }
}

/// Rhymix's `Mobile::isFromMobilePhone` (classes/mobile/Mobile.class.php, at
/// github:rhymix/rhymix 8b62fb0e), for a site with the mobile view on and tablets off
/// (its defaults). The `m=` and `full_browse` parameters are in the URL, and so in the
/// key already.
fn rhymix_mobile(headers: &HeaderMap) -> bool {
    let ua = headers
        .get(USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if cookie(headers, "FullBrowse").is_some_and(|v| !v.is_empty() && v != "0") {
        return false;
    }
    // `rx_uatype` is "base64url(md5(User-Agent)):0|1": the visitor's choice, if made
    // with this User-Agent.
    if let Some(choice) = cookie(headers, "rx_uatype") {
        let hash = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Md5::digest(ua));
        let choice = percent_colon(choice);
        if let Some(flag) = choice
            .strip_prefix(hash.as_str())
            .and_then(|r| r.strip_prefix(':'))
        {
            match flag {
                "1" => return true,
                "0" => return false,
                _ => {}
            }
        }
    }
    if headers.get(USER_AGENT).is_none() {
        return false;
    }
    let header_says = MOBILE_HEADERS.iter().any(|h| headers.contains_key(*h));
    (header_says || is_mobile(ua)) && !is_tablet(ua)
}

/// gnuboard's `is_mobile()` (lib/common.lib.php, G5_MOBILE_AGENT of config.php, at
/// github:gnuboard/gnuboard5 0b6f081f). The `device=` parameter is in the URL; the
/// choice gnuboard keeps in a session (`ss_is_mobile`) levee cannot see: a visitor who
/// chose the other layout gets it when their request passes, the User-Agent's class
/// from the cache.
fn gnuboard_mobile(headers: &HeaderMap) -> bool {
    headers
        .get(USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| regexes().gnuboard.is_match(ua))
}

/// `%3A` as the cookie carries the colon.
fn percent_colon(v: &str) -> std::borrow::Cow<'_, str> {
    if v.contains("%3A") || v.contains("%3a") {
        v.replace("%3A", ":").replace("%3a", ":").into()
    } else {
        v.into()
    }
}

/// Rhymix's `UA::isMobile` (common/framework/UA.php), on the User-Agent alone.
fn is_mobile(ua: &str) -> bool {
    let r = regexes();
    if r.mobile.is_match(ua) {
        return true;
    }
    if r.desktop.is_match(ua) {
        return false;
    }
    r.other_mobile.is_match(ua)
}

/// Rhymix's `UA::isTablet`.
fn is_tablet(ua: &str) -> bool {
    if !is_mobile(ua) {
        return false;
    }
    let lower = ua.to_ascii_lowercase();
    (lower.contains("android") && !lower.contains("mobile")) || regexes().tablet.is_match(ua)
}

struct Regexes {
    mobile: Regex,
    desktop: Regex,
    other_mobile: Regex,
    tablet: Regex,
    gnuboard: Regex,
}

/// Rhymix's own expressions, compiled once.
fn regexes() -> &'static Regexes {
    static R: OnceLock<Regexes> = OnceLock::new();
    R.get_or_init(|| {
        // Constant expressions, tested below: they compile.
        let re = |s: &str| Regex::new(s).unwrap_or_else(|_| unreachable!());
        Regexes {
            mobile: re(r"(?i)android|ip(hone|ad|od)|blackberry|nokia|palm|mobile"),
            desktop: re(r"(?i)windows|linux|os [x9]|bsd"),
            other_mobile: re(
                r"(?i)kindle|opera (mini|mobi)|polaris|netfront|fennec|motorola|symbianos|webos|s[pgc]h-|lgtelecom|sonyericsson|alcatel|vodafone|maemo|minimo|bada",
            ),
            tablet: re(r"(?i)tablet|pad\b|tab\b|\bgt-\d+|kindle|nook|playbook|webos|xoom"),
            gnuboard: re(
                r"(?i)phone|samsung.*mobile|lgtel|mobile|[^A]skt|nokia|blackberry|BB10|android|sony",
            ),
        }
    })
}

/// The value of cookie `name`, if the request has it.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(';'))
        .find_map(|pair| {
            let (n, v) = pair.split_once('=')?;
            (n.trim() == name).then(|| v.trim())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(pairs: &[(&'static str, &str)]) -> String {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(*n, HeaderValue::from_str(v).unwrap());
        }
        mark(Some(DeviceRule::Rhymix), &mut h);
        h.get(&DEVICE).unwrap().to_str().unwrap().to_string()
    }

    const IPHONE: &str = MOBILE_UA;
    const IPAD: &str = "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    const ANDROID_PHONE: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36";
    const ANDROID_TABLET: &str = "Mozilla/5.0 (Linux; Android 14; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
    const WINDOWS: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";

    #[test]
    fn user_agents_are_classed_as_rhymix_does() {
        assert_eq!(class(&[("user-agent", IPHONE)]), "mobile");
        assert_eq!(class(&[("user-agent", ANDROID_PHONE)]), "mobile");
        // Tablets get the desktop page (mobile.tablets is off by default).
        assert_eq!(class(&[("user-agent", IPAD)]), "desktop");
        assert_eq!(class(&[("user-agent", ANDROID_TABLET)]), "desktop");
        assert_eq!(class(&[("user-agent", WINDOWS)]), "desktop");
        assert_eq!(class(&[("user-agent", DESKTOP_UA)]), "desktop");
        assert_eq!(class(&[]), "desktop");
        assert_eq!(class(&[("user-agent", "Opera Mini/8.0")]), "mobile");
        assert_eq!(
            class(&[("user-agent", "SomeBrowser"), ("x-wap-profile", "x")]),
            "mobile"
        );
    }

    /// rx_uatype as recorded (benchmarks/seedapps/recordings/rhymix.txt): the hash of
    /// the recording's Firefox User-Agent, `%3A`, the flag.
    #[test]
    fn the_visitors_own_choice_counts_with_its_own_user_agent_only() {
        let firefox = DESKTOP_UA;
        let chose_mobile = "Z2OUOxpBpebtRy10YF9KXQ%3A1";
        assert_eq!(
            class(&[
                ("user-agent", firefox),
                ("cookie", "rx_uatype=Z2OUOxpBpebtRy10YF9KXQ%3A0")
            ]),
            "desktop"
        );
        assert_eq!(
            class(&[
                ("user-agent", firefox),
                ("cookie", &format!("rx_uatype={chose_mobile}"))
            ]),
            "mobile"
        );
        // Another browser's choice does not apply.
        assert_eq!(
            class(&[
                ("user-agent", WINDOWS),
                ("cookie", &format!("rx_uatype={chose_mobile}"))
            ]),
            "desktop"
        );
        assert_eq!(
            class(&[("user-agent", IPHONE), ("cookie", "FullBrowse=1")]),
            "desktop"
        );
    }

    #[test]
    fn gnuboard_classes_by_its_own_expression() {
        let class = |ua: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(USER_AGENT, HeaderValue::from_static(ua));
            mark(Some(DeviceRule::Gnuboard), &mut h);
            h.get(&DEVICE).unwrap().to_str().unwrap().to_string()
        };
        assert_eq!(class(IPHONE), "mobile");
        assert_eq!(class(ANDROID_TABLET), "mobile");
        assert_eq!(class(WINDOWS), "desktop");
        assert_eq!(class(DESKTOP_UA), "desktop");
        // The canonical UAs a fill sends are classed as themselves.
        assert_eq!(class(MOBILE_UA), "mobile");
    }

    #[test]
    fn a_clients_own_class_is_replaced_and_a_fill_asks_as_its_class() {
        let mut h = HeaderMap::new();
        h.insert(USER_AGENT, HeaderValue::from_static(WINDOWS));
        h.insert(DEVICE.clone(), HeaderValue::from_static("mobile"));
        h.insert("x-wap-profile", HeaderValue::from_static("x"));
        mark(None, &mut h);
        assert!(h.get(&DEVICE).is_none());
        mark(Some(DeviceRule::Rhymix), &mut h);
        assert_eq!(h.get(&DEVICE).unwrap(), "mobile");
        for_fill(&mut h);
        assert!(h.get(&DEVICE).is_none() && h.get("x-wap-profile").is_none());
        assert_eq!(h.get(USER_AGENT).unwrap(), MOBILE_UA);
    }
}
