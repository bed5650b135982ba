//! `levee doctor`: why a site is slow and uncacheable, what levee will do with it, and
//! what to change (issue 24).
//!
//! - fetch.rs: the client (GET and HEAD only, rate-limited, bounded, timed out)
//! - crawl.rs: same-host links and robots.txt
//! - checks.rs: from the exchanges of one URL to every reason (pure)
//! - apps.rs: which application, its preset and its own settings
//! - system.rs: `--system`, the host's limits against levee's settings
//! - report.rs: the JSON shape, the summary, the text
//! - root.rs: `--root`, what a document root holds that the preset keeps from the web
//!
//! levee's verdict is not computed here: `levee_visitor::verdict::anonymous_get` calls the
//! functions `levee serve` runs (classify's pass rule, the fill's storage decision) on the
//! response fetched as a fill asks for it.

pub mod apps;
pub mod checks;
pub mod crawl;
pub mod fetch;
pub mod report;
pub mod root;
pub mod system;

use std::collections::HashSet;
use std::time::Duration;

use http::header::{self, HeaderName};
use http::Method;
use levee_config::{ConfigError, OneOrMany, Options, Settings};
use levee_visitor::verdict::{self, Verdict};

use crate::apps::App;
use crate::checks::Probe;
use crate::fetch::{Client, Exchange, FetchError, Url};
use crate::report::{LeveeVerdict, Passing, PresetSummary, Report, Summary, UrlReport};

/// What to audit and how.
pub struct Audit {
    pub urls: Vec<Url>,
    /// Follow same-host links until this many pages in all (0: only the URLs given).
    pub crawl: usize,
    pub rate: f64,
    pub timeout: Duration,
    pub max_body: usize,
    /// The config file and flags, as `levee serve` takes them.
    pub config: Option<std::path::PathBuf>,
    pub flags: Options,
    /// A PEM file of extra certificates to trust for https URLs (`--cacert`).
    pub ca: Option<std::path::PathBuf>,
}

/// The site could not be reached at all (exit status 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(pub String);

/// levee's settings as `levee serve` resolves them from `config` and `flags`; without a
/// backend in either, the audited site itself is taken as the backend.
pub fn settings(
    config: Option<&std::path::Path>,
    flags: &Options,
    site: &Url,
) -> Result<Settings, ConfigError> {
    match Settings::load(config, flags.clone()) {
        Err(ConfigError::NoBackend) => {
            let flags = Options {
                backend: OneOrMany::from_flags(&[format!("http://{}", site.authority())]),
                ..flags.clone()
            };
            Settings::load(config, flags)
        }
        other => other,
    }
}

fn with_preset(flags: &Options, preset: &str) -> Options {
    let mut presets = flags
        .preset
        .clone()
        .map(OneOrMany::into_vec)
        .unwrap_or_default();
    presets.push(preset.to_string());
    Options {
        preset: OneOrMany::from_flags(&presets),
        ..flags.clone()
    }
}

/// Runs the audit. `Err` only when no URL could be fetched at all.
pub async fn run(audit: &Audit) -> Result<Report, Box<dyn std::error::Error + Send + Sync>> {
    let Some(first) = audit.urls.first() else {
        return Err("no URL to audit".into());
    };
    let settings = settings(audit.config.as_deref(), &audit.flags, first)?;
    let mut client =
        Client::new(audit.rate, audit.timeout, audit.max_body).with_extra_ca(audit.ca.clone());
    let budget = audit.urls.len().max(audit.crawl);
    let robots = if audit.crawl > 0 {
        let r = client
            .send(Method::GET, &first.with_path("/robots.txt"), &[])
            .await;
        match r {
            Ok(ex) if ex.status.is_success() => {
                crawl::Robots::parse(&String::from_utf8_lossy(&ex.body))
            }
            _ => crawl::Robots::default(),
        }
    } else {
        crawl::Robots::default()
    };
    let mut queue: Vec<Url> = audit.urls.clone();
    let mut seen: HashSet<Url> = queue.iter().cloned().collect();
    let mut pages: Vec<(Url, Result<Probe, FetchError>)> = Vec::new();
    let mut i = 0;
    // Redirects of the URLs given are followed (a few), links only when crawling.
    let mut redirects = 0;
    while i < queue.len() && pages.len() < budget + redirects {
        let url = queue[i].clone();
        i += 1;
        let probe = probe(&mut client, &url).await;
        if let Ok(p) = &probe {
            let mut next = Vec::new();
            if p.first.status.is_redirection() {
                if let Some(to) = p
                    .first
                    .header(header::LOCATION)
                    .and_then(|l| crawl::resolve(&url, l))
                {
                    if redirects < 5 && !seen.contains(&to) {
                        redirects += 1;
                        next.push(to);
                    }
                }
            }
            if audit.crawl > 0 {
                next.extend(crawl::links(&url, &html(p)));
            }
            for u in next {
                if robots.allows(&u.path) && seen.insert(u.clone()) {
                    queue.push(u);
                }
            }
        }
        pages.push((url, probe));
    }
    if pages.iter().all(|(_, p)| p.is_err()) {
        let why = pages
            .iter()
            .find_map(|(_, p)| p.as_ref().err())
            .map_or_else(|| "nothing fetched".to_string(), |e| e.0.clone());
        return Err(Box::new(Unreachable(why)));
    }
    Ok(assemble(audit, &settings, pages))
}

/// The four exchanges of one URL.
async fn probe(client: &mut Client, url: &Url) -> Result<Probe, FetchError> {
    let ae = || vec![(header::ACCEPT_ENCODING, "gzip, deflate, br".to_string())];
    let first = client.send(Method::GET, url, &ae()).await?;
    let second = client.send(Method::GET, url, &ae()).await.ok();
    let mut validators: Vec<(HeaderName, String)> = ae();
    if let Some(etag) = first.header(header::ETAG) {
        validators.push((header::IF_NONE_MATCH, etag.to_string()));
    }
    if let Some(lm) = first.header(header::LAST_MODIFIED) {
        validators.push((header::IF_MODIFIED_SINCE, lm.to_string()));
    }
    let conditional = if validators.len() > 1 {
        client.send(Method::GET, url, &validators).await.ok()
    } else {
        None
    };
    let identity = client.send(Method::GET, url, &[]).await.ok();
    Ok(Probe {
        first,
        second,
        conditional,
        identity,
    })
}

/// The page's HTML, from the exchange sent without `Accept-Encoding`.
fn html(p: &Probe) -> String {
    let ex: &Exchange = p.identity.as_ref().unwrap_or(&p.first);
    if ex.headers.contains_key(header::CONTENT_ENCODING) {
        return String::new();
    }
    String::from_utf8_lossy(&ex.body).into_owned()
}

/// levee's verdict for one page under `settings`, from the exchange a fill would make.
fn verdict_of(settings: &Settings, url: &Url, p: &Probe) -> LeveeVerdict {
    let Some(site) = settings.site_for(&url.host) else {
        return LeveeVerdict {
            result: "NONE",
            reason: format!("no site of the configuration answers {}", url.host),
            ttl_s: None,
        };
    };
    let ex = p.identity.as_ref().unwrap_or(&p.first);
    match verdict::anonymous_get(site, &url.path, ex.status, &ex.headers, ex.received) {
        Verdict::Pass { reason } => LeveeVerdict {
            result: "PASS",
            reason,
            ttl_s: None,
        },
        Verdict::NotStored { reason } => LeveeVerdict {
            result: "PASS",
            reason: reason.as_str().into(),
            ttl_s: None,
        },
        Verdict::Revalidated => LeveeVerdict {
            result: "REVALIDATED",
            reason: "no-freshness".into(),
            ttl_s: None,
        },
        Verdict::Stored { fresh, by, .. } => LeveeVerdict {
            result: if by == verdict::FreshnessFrom::MicroCache {
                "MICRO"
            } else {
                "HIT"
            },
            reason: by.as_str().into(),
            ttl_s: Some(fresh.as_secs()),
        },
    }
}

fn assemble(
    audit: &Audit,
    settings: &Settings,
    pages: Vec<(Url, Result<Probe, FetchError>)>,
) -> Report {
    // The application: the one most pages show.
    let detected: Vec<Option<apps::Detected>> = pages
        .iter()
        .map(|(_, p)| {
            p.as_ref()
                .ok()
                .and_then(|p| apps::detect(&p.first, &html(p)))
        })
        .collect();
    let mut counts: Vec<(App, usize, String)> = Vec::new();
    for d in detected.iter().flatten() {
        match counts.iter_mut().find(|(a, _, _)| *a == d.app) {
            Some(c) => c.1 += 1,
            None => counts.push((d.app, 1, d.evidence.clone())),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    let app = counts.first().cloned();
    let configured: Vec<String> = settings
        .sites
        .iter()
        .flat_map(|s| s.anonymous.presets.iter().map(|p| p.name().to_string()))
        .collect();
    let preset = app
        .as_ref()
        .and_then(|(a, _, _)| a.preset())
        .filter(|p| !configured.iter().any(|c| c == p));
    // What to propose: the application's preset, else (pages a session or the
    // application's headers keep out of caches) an anonymous TTL.
    let personal = pages.iter().any(|(_, p)| {
        p.as_ref().is_ok_and(|p| {
            let cc = levee_cache::CacheControl::from_headers(&p.first.headers);
            cc.private || cc.no_store || !p.first.set_cookies().is_empty()
        })
    });
    let proposal: Option<(String, Options)> = match preset {
        Some(p) => Some((format!("--preset {p}"), with_preset(&audit.flags, p))),
        None if personal && audit.flags.cache.anonymous_ttl.is_none() && configured.is_empty() => {
            let mut flags = audit.flags.clone();
            flags.cache.anonymous_ttl = Some("60s".into());
            Some(("--anonymous-ttl 60s".into(), flags))
        }
        None => None,
    };
    let preset_settings = proposal.as_ref().and_then(|(_, flags)| {
        let first = &pages.first()?.0;
        crate::settings(audit.config.as_deref(), flags, first).ok()
    });
    // Session cookie names as levee's configuration knows them, and the proposed
    // preset's (DokuWiki's `DokuWiki` is a session, not a tracking cookie).
    let matchers: Vec<&levee_config::CookieMatcher> = [Some(settings), preset_settings.as_ref()]
        .into_iter()
        .flatten()
        .flat_map(|s| s.sites.first())
        .map(|s| &s.anonymous.session_cookies)
        .collect();
    let is_session = |n: &str| matchers.iter().any(|m| m.is_session(n));
    let urls: Vec<UrlReport> = pages
        .iter()
        .zip(&detected)
        .map(|((url, p), d)| match p {
            Err(e) => UrlReport {
                url: url.to_string(),
                status: None,
                storable: false,
                reasons: Vec::new(),
                app: None,
                levee: LeveeVerdict {
                    result: "NONE",
                    reason: "not fetched".into(),
                    ttl_s: None,
                },
                with_preset: None,
                returning_passes_with: None,
                ms: None,
                error: Some(e.0.clone()),
            },
            Ok(p) => UrlReport {
                url: url.to_string(),
                status: Some(p.first.status.as_u16()),
                storable: checks::storable(&p.first),
                reasons: checks::reasons(p, &is_session),
                app: d.as_ref().map(|d| d.app.name().to_string()),
                levee: verdict_of(settings, url, p),
                with_preset: preset_settings.as_ref().map(|s| verdict_of(s, url, p)),
                returning_passes_with: returning(
                    preset_settings.as_ref().unwrap_or(settings),
                    url,
                    p,
                ),
                ms: Some(p.first.elapsed.as_secs_f64() * 1000.0),
                error: None,
            },
        })
        .collect();
    let (cached, share, speedup) = report::project(&urls, |u| Some(&u.levee));
    let with_preset = proposal
        .filter(|_| preset_settings.is_some())
        .map(|(p, _)| {
            let (c, s, x) = report::project(&urls, |u| u.with_preset.as_ref());
            PresetSummary {
                flags: p,
                levee_cached: c,
                share: s,
                projected_speedup: x,
            }
        });
    let always_pass = urls
        .iter()
        .filter(|u| u.error.is_none())
        .filter(|u| {
            let v = u.with_preset.as_ref().unwrap_or(&u.levee);
            v.result == "PASS"
        })
        .map(|u| Passing {
            url: u.url.clone(),
            reason: u.with_preset.as_ref().unwrap_or(&u.levee).reason.clone(),
        })
        .collect();
    let summary = Summary {
        pages: urls.len(),
        audited: urls.iter().filter(|u| u.error.is_none()).count(),
        levee_cached: cached,
        share,
        storable_by_shared_caches: urls.iter().filter(|u| u.storable).count(),
        median_ms: report::median(urls.iter().filter_map(|u| u.ms).collect()),
        projected_speedup: speedup,
        hit_ms: report::HIT_MS,
        with_preset,
        always_pass,
    };
    let fixes = fixes(app.as_ref().map(|a| a.0), preset, &summary, &urls);
    Report {
        app: app.as_ref().map(|a| a.0.name().to_string()),
        app_evidence: app.map(|a| a.2),
        preset: preset.map(str::to_string),
        urls,
        summary,
        fixes,
        system: None,
    }
}

/// The cookie of `p`'s first answer a returning visitor would hold that makes levee pass
/// their requests (`levee_visitor::verdict::returning_visitor_cookie`).
fn returning(settings: &Settings, url: &Url, p: &Probe) -> Option<String> {
    let site = settings.site_for(&url.host)?;
    let names: Vec<String> = p.first.set_cookies().into_iter().map(|(n, _)| n).collect();
    verdict::returning_visitor_cookie(site, &names, p.first.status)
}

/// The cookie names the pages' `set-cookie` and `cookie-differs` reasons name.
fn blocking_cookies(urls: &[UrlReport]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in urls.iter().flat_map(|u| &u.reasons) {
        if r.id != "set-cookie" && r.id != "cookie-differs" {
            continue;
        }
        let Some(list) = r
            .detail
            .split_once("Set-Cookie: ")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(list, _)| list)
        else {
            continue;
        };
        for n in list.split(", ") {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        }
    }
    names
}

/// What to change, most useful first: levee's preset, the application's own settings,
/// then what the reasons call for.
fn fixes(app: Option<App>, preset: Option<&str>, s: &Summary, urls: &[UrlReport]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(w) = &s.with_preset {
        if w.levee_cached > s.levee_cached {
            out.push(format!(
                "run levee serve {}: {} of {} pages from the cache instead of {}",
                w.flags, w.levee_cached, s.audited, s.levee_cached
            ));
        } else {
            // Never a recommendation its own count contradicts: say what blocks instead.
            let cookies = blocking_cookies(urls);
            let what = match cookies.is_empty() {
                true => String::new(),
                false => format!(
                    "; what keeps them out: Set-Cookie: {} (if one is per-visitor decoration, never a login, name it in [anonymous] visitor_cookies)",
                    cookies.join(", ")
                ),
            };
            out.push(format!(
                "{} does not help here: {} of {} pages from the cache with it, {} without{what}",
                w.flags, w.levee_cached, s.audited, s.levee_cached
            ));
        }
    } else if let Some(p) = preset {
        out.push(format!("run levee serve --preset {p}"));
    }
    if let Some(a) = app {
        out.extend(a.advice().iter().map(|x| x.to_string()));
    }
    let has = |id: &str| urls.iter().any(|u| u.reasons.iter().any(|r| r.id == id));
    if app.is_none() && has("session-cookie") {
        out.push("start the session only when one is needed (login, cart, a form), not on every page; meanwhile levee serve --anonymous-ttl 60s stores anonymous pages without their session cookie".into());
    }
    if has("cookie-differs") {
        out.push("a cookie with a new value for each visitor is not a session levee knows: stop setting it on pages (count visits from the access log or in JavaScript), or name it in anonymous.session_cookies if it is one".into());
    }
    if has("vary-cookie") {
        out.push("drop Vary: Cookie from anonymous pages: levee already keeps requests with a session apart from anonymous ones".into());
    }
    if app.is_none() && (has("private") || has("no-store") || has("no-freshness")) {
        out.push("give anonymous pages Cache-Control: public, s-maxage=60 (or let levee decide: --anonymous-ttl 60s, or --micro-cache 3s for pages without freshness)".into());
    }
    if has("no-validator") {
        out.push("send ETag or Last-Modified, so that a stale page is revalidated with a 304 instead of being rendered again".into());
    }
    if has("date") {
        out.push("keep the server's clock right (NTP) and send Date".into());
    }
    if has("no-compression") || has("no-keep-alive") || has("no-304") {
        out.push(
            "compression, keep-alive and 304s: levee does them for its clients, nothing to change"
                .into(),
        );
    }
    out
}
