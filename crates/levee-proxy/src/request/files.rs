//! The document root: GET and HEAD of a file in it are answered from disk or memory
//! (`levee-static`), never through the cache nor the backend.

use http::request;
use levee_config::Backend;
use levee_static::Outcome;

use super::next::Next;
use super::respond;
use super::shared::Shared;
use super::site::Site;

/// A file's response, or on to classification when the path is not a file.
pub(crate) async fn serve(shared: &Shared, site: &Site, parts: &request::Parts) -> Next {
    let Some(files) = &site.files else {
        return Next::Classify;
    };
    match files.serve(parts).await {
        Outcome::Response(r) => Next::Respond(respond::static_file(shared, parts, r).await),
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
