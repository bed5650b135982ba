//! Which route of its site a request takes: chosen once, on the path as the backend
//! reads it ([`normalized`]), in [`resolve`], and carried with the request as a
//! [`Routed`]; the rules, the files, the backend and the lanes all read that one
//! result. The backend still gets the path the client sent (nginx's `$request_uri`).

use http::request;

use super::site::{Route, RouteTo, Site};
use crate::upstream::Upstream;

/// A site with the route one request resolved to ([`resolve`]), carried
/// through the phases with the request: everything a [`Site`] says (it derefs to it),
/// and which of its routes, files and backends this request uses.
#[derive(Clone, Copy)]
pub(crate) struct Routed<'a> {
    site: &'a Site,
    /// Its index in `site.routes`: a spawned fill carries it with the site's index.
    route: Option<usize>,
}

impl<'a> Routed<'a> {
    /// The same resolution again, in a task that kept the indexes ([`Routed::indexes`]).
    pub fn again(site: &'a Site, route: Option<usize>) -> Routed<'a> {
        Routed {
            site,
            route: route.filter(|i| *i < site.routes.len()),
        }
    }

    /// The site's index and the route's, for a task that outlives the request.
    pub fn indexes(&self) -> (usize, Option<usize>) {
        (self.site.index, self.route)
    }

    /// The request's route, if one matched.
    pub fn route(&self) -> Option<&'a Route> {
        self.site.routes.get(self.route?)
    }

    /// The backend that serves the request: its route's, else the site's.
    pub fn upstream(&self) -> &'a Upstream {
        match self.route() {
            Some(Route {
                to: RouteTo::Upstream(u),
                ..
            }) => u,
            _ => &self.site.upstream,
        }
    }
}

impl std::ops::Deref for Routed<'_> {
    type Target = Site;
    fn deref(&self) -> &Site {
        self.site
    }
}

/// Where a request goes within the site: its route, chosen once on the normalized
/// path (as nginx's `location` matching is: `%XX` decoded, `//` collapsed, `.` and
/// `..` resolved, case kept), and that path after the route's prefix, which its rules
/// read. The one place a route is chosen; rules, files, backend and lanes all read
/// the [`Routed`] it returns. A site without routes pays nothing.
pub(crate) fn resolve<'s, 'p>(
    site: &'s Site,
    raw_path: &'p str,
) -> (Routed<'s>, std::borrow::Cow<'p, str>) {
    if site.routes.is_empty() {
        let routed = Routed { site, route: None };
        return (routed, std::borrow::Cow::Borrowed(""));
    }
    let path = normalized(raw_path);
    let route = site.routes.iter().position(|r| path.starts_with(&r.path));
    let rest = match route {
        Some(i) => match path {
            std::borrow::Cow::Borrowed(p) => {
                std::borrow::Cow::Borrowed(p.get(site.routes[i].path.len()..).unwrap_or(""))
            }
            std::borrow::Cow::Owned(p) => std::borrow::Cow::Owned(
                p.get(site.routes[i].path.len()..).unwrap_or("").to_string(),
            ),
        },
        None => std::borrow::Cow::Borrowed(""),
    };
    (Routed { site, route }, rest)
}
/// A request path as a backend reads it, for matching the routes whose rules guard it:
/// percent-decoded (`%2F` too), `.` and `..` resolved, empty segments dropped, the final
/// slash kept. A path with nothing to normalize is returned as it is.
pub(crate) fn normalized(raw: &str) -> std::borrow::Cow<'_, str> {
    if !raw.contains('%') && !raw.contains("//") && !raw.contains("/.") && !raw.contains('\\') {
        return std::borrow::Cow::Borrowed(raw);
    }
    let decoded = percent_encoding::percent_decode_str(raw).decode_utf8_lossy();
    let mut segments: Vec<&str> = Vec::new();
    for s in decoded.split(['/', '\\']) {
        match s {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = String::with_capacity(raw.len());
    for s in &segments {
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty()
        || decoded.ends_with('/')
        || decoded.ends_with("/.")
        || decoded.ends_with("/..")
    {
        out.push('/');
    }
    std::borrow::Cow::Owned(out)
}

/// The target a request is stored and purged under: the client's, also when a route
/// rewrote it (rules.rs).
pub(crate) fn key_uri(parts: &request::Parts) -> &http::Uri {
    parts
        .extensions
        .get::<levee_fastcgi::OriginalUri>()
        .map_or(&parts.uri, |o| &o.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_matched_as_the_backend_reads_them() {
        for (raw, want) in [
            ("/admin/page", "/admin/page"),
            ("/%61dmin/page", "/admin/page"),
            ("//admin//page", "/admin/page"),
            ("/x/../admin/page", "/admin/page"),
            ("/x/%2e%2e/admin/", "/admin/"),
            ("/admin%2Fpage", "/admin/page"),
            ("/./admin", "/admin"),
            ("/..", "/"),
            ("/a/..", "/"),
            ("/a/.", "/a/"),
            ("/API/x", "/API/x"),
        ] {
            assert_eq!(normalized(raw), want, "{raw}");
        }
    }
}
