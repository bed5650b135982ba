//! What people write in nginx's `location` blocks, for a `[[site.route]]`: deny a path,
//! allow or deny client networks, HTTP basic authentication from an htpasswd file,
//! redirects, a rewrite to a front controller, response headers. Parsed and checked
//! here, at start and by `--check`; carried out by levee-proxy's request/rules.rs.

use std::path::{Path, PathBuf};

use crate::convert::networks;
use crate::options::RouteOptions;
use crate::ConfigError;

/// A route's rules; all empty for a plain route.
#[derive(Debug, Clone, Default)]
pub struct RouteRules {
    /// Every path under the route answers 403.
    pub deny: bool,
    /// Only clients in these networks (empty: everyone), nginx's `allow`.
    pub allow_networks: Vec<ipnet::IpNet>,
    /// Clients in these networks get 403, nginx's `deny`.
    pub deny_networks: Vec<ipnet::IpNet>,
    pub auth: Option<BasicAuth>,
    pub redirect: Option<Redirect>,
    /// The target the request is rewritten to: `{rest}` stands for the path after the
    /// route's prefix; the client's query is appended.
    pub rewrite: Option<String>,
    /// Response headers set on every response under the route.
    pub headers: Vec<(String, String)>,
}

impl RouteRules {
    pub fn is_empty(&self) -> bool {
        !self.deny
            && self.allow_networks.is_empty()
            && self.deny_networks.is_empty()
            && self.auth.is_none()
            && self.redirect.is_none()
            && self.rewrite.is_none()
            && self.headers.is_empty()
    }
}

/// `auth_basic` and its user file.
#[derive(Clone)]
pub struct BasicAuth {
    pub realm: String,
    pub file: PathBuf,
    /// `(user, bcrypt hash)` as the file lists them.
    pub users: Vec<(String, String)>,
}

impl std::fmt::Debug for BasicAuth {
    // The hashes stay out of `--check` and logs; a change of the file still shows
    // (reload compares routes by their Debug form).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digest: u64 = self
            .users
            .iter()
            .flat_map(|(u, h)| u.bytes().chain(h.bytes()))
            .fold(0xcbf29ce484222325, |a, b| {
                (a ^ u64::from(b)).wrapping_mul(0x100000001b3)
            });
        write!(
            f,
            "BasicAuth {{ realm: {:?}, file: {:?}, users: {}, version: {digest:x} }}",
            self.realm,
            self.file,
            self.users.len()
        )
    }
}

/// `redirect` and `redirect_status`.
#[derive(Debug, Clone)]
pub struct Redirect {
    /// An absolute http(s) URL or an absolute path; the rest of the request's path after
    /// the route's prefix and its query are appended.
    pub to: String,
    pub status: u16,
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
];

impl RouteRules {
    pub(crate) fn from_options(r: &RouteOptions, path: &str) -> Result<RouteRules, ConfigError> {
        let at = |what: &str| format!("the route {path}: {what}");
        let rules = RouteRules {
            deny: r.deny.unwrap_or(false),
            allow_networks: networks("site.route.allow_networks", r.allow_networks.clone().unwrap_or_default())?,
            deny_networks: networks("site.route.deny_networks", r.deny_networks.clone().unwrap_or_default())?,
            auth: match (&r.auth_basic, &r.auth_basic_user_file) {
                (None, None) => None,
                (Some(realm), Some(file)) => {
                    if realm.is_empty() || realm.contains(['"', '\\']) || realm.chars().any(char::is_control) {
                        return Err(ConfigError::invalid(
                            "site.route.auth_basic",
                            at("the realm is shown to users in the password prompt: a name like \"Admin area\", without quotes or backslashes"),
                        ));
                    }
                    Some(BasicAuth {
                        realm: realm.clone(),
                        file: file.clone(),
                        users: htpasswd(file)?,
                    })
                }
                (Some(_), None) => {
                    return Err(ConfigError::invalid(
                        "site.route.auth_basic_user_file",
                        at("auth_basic needs the users: auth_basic_user_file = \"/etc/levee/htpasswd\" (made with `htpasswd -B -c FILE USER`)"),
                    ))
                }
                (None, Some(_)) => {
                    return Err(ConfigError::invalid(
                        "site.route.auth_basic",
                        at("the user file needs auth_basic = \"Realm name\" to turn the password on"),
                    ))
                }
            },
            redirect: match &r.redirect {
                None => {
                    if r.redirect_status.is_some() {
                        return Err(ConfigError::invalid(
                            "site.route.redirect_status",
                            at("a status without redirect = \"https://...\""),
                        ));
                    }
                    None
                }
                Some(to) => {
                    let absolute = to.starts_with("https://") || to.starts_with("http://");
                    let path_only = to.starts_with('/') && !to.starts_with("//");
                    if !(absolute || path_only)
                        || to.chars().any(|c| c.is_control() || c == ' ')
                        || http::Uri::try_from(to.as_str()).is_err()
                    {
                        return Err(ConfigError::invalid(
                            "site.route.redirect",
                            at(&format!("`{to}` is not where to send clients: give an absolute URL like \"https://example.com/new/\" or a path like \"/new/\"")),
                        ));
                    }
                    let status = r.redirect_status.unwrap_or(301);
                    if ![301, 302, 303, 307, 308].contains(&status) {
                        return Err(ConfigError::invalid(
                            "site.route.redirect_status",
                            at(&format!("{status} is not a redirect: use 301 or 308 (permanent), 302, 303 or 307 (temporary)")),
                        ));
                    }
                    Some(Redirect { to: to.clone(), status })
                }
            },
            rewrite: match &r.rewrite {
                None => None,
                Some(to) => {
                    let target = to.replace("{rest}", "x");
                    let ok = to.starts_with('/')
                        && !to.starts_with("//")
                        && !to.split(['/', '?']).any(|s| s == "..")
                        && http::uri::PathAndQuery::try_from(target.as_str()).is_ok();
                    if !ok {
                        return Err(ConfigError::invalid(
                            "site.route.rewrite",
                            at(&format!("`{to}` is not a target in this site: give a path like \"/index.php?title={{rest}}\" ({{rest}}: the path after the route's prefix)")),
                        ));
                    }
                    Some(to.clone())
                }
            },
            headers: r
                .headers
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|(name, value)| {
                    let lower = name.to_ascii_lowercase();
                    if http::HeaderName::try_from(lower.as_str()).is_err()
                        || http::HeaderValue::try_from(value.as_str()).is_err()
                        || HOP_BY_HOP.contains(&lower.as_str())
                    {
                        return Err(ConfigError::invalid(
                            "site.route.headers",
                            at(&format!("`{name} = {value:?}` cannot be sent: give a header name and a value of visible characters, like \"X-Frame-Options\" = \"SAMEORIGIN\" (not a hop-by-hop header such as Connection or Content-Length)")),
                        ));
                    }
                    Ok((lower, value))
                })
                .collect::<Result<_, _>>()?,
        };
        let answers = usize::from(rules.deny)
            + usize::from(rules.redirect.is_some())
            + usize::from(rules.rewrite.is_some());
        if answers > 1 {
            return Err(ConfigError::invalid(
                "site.route",
                at("deny, redirect and rewrite each decide where the request goes: keep one"),
            ));
        }
        if rules.deny && rules.auth.is_some() {
            return Err(ConfigError::invalid(
                "site.route",
                at("deny refuses everyone, so auth_basic would never be asked: keep one"),
            ));
        }
        Ok(rules)
    }
}

/// The users of an htpasswd file as Apache's `htpasswd -B` and nginx users write it:
/// `user:hash` lines, `#` comments. bcrypt only; any other format is refused with how to
/// make a bcrypt one.
fn htpasswd(file: &Path) -> Result<Vec<(String, String)>, ConfigError> {
    let option = "site.route.auth_basic_user_file";
    let text = std::fs::read_to_string(file).map_err(|e| {
        ConfigError::invalid(
            option,
            format!(
                "cannot read {} ({e}); create it with `htpasswd -B -c {} USER`",
                file.display(),
                file.display()
            ),
        )
    })?;
    let mut users = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((user, hash)) = line.split_once(':') else {
            return Err(ConfigError::invalid(
                option,
                format!("{} line {}: not `user:hash`", file.display(), n + 1),
            ));
        };
        let bcrypt =
            ["$2y$", "$2a$", "$2b$"].iter().any(|p| hash.starts_with(p)) && hash.len() == 60;
        if user.is_empty() || !bcrypt {
            return Err(ConfigError::invalid(
                option,
                format!(
                    "{} line {}: the password of `{user}` is not a bcrypt hash (MD5 `$apr1$`, SHA1 `{{SHA}}`, crypt and plain text are weak or unsupported); re-create it with `htpasswd -B {} {user}`",
                    file.display(),
                    n + 1,
                    file.display()
                ),
            ));
        }
        users.push((user.to_string(), hash.to_string()));
    }
    if users.is_empty() {
        return Err(ConfigError::invalid(
            option,
            format!(
                "{} has no users; add one with `htpasswd -B {} USER`",
                file.display(),
                file.display()
            ),
        ));
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(toml_route: &str) -> Result<RouteRules, ConfigError> {
        let r: RouteOptions = toml::from_str(toml_route).unwrap();
        RouteRules::from_options(&r, "/admin/")
    }

    #[test]
    fn each_rule_parses_and_mistakes_say_what_to_write() {
        let r = rules("path = \"/admin/\"\nallow_networks = [\"10.0.0.0/8\", \"127.0.0.2\"]\nheaders = { \"X-Frame-Options\" = \"DENY\" }").unwrap();
        assert_eq!(r.allow_networks.len(), 2);
        assert_eq!(
            r.headers,
            [("x-frame-options".to_string(), "DENY".to_string())]
        );
        let r = rules(
            "path = \"/old/\"\nredirect = \"https://example.com/new/\"\nredirect_status = 308",
        )
        .unwrap();
        assert_eq!(r.redirect.unwrap().status, 308);
        for (bad, says) in [
            (
                "allow_networks = [\"10.0.0.0/33\"]",
                "not an address or network",
            ),
            ("redirect = \"example.com\"", "absolute URL"),
            (
                "redirect = \"/x/\"\nredirect_status = 200",
                "is not a redirect",
            ),
            ("rewrite = \"index.php\"", "not a target"),
            ("rewrite = \"/../etc\"", "not a target"),
            ("deny = true\nredirect = \"/x/\"", "keep one"),
            ("headers = { \"Content-Length\" = \"1\" }", "hop-by-hop"),
            ("auth_basic = \"Admin\"", "auth_basic_user_file"),
        ] {
            let e = rules(&format!("path = \"/admin/\"\n{bad}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn htpasswd_takes_bcrypt_and_refuses_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("htpasswd");
        let hash = "$2y$05$abcdefghijklmnopqrstuuQ6MhA7mDhxXO0I6I6jXjJ0F6Sc1sQ/2";
        std::fs::write(&f, format!("# admins\nada:{hash}\n")).unwrap();
        assert_eq!(
            htpasswd(&f).unwrap(),
            [("ada".to_string(), hash.to_string())]
        );
        std::fs::write(&f, "bob:$apr1$xyz$abcdefghijklmnopqrstuv\n").unwrap();
        let e = htpasswd(&f).unwrap_err().to_string();
        assert!(e.contains("htpasswd -B"), "{e}");
        std::fs::write(&f, "# nobody\n").unwrap();
        assert!(htpasswd(&f).unwrap_err().to_string().contains("no users"));
    }
}
