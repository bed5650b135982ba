//! Every setting by its option name and value, from the validated [`Settings`]: what
//! `levee serve --check` prints. A unit test checks that every option of the defaults
//! table is here, so a new option cannot be left out of `--check`.

use std::time::Duration;

use crate::{AccessLogFormat, Backend, Settings, Site};

/// One line of `--check`: an option (its name in the config file) and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// `None` for what the whole process shares, else the site's name.
    pub site: Option<String>,
    pub option: &'static str,
    pub value: String,
}

fn secs(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// As the config file writes sizes: `256MiB`, `64KiB`, else bytes.
fn size(n: u64) -> String {
    match n {
        0 => "0".into(),
        n if n % (1 << 30) == 0 => format!("{}GiB", n >> 30),
        n if n % (1 << 20) == 0 => format!("{}MiB", n >> 20),
        n if n % (1 << 10) == 0 => format!("{}KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

fn words(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(" ")
    }
}

fn off(d: Option<Duration>) -> String {
    d.map_or("off".into(), secs)
}

fn list<T: ToString>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Settings {
    /// Every setting, the process's first, then each site's.
    pub fn describe(&self) -> Vec<Described> {
        let mut out = Vec::new();
        let mut global = |option: &'static str, value: String| {
            out.push(Described {
                site: None,
                option,
                value,
            })
        };
        global("listen", list(&self.listen));
        global("listen_tls", list(&self.listen_tls));
        global(
            "tls.cert",
            list(
                &self
                    .tls
                    .certs
                    .iter()
                    .map(|(c, _)| c.display())
                    .collect::<Vec<_>>(),
            ),
        );
        global(
            "tls.key",
            list(
                &self
                    .tls
                    .certs
                    .iter()
                    .map(|(_, k)| k.display())
                    .collect::<Vec<_>>(),
            ),
        );
        global("tls.redirect_http", self.tls.redirect_http.to_string());
        global(
            "tls.http3",
            match (self.tls.http3, self.listen_tls.is_empty()) {
                (true, false) => format!("on: UDP {}", list(&self.listen_tls)),
                (true, true) => "on, unused (no listen_tls)".into(),
                (false, _) => "off".into(),
            },
        );
        global(
            "tls.hsts",
            self.tls.hsts.as_ref().map_or_else(
                || "off".into(),
                |v| String::from_utf8_lossy(v.as_bytes()).into_owned(),
            ),
        );
        let acme = self.tls.acme.as_ref();
        let unused = || "unused (no acme_email)".to_string();
        global(
            "tls.acme_email",
            acme.map_or("off".into(), |a| a.email.clone()),
        );
        global(
            "tls.acme_directory",
            acme.map_or_else(unused, |a| a.directory.clone()),
        );
        global(
            "tls.acme_dir",
            acme.map_or_else(unused, |a| a.dir.display().to_string()),
        );
        global(
            "tls.acme_ca",
            acme.map_or_else(unused, |a| {
                a.ca.as_ref()
                    .map_or("the system's roots".into(), |c| c.display().to_string())
            }),
        );
        global(
            "tls.acme_challenge",
            acme.map_or_else(unused, |a| a.challenge.as_str().into()),
        );
        global("workers", self.workers.to_string());
        global("debug_headers", self.debug_headers.to_string());
        global("cache.size", size(self.cache.size));
        global("cache.hit_for_pass", secs(self.cache.hit_for_pass));
        global(
            "cache.disk_path",
            self.cache
                .disk
                .as_ref()
                .map_or("off".into(), |d| d.path.display().to_string()),
        );
        global(
            "cache.disk_size",
            self.cache
                .disk
                .as_ref()
                .map_or("off".into(), |d| match d.size {
                    crate::DiskSize::Bytes(n) => size(n),
                    crate::DiskSize::Auto => "auto".into(),
                }),
        );
        global(
            "cache.redis",
            if self.cache.redis.is_empty() {
                "off".into()
            } else {
                // A password in a URL is not for `--check`'s output.
                self.cache
                    .redis
                    .iter()
                    .map(|u| match (u.split_once("://"), u.rsplit_once('@')) {
                        (Some((scheme, _)), Some((_, host))) => format!("{scheme}://***@{host}"),
                        _ => u.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        );
        global(
            "cache.strip_cdn_cache_control",
            self.cache.strip_cdn_cache_control.to_string(),
        );
        let l = &self.limits;
        global("limits.max_connections", l.max_connections.to_string());
        global("limits.max_header_bytes", size(l.max_header_bytes as u64));
        global("limits.max_headers", l.max_headers.to_string());
        global("limits.header_timeout", secs(l.header_timeout));
        global(
            "limits.backend_connect_timeout",
            secs(l.backend_connect_timeout),
        );
        global(
            "limits.backend_first_byte_timeout",
            secs(l.backend_first_byte_timeout),
        );
        global("limits.backend_read_timeout", secs(l.backend_read_timeout));
        global(
            "limits.backend_max_concurrency",
            l.backend_max_concurrency.to_string(),
        );
        global(
            "limits.backend_session_share",
            format!("{:.0}%", l.backend_session_share * 100.0),
        );
        global("limits.backend_queue", l.backend_queue.to_string());
        global(
            "limits.backend_queue_timeout",
            secs(l.backend_queue_timeout),
        );
        global(
            "limits.backend_anonymous_share",
            format!("{:.0}%", l.backend_anonymous_share * 100.0),
        );
        global(
            "limits.backend_network_share",
            format!("{:.0}%", l.backend_network_share * 100.0),
        );
        global(
            "limits.backend_anonymous_wait",
            secs(l.backend_anonymous_wait),
        );
        global(
            "limits.backend_anonymous_adaptive",
            l.backend_anonymous_adaptive.to_string(),
        );
        global(
            "limits.trust_unproven_sessions",
            secs(l.trust_unproven_sessions),
        );
        global("limits.websocket_max", l.websocket_max.to_string());
        global(
            "limits.websocket_per_network",
            l.websocket_per_network.to_string(),
        );
        global(
            "limits.websocket_idle_timeout",
            secs(l.websocket_idle_timeout),
        );
        global(
            "limits.client_network_v4",
            format!("/{}", l.client_network_v4),
        );
        global(
            "limits.client_network_v6",
            format!("/{}", l.client_network_v6),
        );
        global(
            "limits.trusted_proxies",
            if l.trusted_proxies.is_empty() {
                "none (the TCP peer is the client)".to_string()
            } else {
                l.trusted_proxies
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        );
        global("limits.shutdown_timeout", secs(l.shutdown_timeout));
        let c = &self.compression;
        global("compression.enabled", c.enabled.to_string());
        global("compression.min_size", size(c.min_size));
        global("compression.store", c.store.clone());
        global("compression.transcode_memory", size(c.transcode_memory));
        global(
            "admin.listen",
            self.admin
                .listen
                .map_or("off".into(), |a| format!("http://{a}")),
        );
        global(
            "admin.token",
            if self.admin.token.is_some() {
                "set (required on every admin request)".into()
            } else {
                "none".into()
            },
        );
        global("purge.allow", list(&self.purge.allow));
        let (format, file) = match &self.access_log {
            None => ("off", "-".to_string()),
            Some(log) => (
                match log.format {
                    AccessLogFormat::Combined => "combined",
                    AccessLogFormat::Json => "json",
                },
                log.file
                    .as_ref()
                    .map_or("standard output".into(), |f| f.display().to_string()),
            ),
        };
        global("log.access", format.into());
        global("log.access_file", file);
        for site in &self.sites {
            describe_site(site, &mut out);
        }
        out
    }
}

fn describe_site(s: &Site, out: &mut Vec<Described>) {
    let mut add = |option: &'static str, value: String| {
        out.push(Described {
            site: Some(s.name.clone()),
            option,
            value,
        })
    };
    add(
        "hosts",
        if s.hosts.is_empty() {
            "every host".into()
        } else {
            list(&s.hosts)
        },
    );
    if s.default && !s.hosts.is_empty() {
        add("default", "true: also every host no site names".into());
    }
    add("backend", s.backend.to_string());
    add("health", s.health.clone().unwrap_or_else(|| "off".into()));
    if let Some((cert, key)) = &s.tls {
        add("tls.cert", cert.display().to_string());
        add("tls.key", key.display().to_string());
    }
    for r in &s.routes {
        add(
            "route",
            match &r.target {
                crate::RouteTarget::Backend { backend, health } => format!(
                    "{} -> {backend}{}",
                    r.path,
                    health
                        .as_ref()
                        .map_or(String::new(), |h| format!(" (health {h})"))
                ),
                crate::RouteTarget::Static { root } => {
                    format!("{} -> files of {} only", r.path, root.display())
                }
                crate::RouteTarget::Site => format!("{} -> the site's", r.path),
            } + &rules_text(&r.rules),
        );
    }
    if let Backend::App(a) = &s.backend {
        add("app.command", a.command.clone());
        add("app.processes", a.processes.to_string());
        add("app.concurrency", a.concurrency.to_string());
        add("app.ready_timeout", secs(a.ready_timeout));
        add("app.request_timeout", secs(a.request_timeout));
        add("app.max_requests", a.max_requests.to_string());
        add(
            "app.max_memory",
            if a.max_memory == 0 {
                "off".into()
            } else {
                size(a.max_memory)
            },
        );
        add("app.max_age", off(a.max_age));
        add(
            "app.watch",
            list(&a.watch.iter().map(|p| p.display()).collect::<Vec<_>>()),
        );
        add(
            "app.cwd",
            a.cwd
                .as_ref()
                .map_or("levee's own".into(), |d| d.display().to_string()),
        );
        add(
            "app.env",
            list(&a.env.iter().map(|(k, _)| k).collect::<Vec<_>>()),
        );
    }
    add(
        "root",
        s.root
            .as_ref()
            .map_or("none (every request goes to the backend)".into(), |r| {
                r.display().to_string()
            }),
    );
    add(
        "preset",
        list(
            &s.anonymous
                .presets
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>(),
        ),
    );
    let st = &s.static_files;
    add("static.index", list(&st.index));
    add("static.asset_extensions", words(&st.asset_extensions));
    add("static.asset_max_age", secs(st.asset_max_age));
    add("static.memory", size(st.memory));
    add("static.memory_max_file", size(st.memory_max_file));
    add(
        "static.link_dirs",
        list(
            &st.link_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>(),
        ),
    );
    let h = &s.hardening;
    add("preset hardening: denied", words(h.deny_patterns()));
    add("preset hardening: no PHP under", words(&h.no_php));
    add(
        "preset hardening: installers denied once installed",
        words(
            &h.installers
                .iter()
                .map(|(p, _)| p.clone())
                .collect::<Vec<_>>(),
        ),
    );
    let f = &s.fastcgi;
    add("fastcgi.index", f.index.clone());
    add("fastcgi.keep_alive", f.keep_alive.to_string());
    add("fastcgi.max_unsized_body", size(f.max_unsized_body));
    add(
        "fastcgi.params",
        list(
            &f.params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
        ),
    );
    add(
        "fastcgi.pool_config",
        f.pool_config
            .as_ref()
            .map_or("found on its own".into(), |p| p.display().to_string()),
    );
    let c = &s.cache;
    add("cache.max_object_size", size(c.max_object_size));
    add("cache.heuristic", c.heuristic.to_string());
    add("cache.heuristic_fraction", c.heuristic_fraction.to_string());
    add("cache.heuristic_max", secs(c.heuristic_max));
    add("cache.micro_cache", off(c.micro_cache));
    add("cache.anonymous_ttl", off(c.anonymous_ttl));
    add("cache.grace", secs(c.grace));
    add("cache.keep", secs(c.keep));
    let a = &s.anonymous;
    // `extra_session_cookies` and the presets' are merged into these.
    add(
        "anonymous.session_cookies",
        words(a.session_cookies.patterns()),
    );
    add(
        "anonymous.visitor_cookies",
        words(a.session_cookies.visitor_patterns()),
    );
    add(
        "anonymous.remember_anonymous_sessions",
        a.remember_anonymous_sessions.to_string(),
    );
    add("anonymous.pass_paths", words(a.pass_paths.patterns()));
    add(
        "anonymous.edit_invalidation",
        match a.edit_invalidation {
            crate::EditInvalidation::Host => "host".into(),
            crate::EditInvalidation::Url => "url".into(),
        },
    );
}

/// A route's rules, for `--check`: ", deny", ", allow 10.0.0.0/8", ...
fn rules_text(r: &crate::RouteRules) -> String {
    let mut out = String::new();
    if r.deny {
        out.push_str(", deny (403)");
    }
    let nets = |n: &[ipnet::IpNet]| {
        n.iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    if !r.allow_networks.is_empty() {
        out.push_str(&format!(", only from {}", nets(&r.allow_networks)));
    }
    if !r.deny_networks.is_empty() {
        out.push_str(&format!(", refused from {}", nets(&r.deny_networks)));
    }
    if let Some(a) = &r.auth {
        out.push_str(&format!(
            ", basic auth \"{}\" ({} users of {})",
            a.realm,
            a.users.len(),
            a.file.display()
        ));
    }
    if let Some(rd) = &r.redirect {
        out.push_str(&format!(
            ", {} to {} (+ the rest and the query)",
            rd.status, rd.to
        ));
    }
    if let Some(rw) = &r.rewrite {
        out.push_str(&format!(", rewritten to {rw}"));
    }
    for (k, v) in &r.headers {
        out.push_str(&format!(", header {k}: {v}"));
    }
    out
}
