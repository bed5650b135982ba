//! What `levee serve` does with an anonymous GET, for `levee doctor`: the phases' own
//! functions (classify's pass rule, the site's storage policy as a fill decides it)
//! called on a response levee doctor fetched, so that the doctor's verdict and the
//! server's behaviour cannot drift apart.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method, Request, StatusCode};
use levee_cache::{after_fetch, CacheControl, NotStored, PolicyConfig};
use levee_config::CacheRules;

use crate::pass_reason;
use crate::sessions::Sessions;

/// What happens to anonymous GETs of one URL under a site's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every request passes before the cache (a pass path, a method): `X-Cache: PASS`.
    Pass { reason: String },
    /// The response may not be stored: every request goes to the backend (the key is
    /// marked hit-for-pass), `X-Cache: PASS`.
    NotStored { reason: NotStored },
    /// Stored: later requests are hits for `fresh`.
    Stored {
        fresh: Duration,
        by: FreshnessFrom,
        /// The session `Set-Cookie` it starts is dropped from the stored copy.
        strips_set_cookie: bool,
    },
    /// Stored, but with no freshness: every request is revalidated with the backend
    /// (`X-Cache: REVALIDATED` when it answers 304).
    Revalidated,
}

/// Whose rule made a stored response fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreshnessFrom {
    /// The application's own headers (s-maxage, max-age, Expires, Last-Modified).
    Application,
    /// levee's `micro_cache` for anonymous HTML without explicit freshness.
    MicroCache,
    /// levee's `anonymous_ttl` (presets), over what the application said.
    AnonymousTtl,
}

impl FreshnessFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            FreshnessFrom::Application => "application",
            FreshnessFrom::MicroCache => "micro_cache",
            FreshnessFrom::AnonymousTtl => "anonymous_ttl",
        }
    }
}

/// The cookie that makes a returning visitor's requests pass on `site`: one of `names`
/// (the cookies the site gave them on an earlier page, which answered `status`) that is a
/// session, configured or as levee learns every name its backend sets; `None` when they
/// hold only visitor cookies or none (served as a new visitor). With
/// `remember_anonymous_sessions`, a configured session cookie a `2xx` answer started is
/// remembered as anonymous (anonymous.rs) and makes nothing pass; a name only learned
/// still does: its value may change on the next page (a visit counter), and a changed
/// value is forgotten.
pub fn returning_visitor_cookie(
    site: &levee_config::Site,
    names: &[String],
    status: StatusCode,
) -> Option<String> {
    let m = &site.anonymous.session_cookies;
    let remembered = site.anonymous.remember_anonymous_sessions && status.is_success();
    names
        .iter()
        .filter(|n| !m.is_visitor(n) && !levee_config::NEVER_SESSION_COOKIES.contains(&n.as_str()))
        .find(|n| !(remembered && m.is_session(n)))
        .cloned()
}

/// The verdict for an anonymous GET of `path_and_query` on `site`, whose backend answered
/// `status` and `headers` (as a fill asks: no cookies, no `Accept-Encoding`) at
/// `received`.
pub fn anonymous_get(
    site: &levee_config::Site,
    path_and_query: &str,
    status: StatusCode,
    headers: &HeaderMap,
    received: SystemTime,
) -> Verdict {
    let sessions = Sessions::new(
        site.anonymous.session_cookies.clone(),
        std::sync::Arc::new(crate::proven::Proven::new(1)),
    );
    let request = Request::builder()
        .method(Method::GET)
        .uri(path_and_query)
        .body(())
        .map(|r| r.into_parts().0);
    let Ok(parts) = request else {
        return Verdict::Pass {
            reason: "invalid-request-target".into(),
        };
    };
    if let Some(reason) = pass_reason(&sessions, site, &parts) {
        return Verdict::Pass {
            reason: reason.into_owned(),
        };
    }
    let policy = policy_config(&site.cache);
    let is_session = |n: &str| sessions.is_configured(n);
    let decide = |config: &PolicyConfig| {
        after_fetch::decide(
            &CacheControl::default(),
            status,
            headers,
            received,
            config,
            &is_session,
        )
    };
    let fresh_under = |config: &PolicyConfig| match decide(config) {
        Ok(s) if !s.freshness.no_cache && !s.freshness.lifetime.is_zero() => Some(s),
        _ => None,
    };
    let storable = match decide(&policy) {
        Ok(s) => s,
        Err(reason) => return Verdict::NotStored { reason },
    };
    let Some(fresh) = fresh_under(&policy) else {
        return Verdict::Revalidated;
    };
    // Whose rule it was: the same decision without levee's additions, then with the
    // micro-cache alone.
    let plain = PolicyConfig {
        micro_cache: None,
        anonymous_ttl: None,
        ..policy.clone()
    };
    let micro_only = PolicyConfig {
        anonymous_ttl: None,
        ..policy.clone()
    };
    let by = if fresh_under(&plain).is_some() {
        FreshnessFrom::Application
    } else if fresh_under(&micro_only).is_some() {
        FreshnessFrom::MicroCache
    } else {
        FreshnessFrom::AnonymousTtl
    };
    Verdict::Stored {
        fresh: fresh.freshness.lifetime,
        by,
        strips_set_cookie: storable.strip_set_cookie,
    }
}

/// The storage policy's knobs, from a site's cache rules.
pub fn policy_config(c: &CacheRules) -> PolicyConfig {
    PolicyConfig {
        heuristic: c.heuristic,
        heuristic_fraction: c.heuristic_fraction,
        heuristic_max: c.heuristic_max,
        micro_cache: c.micro_cache,
        anonymous_ttl: c.anonymous_ttl,
        grace: c.grace,
        keep: c.keep,
        max_object_size: c.max_object_size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, SET_COOKIE};
    use levee_config::{Options, Settings};

    fn site(preset: Option<&str>) -> levee_config::Site {
        let mut o = Options {
            backend: levee_config::OneOrMany::from_flags(&["http://127.0.0.1:9".to_string()]),
            ..Options::default()
        };
        if let Some(p) = preset {
            o.preset = levee_config::OneOrMany::from_flags(&[p.to_string()]);
        }
        Settings::from_options(o).unwrap().sites.remove(0)
    }

    fn html(extra: &[(http::HeaderName, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
        for (n, v) in extra {
            h.append(n.clone(), HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn a_session_started_on_a_private_page_is_stored_only_with_a_preset() {
        let h = html(&[
            (CACHE_CONTROL, "private, max-age=0"),
            (SET_COOKIE, "PHPSESSID=abc; path=/"),
        ]);
        let now = SystemTime::now();
        assert_eq!(
            anonymous_get(&site(None), "/", StatusCode::OK, &h, now),
            Verdict::NotStored {
                reason: NotStored::Private
            }
        );
        match anonymous_get(&site(Some("xe")), "/", StatusCode::OK, &h, now) {
            Verdict::Stored {
                by: FreshnessFrom::AnonymousTtl,
                strips_set_cookie: true,
                ..
            } => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pass_paths_and_application_freshness() {
        let h = html(&[(CACHE_CONTROL, "max-age=60")]);
        let now = SystemTime::now();
        assert!(matches!(
            anonymous_get(
                &site(Some("wordpress")),
                "/wp-login.php",
                StatusCode::OK,
                &h,
                now
            ),
            Verdict::Pass { .. }
        ));
        assert!(matches!(
            anonymous_get(&site(None), "/", StatusCode::OK, &h, now),
            Verdict::Stored {
                by: FreshnessFrom::Application,
                ..
            }
        ));
    }
}
