//! The document root: GET and HEAD of a file in it are answered from disk or memory
//! (`levee-static`), never through the cache nor the backend.

use http::{request, Method};
use levee_config::Backend;
use levee_static::{Outcome, StaticFiles};

use crate::request::next::Next;
use crate::request::respond;
use crate::request::route::Routed;
use crate::request::shared::Shared;
use crate::request::site::{Route, RouteTo};

/// A file's response, or on to classification when the path is not a file. A route
/// decides first: files only (never the backend), or its backend (no files).
pub(crate) async fn serve(shared: &Shared, site: Routed<'_>, parts: &request::Parts) -> Next {
    match site.route() {
        Some(Route {
            to: RouteTo::Files(files),
            ..
        }) => return only_files(shared, files, parts).await,
        // A route of rules only serves as the site does.
        Some(Route {
            to: RouteTo::Site, ..
        })
        | None => {}
        Some(_) => return Next::Classify,
    }
    let read_only = parts.method == Method::GET || parts.method == Method::HEAD;
    let (Some(files), true) = (&site.files, read_only) else {
        return Next::Classify;
    };
    match files.serve(parts).await {
        Outcome::Response(r) => Next::Respond(respond::static_file(shared, parts, r).await),
        // A directory's index.php under uploads: an uploaded script, never run.
        Outcome::Php { script } if !site.conf().settings.hardening.runs_php(&script) => {
            Next::Respond(respond::error(
                http::StatusCode::FORBIDDEN,
                "PHP does not run here (an upload directory)",
            ))
        }
        // With PHP behind, levee is the web server: hidden files, paths outside the
        // root and PHP source are refused here.
        Outcome::Forbidden if matches!(site.conf().settings.backend, Backend::FastCgi(_)) => {
            Next::Respond(respond::error(
                http::StatusCode::FORBIDDEN,
                "this file is not served (hidden, outside the document root, or PHP source)",
            ))
        }
        // An HTTP backend decides for itself what a refused path means.
        Outcome::Forbidden | Outcome::NotFound | Outcome::Php { .. } => Next::Classify,
    }
}

/// A route of files only: a file, or 403/404; other methods than GET and HEAD get 405.
async fn only_files(shared: &Shared, files: &StaticFiles, parts: &request::Parts) -> Next {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        let mut answer = respond::error(
            http::StatusCode::METHOD_NOT_ALLOWED,
            "this path serves files only: GET and HEAD",
        );
        answer.resp.headers_mut().insert(
            http::header::ALLOW,
            http::HeaderValue::from_static("GET, HEAD"),
        );
        return Next::Respond(answer);
    }
    Next::Respond(match files.serve(parts).await {
        Outcome::Response(r) => respond::static_file(shared, parts, r).await,
        Outcome::Forbidden => respond::error(
            http::StatusCode::FORBIDDEN,
            "this file is not served (hidden, outside the root, or PHP source)",
        ),
        Outcome::NotFound | Outcome::Php { .. } => {
            respond::error(http::StatusCode::NOT_FOUND, "no such file")
        }
    })
}

/// Whether the request goes to the files first (nginx's `try_files`), or straight on to
/// classification: files are public, never through the cache nor the backend, and
/// their own memory cache and validators make them cheap.
pub(crate) fn first(site: Routed<'_>, parts: &request::Parts) -> Next {
    let read_only = parts.method == Method::GET || parts.method == Method::HEAD;
    // A script URL (`/doku.php?id=start`) is never a file: straight on, without the
    // file server's parse and lookup on every cached page.
    let script = site.routes.is_empty() && levee_static::names_php_script(parts.uri.path());
    if !script && ((read_only && site.files.is_some()) || !site.routes.is_empty()) {
        return Next::Files;
    }
    Next::Classify
}
