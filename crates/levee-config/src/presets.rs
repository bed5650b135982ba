//! Built-in knowledge of common PHP applications: their session cookies and the paths
//! that must never be cached (login, admin, edit actions).

use crate::ConfigError;

/// Session cookies recognised with no configuration. A request carrying any of these is
/// treated as logged in (or at least personal) and always passes the cache.
pub const DEFAULT_SESSION_COOKIES: &[&str] = &[
    // PHP's default session (XE, gnuboard, Symfony, most hand-written PHP)
    "PHPSESSID",
    // WordPress
    "wordpress_logged_in_*",
    "wordpress_sec_*",
    "wp-postpass_*",
    "comment_author_*",
    "wp-settings-*",
    // MediaWiki (`<wiki>_session`, `<wiki>UserID`, `<wiki>Token`), Laravel (`laravel_session`),
    // Rails (`_app_session`)
    "*_session",
    "*UserID",
    "*UserName",
    "*Token",
    // Drupal
    "SESS*",
    "SSESS*",
    // MoniWiki: `MONI_ID` (its login ticket, kept 30 days), `MONIWIKI` (its session
    // check); wikilib.php's WikiUser::setCookie, wiki.php's _session_start
    "MONI_ID",
    "MONIWIKI*",
    // Symfony, Java, ASP.NET, Django, Express
    "MOCKSESSID",
    "JSESSIONID",
    "ASP.NET_SessionId",
    ".AspNetCore.Session",
    "sessionid",
    "connect.sid",
];

/// Cookies applications set for everyone with the same value, which carry no identity:
/// learning them as session cookies (levee-proxy's sessions.rs) would make every visitor
/// who once got one bypass the cache. WordPress's login form sets `wordpress_test_cookie`
/// (`WP Cookie check`) for anyone who opens it, and `wp_lang` for the form's language.
pub const NEVER_SESSION_COOKIES: &[&str] = &["wordpress_test_cookie", "wp_lang"];

/// Session cookies whose values are no secret (a user's name or id: MediaWiki's
/// `<wiki>UserName` stays after a logout; a comment's author; an admin screen's
/// settings; a post password shared by all its readers). They make a request personal,
/// but anyone can write them, so they never prove that a person logged in
/// (levee-proxy's request/proven.rs).
pub const NEVER_PROOF_COOKIES: &[&str] = &[
    "*UserName",
    "*UserID",
    "comment_author_*",
    "wp-settings-*",
    "wp-postpass_*",
];

/// How an application chooses between its desktop and mobile pages for one URL, when it
/// does so without `Vary` (levee-proxy's request/device.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRule {
    /// XE/Rhymix: the User-Agent, or the visitor's choice in `rx_uatype`.
    Rhymix,
    /// gnuboard: the User-Agent (its G5_MOBILE_AGENT expression).
    Gnuboard,
}

/// A bundle of pass rules and session cookies for one application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Wordpress,
    Mediawiki,
    Dokuwiki,
    Drupal,
    Xe,
    Gnuboard,
    Moniwiki,
}

impl Preset {
    pub const ALL: &'static [(&'static str, Preset)] = &[
        ("wordpress", Preset::Wordpress),
        ("mediawiki", Preset::Mediawiki),
        ("dokuwiki", Preset::Dokuwiki),
        ("drupal", Preset::Drupal),
        ("xe", Preset::Xe),
        // Rhymix is XE's maintained fork: same modules, same URLs.
        ("rhymix", Preset::Xe),
        ("gnuboard", Preset::Gnuboard),
        ("moniwiki", Preset::Moniwiki),
    ];

    pub fn parse(name: &str) -> Result<Preset, ConfigError> {
        let lower = name.to_ascii_lowercase();
        Preset::ALL
            .iter()
            .find(|(n, _)| *n == lower)
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                let names: Vec<&str> = Preset::ALL.iter().map(|(n, _)| *n).collect();
                ConfigError::invalid(
                    "preset",
                    format!(
                        "unknown preset `{name}`; known presets: {}",
                        names.join(", ")
                    ),
                )
            })
    }

    pub fn name(self) -> &'static str {
        Preset::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    /// Globs matched against `path?query`.
    pub fn pass_paths(self) -> &'static [&'static str] {
        match self {
            Preset::Wordpress => &[
                "/wp-admin*",
                "/wp-login.php*",
                "/wp-cron.php*",
                "/xmlrpc.php*",
                "/wp-json/*",
                "*rest_route=*",
                "*wc-ajax=*",
                "*preview=true*",
                "/cart*",
                "/checkout*",
                "/my-account*",
                "*add-to-cart=*",
            ],
            Preset::Mediawiki => &[
                // Every action but viewing (edit, submit, raw, info, watch, purge...).
                "*action=*",
                // Special pages answer per user (Watchlist, Preferences, login...).
                "*Special:*",
                "*Special%3A*",
                "*Special%3a*",
                "*/api.php*",
                "*/rest.php*",
                "*oldid=*",
                "*diff=*",
                // Searches: a page per query, each asked once (crawlers make them up).
                "*search=*",
            ],
            Preset::Dokuwiki => &[
                // Every action: edit, save, login, logout, admin, profile, revisions.
                "*do=*",
                "*rev=*",
                "/lib/exe/ajax.php*",
                "/lib/exe/indexer.php*",
                "/lib/exe/detail.php*",
                "/lib/exe/mediamanager.php*",
            ],
            Preset::Drupal => &[
                "/user*",
                "/admin*",
                "/node/add*",
                "/node/*/edit*",
                "/cron.php*",
                "/update.php*",
                "/install.php*",
                "/batch*",
            ],
            Preset::Xe => &[
                "*module=admin*",
                "*act=disp*Member*",
                "*act=proc*",
                "*act=dispBoardWrite*",
                "*act=dispBoardDelete*",
            ],
            Preset::Gnuboard => &[
                "/adm/*",
                "/bbs/login*",
                "/bbs/logout*",
                "/bbs/register*",
                "/bbs/write*",
                "/bbs/member*",
                "/bbs/password*",
                "/bbs/memo*",
                "/bbs/scrap*",
            ],
            Preset::Moniwiki => &[
                "*action=edit*",
                "*action=savepage*",
                "*action=userform*",
                "*action=login*",
                "*action=logout*",
                "*action=info*",
            ],
        }
    }

    /// How long an anonymous page is reused whatever the application's headers say (the
    /// anonymous TTL), when the operator sets none. Edits by logged-in users reach
    /// readers at once anyway (see levee-proxy's edit invalidation): the TTL bounds what
    /// other changes (a new comment by an anonymous visitor, a scheduled post) wait.
    /// Forums change by the minute; wikis and CMS pages by the hour.
    pub fn anonymous_ttl(self) -> std::time::Duration {
        let secs = match self {
            Preset::Xe | Preset::Gnuboard => 10,
            Preset::Wordpress
            | Preset::Mediawiki
            | Preset::Dokuwiki
            | Preset::Drupal
            | Preset::Moniwiki => 60,
        };
        std::time::Duration::from_secs(secs)
    }

    /// Per-visitor cookies the application sets on anonymous pages, read from its
    /// source: decoration, never a login (see `CookieMatcher::is_visitor`).
    pub fn visitor_cookies(self) -> &'static [&'static str] {
        match self {
            // wiki.php: `setcookie('MONI_TRAIL', $trail, ...)` on every page view, the
            // trail of pages visited (the login is MONI_ID).
            Preset::Moniwiki => &["MONI_TRAIL"],
            // lib/common.lib.php's set_cookie() names each cookie md5(name):
            // md5("ck_visit_ip") is the visit counter (bbs/visit_insert.inc.php),
            // md5("ck_bo_table") the last board seen, set on every board and post page
            // (common.php), md5("ck_facebook_checked") a form preference. The logins are
            // md5("ck_mb_id") and md5("ck_auto") (session_cookies below) and the PHP
            // session.
            Preset::Gnuboard => &[
                "2a0d2363701f23f8a75028924a3af643",
                "e1192aefb64683cc97abb83c71057733",
                "56dd783932a9ee57e82a3b37ae3f7d86",
            ],
            // Rhymix's `rx_uatype` (Mobile.class.php) is the device the visitor chose or
            // was given: levee's device class reads it (DeviceRule::Rhymix), so it need
            // not make anyone pass.
            Preset::Xe => &["rx_uatype"],
            _ => &[],
        }
    }

    /// Whether the application's pages differ by device without saying so.
    pub fn device(self) -> Option<DeviceRule> {
        match self {
            // classes/mobile/Mobile.class.php: the mobile view is on by default.
            Preset::Xe => Some(DeviceRule::Rhymix),
            // common.php: G5_USE_MOBILE is on by default.
            Preset::Gnuboard => Some(DeviceRule::Gnuboard),
            _ => None,
        }
    }

    /// Session cookies in addition to [`DEFAULT_SESSION_COOKIES`].
    pub fn session_cookies(self) -> &'static [&'static str] {
        match self {
            Preset::Wordpress => &["woocommerce_*", "wp_woocommerce_session_*"],
            Preset::Drupal => &["Drupal.visitor.*"],
            Preset::Xe => &["xe_logged", "xeak", "rx_*", "RHYMIX*"],
            // `DokuWiki` is its PHP session; `DW<hash>` the "remember me" login.
            Preset::Dokuwiki => &["DokuWiki", "DW*"],
            // Names as gnuboard sends them: md5("ck_mb_id"), md5("ck_auto") (the
            // remembered login), md5("mb_client_key") (set at login, bbs/login_check.php);
            // `ck_*` for versions that did not hash names.
            Preset::Gnuboard => &[
                "6e1280981e1dfd9169c5dea9c28ff2e3",
                "a3e94372a6379bc1ae3698dfdf38595b",
                "2e61f26e7a4e8194d3d5d054536403e0",
                "ck_*",
            ],
            Preset::Mediawiki | Preset::Moniwiki => &[],
        }
    }
}
