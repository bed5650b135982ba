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
    // MoniWiki
    "MONIWIKI-*",
    // Symfony, Java, ASP.NET, Django, Express
    "MOCKSESSID",
    "JSESSIONID",
    "ASP.NET_SessionId",
    ".AspNetCore.Session",
    "sessionid",
    "connect.sid",
];

/// A bundle of pass rules and session cookies for one application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Wordpress,
    Mediawiki,
    Drupal,
    Xe,
    Gnuboard,
    Moniwiki,
}

impl Preset {
    pub const ALL: &'static [(&'static str, Preset)] = &[
        ("wordpress", Preset::Wordpress),
        ("mediawiki", Preset::Mediawiki),
        ("drupal", Preset::Drupal),
        ("xe", Preset::Xe),
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
                "*preview=true*",
                "/cart*",
                "/checkout*",
                "/my-account*",
                "*add-to-cart=*",
            ],
            Preset::Mediawiki => &[
                "*action=edit*",
                "*action=submit*",
                "*action=raw*",
                "*Special:UserLogin*",
                "*Special:UserLogout*",
                "*Special:Preferences*",
                "*Special:CreateAccount*",
                "/api.php*",
                "*/rest.php*",
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

    /// Session cookies in addition to [`DEFAULT_SESSION_COOKIES`].
    pub fn session_cookies(self) -> &'static [&'static str] {
        match self {
            Preset::Wordpress => &["woocommerce_*", "wp_woocommerce_session_*"],
            Preset::Drupal => &["Drupal.visitor.*"],
            Preset::Xe => &["xe_logged", "xeak"],
            Preset::Gnuboard => &["ck_*"],
            Preset::Mediawiki | Preset::Moniwiki => &[],
        }
    }
}
