//! A site while serving: what its settings built (the backend's pool and limiter, the
//! document root's file cache, the session cookies learnt from its backend) and its
//! settings and storage policy, swapped by a reload. Each request resolves its site
//! once ([`Shared::site_for`](super::shared::Shared::site_for)); the phases read it.
//!
//! The conversions from levee-config's settings to the library crates' own configs
//! are here (the app pool's: `upstream::app::app_config`), in one place each, with a
//! test that their defaults agree.

use std::sync::Arc;

use arc_swap::ArcSwap;
use levee_cache::PolicyConfig;
use levee_config::{RouteTarget, Settings, StaticSettings};
use levee_static::{StaticConfig, StaticFiles};

use crate::error::ServeError;
use crate::upstream::Upstream;
use levee_visitor::proven::Proven;
use levee_visitor::sessions::Sessions;
use levee_visitor::verdict::policy_config;

/// One site while serving.
pub(crate) struct Site {
    /// Its place in `Shared::sites` (`Outcome::site`).
    pub index: usize,
    /// For the log and the metrics.
    pub name: Arc<str>,
    /// The hosts it names; a change needs a restart.
    hosts: Vec<String>,
    pub upstream: Upstream,
    /// Files of the document root, when there is one.
    pub files: Option<StaticFiles>,
    /// Which cookies mean a session: configured and learnt from this site's backend.
    pub sessions: Sessions,
    /// `[[site.route]]`: path prefixes with a backend or files of their own, longest
    /// first.
    pub routes: Vec<Route>,
    /// Responses by cache result, counted only when there are several sites (the
    /// process's totals cover one).
    pub requests: [std::sync::atomic::AtomicU64; crate::outcome::CacheResult::COUNTED.len()],
    conf: ArcSwap<SiteConf>,
}

/// A route while serving.
pub(crate) struct Route {
    pub path: String,
    pub to: RouteTo,
    /// Deny, networks, basic auth, redirect, rewrite, headers (rules.rs).
    pub rules: levee_config::RouteRules,
    pub auth: Option<super::auth::Auth>,
}

// A handful per site, built once: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum RouteTo {
    /// Another backend (its own pool and limiter), under the site's cache rules.
    Upstream(Upstream),
    /// Files only: the backend is never asked.
    Files(StaticFiles),
    /// As the site serves (its files, its backend): a route of rules only.
    Site,
}

/// What a reload replaces of a site.
pub(crate) struct SiteConf {
    pub settings: levee_config::Site,
    pub policy: PolicyConfig,
}

impl Site {
    pub fn new(
        index: usize,
        global: &Settings,
        site: levee_config::Site,
        proven: Arc<Proven>,
    ) -> Result<Site, ServeError> {
        let files = match &site.root {
            Some(root) => Some(
                StaticFiles::new(static_config(root, &site.static_files))
                    .map_err(ServeError::Root)?,
            ),
            None => None,
        };
        let routes = site
            .routes
            .iter()
            .map(|r| {
                let to = match &r.target {
                    RouteTarget::Backend { backend, health } => RouteTo::Upstream(
                        Upstream::new(global, &site, backend, health.as_deref())
                            .map_err(ServeError::Backend)?,
                    ),
                    RouteTarget::Static { root } => RouteTo::Files(
                        StaticFiles::new(static_config(root, &site.static_files))
                            .map_err(ServeError::Root)?,
                    ),
                    RouteTarget::Site => RouteTo::Site,
                };
                Ok(Route {
                    path: r.path.clone(),
                    to,
                    rules: r.rules.clone(),
                    auth: r.rules.auth.clone().map(super::auth::Auth::new),
                })
            })
            .collect::<Result<Vec<_>, ServeError>>()?;
        let sessions = Sessions::new(site.anonymous.session_cookies.clone(), proven);
        sessions.remember_anonymous(site.anonymous.remember_anonymous_sessions);
        Ok(Site {
            index,
            name: site.name.as_str().into(),
            hosts: site.hosts.clone(),
            upstream: Upstream::new(global, &site, &site.backend, site.health.as_deref())
                .map_err(ServeError::Backend)?,
            routes,
            requests: Default::default(),
            files,
            sessions,
            conf: ArcSwap::from_pointee(SiteConf {
                policy: policy_config(&site.cache),
                settings: site,
            }),
        })
    }

    /// The hosts it names.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Every backend of the site: its own, then its routes'.
    pub fn upstreams(&self) -> impl Iterator<Item = &Upstream> {
        self.backends().map(|(_, u)| u)
    }

    /// Every backend with the path it serves: "/" for the site's own, then its routes'.
    pub fn backends(&self) -> impl Iterator<Item = (&str, &Upstream)> {
        std::iter::once(("/", &self.upstream)).chain(self.routes.iter().filter_map(
            |r| match &r.to {
                RouteTo::Upstream(u) => Some((r.path.as_str(), u)),
                RouteTo::Files(_) | RouteTo::Site => None,
            },
        ))
    }

    /// The site's settings in force now.
    pub fn conf(&self) -> arc_swap::Guard<Arc<SiteConf>> {
        self.conf.load()
    }

    /// Applies a reloaded site's settings; what its running structures were built from
    /// (backend, root, files, FastCGI) keeps its value and is named in `restart`.
    pub fn reload(&self, mut new: levee_config::Site, restart: &mut Vec<&'static str>) {
        let old = self.conf();
        // Compared by their Debug form: not every settings type is PartialEq.
        macro_rules! keep {
            ($name:literal, $field:ident) => {
                if format!("{:?}", new.$field) != format!("{:?}", old.settings.$field) {
                    restart.push($name);
                    new.$field = old.settings.$field.clone();
                }
            };
        }
        keep!("hosts", hosts);
        keep!("backend", backend);
        keep!("root", root);
        keep!("static", static_files);
        keep!("fastcgi", fastcgi);
        keep!("default", default);
        keep!("health", health);
        keep!("tls", tls);
        keep!("routes", routes);
        self.sessions
            .set_configured(new.anonymous.session_cookies.clone());
        self.sessions
            .remember_anonymous(new.anonymous.remember_anonymous_sessions);
        // The application's code may have changed too: a rolling restart of its
        // processes, each replacement ready before the old one stops.
        if let Some(pool) = self.upstream.app_pool() {
            pool.restart_all();
        }
        self.conf.store(Arc::new(SiteConf {
            policy: policy_config(&new.cache),
            settings: new,
        }));
    }
}

/// The document root's file server, from a site's `[static]` settings.
pub(crate) fn static_config(root: &std::path::Path, s: &StaticSettings) -> StaticConfig {
    StaticConfig {
        index: s.index.clone(),
        asset_extensions: s.asset_extensions.clone(),
        asset_max_age: s.asset_max_age,
        memory_cache: s.memory,
        memory_max_file: s.memory_max_file,
        link_dirs: s.link_dirs.clone(),
        // Not an option: how often a file in memory is checked against the disk.
        ..StaticConfig::new(root)
    }
}

#[cfg(test)]
mod tests;
