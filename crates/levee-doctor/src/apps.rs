//! Which application serves the site, from what it shows (generator meta tag, headers,
//! cookie names, paths in its pages), and what to change for it: the `--preset`, the
//! application's own setting that stops sessions on anonymous pages where one exists,
//! and what to expect.

use http::header::HeaderMap;
use serde::Serialize;

use crate::fetch::Exchange;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum App {
    WordPress,
    MediaWiki,
    DokuWiki,
    Drupal,
    #[serde(rename = "XE")]
    Xe,
    Rhymix,
    #[serde(rename = "gnuboard")]
    Gnuboard,
    MoniWiki,
    Laravel,
    Symfony,
}

impl App {
    pub fn name(self) -> &'static str {
        match self {
            App::WordPress => "WordPress",
            App::MediaWiki => "MediaWiki",
            App::DokuWiki => "DokuWiki",
            App::Drupal => "Drupal",
            App::Xe => "XE",
            App::Rhymix => "Rhymix",
            App::Gnuboard => "gnuboard",
            App::MoniWiki => "MoniWiki",
            App::Laravel => "Laravel",
            App::Symfony => "Symfony",
        }
    }

    /// levee's preset for it, if there is one (`levee serve --preset NAME`).
    pub fn preset(self) -> Option<&'static str> {
        match self {
            App::WordPress => Some("wordpress"),
            App::MediaWiki => Some("mediawiki"),
            App::DokuWiki => Some("dokuwiki"),
            App::Drupal => Some("drupal"),
            App::Xe => Some("xe"),
            App::Rhymix => Some("rhymix"),
            App::Gnuboard => Some("gnuboard"),
            App::MoniWiki => Some("moniwiki"),
            App::Laravel | App::Symfony => None,
        }
    }

    /// The application's own changes, beyond levee's preset.
    pub fn advice(self) -> &'static [&'static str] {
        match self {
            App::WordPress => &[
                "WordPress core starts no session for visitors: a PHPSESSID on its pages comes from a plugin calling session_start() (find it: grep -rl session_start wp-content/plugins)",
                "WordPress sends no freshness: the preset's anonymous TTL (60 s) stores pages anyway, and a post saved by a logged-in editor marks the host's pages stale at once",
            ],
            App::MediaWiki => &[
                "in LocalSettings.php: $wgUseCdn = true; $wgCdnMaxAge = 3600; $wgCdnServers = ['127.0.0.1']; so pages carry s-maxage and edits send PURGE to levee ([purge] allow)",
                "without that, MediaWiki's `private, must-revalidate, max-age=0` is overridden by the preset's anonymous TTL (60 s) for readers only",
            ],
            App::DokuWiki => &[
                "DokuWiki starts a PHP session (cookie `DokuWiki`) on every page and has no setting to stop it: the preset drops that cookie from stored pages and stores them for 60 s",
            ],
            App::Drupal => &[
                "Drupal: turn on the Internal Page Cache module and set 'Browser and proxy cache maximum age' (admin/config/development/performance) so pages carry max-age",
            ],
            App::Xe | App::Rhymix => &[
                "XE/Rhymix: turn on 'delay session start' (세션 시작 지연; Rhymix: Admin > System > Advanced, XE: delay_session = 'Y' in files/config/db.config.php) so visitors get no PHPSESSID",
                "forums change by the minute: the preset stores anonymous pages for 10 s",
            ],
            App::Gnuboard => &[
                "gnuboard starts a session in common.php for every visitor and sets its visit counter cookie (named md5(\"ck_visit_ip\") = 2a0d2363…): no setting stops them; the preset drops both from stored pages, stores them for 10 s, and a returning visitor with the counter still gets hits",
            ],
            App::MoniWiki => &[
                "MoniWiki sends `max-age=0` without s-maxage: the preset's anonymous TTL (60 s) stores pages for readers; edits through levee mark them stale at once",
            ],
            App::Laravel => &[
                "Laravel's `web` middleware group starts a session (laravel_session, XSRF-TOKEN) on every page: serve pages visitors read from routes without StartSession and VerifyCsrfToken, or give them `Cache-Control: public, s-maxage=…`",
                "no preset: run levee with --anonymous-ttl 30s and anonymous.session_cookies naming your session cookie if it is not laravel_session",
            ],
            App::Symfony => &[
                "Symfony marks every response that used the session `private` (AbstractSessionListener): keep the session off anonymous pages (CSRF forms, flash messages in the layout) and set `s-maxage` on them",
                "no preset: run levee with --anonymous-ttl 30s if the pages must keep their session",
            ],
        }
    }
}

/// The application, with the evidence that named it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Detected {
    pub app: App,
    pub evidence: String,
}

/// A test of a cookie's name.
type CookieRule<'a> = &'a dyn Fn(&str) -> bool;

/// Detects the application from a page's response (fields, cookies) and HTML.
pub fn detect(ex: &Exchange, html: &str) -> Option<Detected> {
    let found = |app, evidence: String| Some(Detected { app, evidence });
    if let Some(generator) = meta_generator(html) {
        let g = generator.to_ascii_lowercase();
        let table: &[(&str, App)] = &[
            ("wordpress", App::WordPress),
            ("mediawiki", App::MediaWiki),
            ("dokuwiki", App::DokuWiki),
            ("drupal", App::Drupal),
            ("rhymix", App::Rhymix),
            ("xpressengine", App::Xe),
            ("gnuboard", App::Gnuboard),
            ("moniwiki", App::MoniWiki),
        ];
        if let Some((_, app)) = table.iter().find(|(k, _)| g.contains(k)) {
            return found(*app, format!("generator meta tag: {generator}"));
        }
    }
    if let Some(g) = header(&ex.headers, "x-generator") {
        if g.to_ascii_lowercase().contains("drupal") {
            return found(App::Drupal, format!("X-Generator: {g}"));
        }
    }
    let cookies: Vec<String> = ex.set_cookies().into_iter().map(|(n, _)| n).collect();
    let cookie = |pred: &dyn Fn(&str) -> bool| cookies.iter().find(|c| pred(c)).cloned();
    let by_cookie: &[(CookieRule, App)] = &[
        (
            &|c| c.starts_with("wordpress_") || c.starts_with("wp-"),
            App::WordPress,
        ),
        (&|c| c == "DokuWiki" || c.starts_with("DW"), App::DokuWiki),
        (
            &|c| c.starts_with("MONIWIKI") || c == "MONI_TRAIL",
            App::MoniWiki,
        ),
        (
            &|c| c.starts_with("rx_") || c.starts_with("RHYMIX"),
            App::Rhymix,
        ),
        (&|c| c.starts_with("xe_") || c == "xeak", App::Xe),
        // gnuboard5 sends md5(name): its visit counter, login and remembered login.
        (
            &|c| {
                c.starts_with("ck_")
                    || matches!(
                        c,
                        "2a0d2363701f23f8a75028924a3af643"
                            | "6e1280981e1dfd9169c5dea9c28ff2e3"
                            | "a3e94372a6379bc1ae3698dfdf38595b"
                    )
            },
            App::Gnuboard,
        ),
        (
            &|c| c == "laravel_session" || c == "XSRF-TOKEN",
            App::Laravel,
        ),
        (
            &|c| c.starts_with("SESS") || c.starts_with("SSESS"),
            App::Drupal,
        ),
        (
            &|c| c.ends_with("_session") && c != "laravel_session",
            App::MediaWiki,
        ),
        (&|c| c == "sf_redirect" || c == "MOCKSESSID", App::Symfony),
    ];
    for (pred, app) in by_cookie {
        if let Some(c) = cookie(*pred) {
            return found(*app, format!("cookie {c}"));
        }
    }
    let by_path: &[(&str, App)] = &[
        ("/wp-content/", App::WordPress),
        ("/wp-includes/", App::WordPress),
        ("/load.php?", App::MediaWiki),
        ("mw-content-text", App::MediaWiki),
        ("/lib/exe/", App::DokuWiki),
        ("/sites/default/files/", App::Drupal),
        ("drupal-settings-json", App::Drupal),
        ("/common/js/xe", App::Xe),
        ("g5_url", App::Gnuboard),
        ("/bbs/board.php", App::Gnuboard),
        ("moniwiki", App::MoniWiki),
    ];
    if let Some((p, app)) = by_path.iter().find(|(p, _)| html.contains(p)) {
        return found(*app, format!("its pages link {p}"));
    }
    if header(&ex.headers, "x-debug-token").is_some() {
        return found(App::Symfony, "X-Debug-Token".into());
    }
    None
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The `content` of `<meta name="generator" content="...">`.
fn meta_generator(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("<meta") {
        let start = from + i;
        let end = lower[start..].find('>').map_or(lower.len(), |e| start + e);
        from = end;
        let tag = &lower[start..end];
        if !tag.contains("name=\"generator\"") && !tag.contains("name='generator'") {
            continue;
        }
        let c = tag.find("content=")? + "content=".len();
        let quote = tag[c..].chars().next()?;
        let value = html[start + c + 1..end].split(quote).next()?;
        return Some(value.trim().to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, StatusCode, Version};

    fn page(cookies: &[&str]) -> Exchange {
        let mut headers = HeaderMap::new();
        for c in cookies {
            headers.append("set-cookie", HeaderValue::from_str(c).unwrap());
        }
        Exchange {
            status: StatusCode::OK,
            version: Version::HTTP_11,
            headers,
            body: Default::default(),
            truncated: false,
            elapsed: Default::default(),
            received: std::time::SystemTime::now(),
            closed: false,
        }
    }

    #[test]
    fn the_generator_tag_names_the_application_first() {
        let html = r#"<head><meta name="generator" content="WordPress 6.1.1" /></head>"#;
        let d = detect(&page(&["PHPSESSID=1"]), html).unwrap();
        assert_eq!(d.app, App::WordPress);
        assert!(d.evidence.contains("6.1.1"));
        let html = r#"<META content="MediaWiki 1.39.5" name="generator">"#;
        assert_eq!(detect(&page(&[]), html).unwrap().app, App::MediaWiki);
    }

    #[test]
    fn cookies_and_paths_name_it_otherwise() {
        assert_eq!(
            detect(&page(&["DokuWiki=abc; path=/"]), "").unwrap().app,
            App::DokuWiki
        );
        assert_eq!(
            detect(&page(&["ck_visit_ip=1"]), "").unwrap().app,
            App::Gnuboard
        );
        assert_eq!(
            detect(
                &page(&["2a0d2363701f23f8a75028924a3af643=MTI3LjAuMC4x"]),
                ""
            )
            .unwrap()
            .app,
            App::Gnuboard
        );
        assert_eq!(
            detect(&page(&["MONI_TRAIL=FrontPage"]), "").unwrap().app,
            App::MoniWiki
        );
        assert_eq!(
            detect(&page(&["laravel_session=x"]), "").unwrap().app,
            App::Laravel
        );
        assert_eq!(
            detect(&page(&[]), r#"<link href="/wp-content/themes/x.css">"#)
                .unwrap()
                .app,
            App::WordPress
        );
        assert_eq!(detect(&page(&["PHPSESSID=1"]), "<p>hi</p>"), None);
    }
}
