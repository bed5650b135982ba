//! The `PURGE` method on the traffic port. What a purge removes, and the admin
//! listener's purges, are crate::purge's; this is who may send one here, and its answer.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{request, Response};

use crate::body::ProxyBody;
use crate::outcome::{Answer, CacheResult};
use crate::request::respond;
use crate::request::shared::Shared;
use crate::request::site::Site;
use crate::server::client::ConnInfo;

/// The `PURGE` method (Varnish's convention; MediaWiki sends it to `$wgCdnServers`):
/// removes every variant of the URL, for clients on the `[purge] allow` list; 403 for
/// anyone else, who learns nothing about what is stored.
pub(crate) fn from_client(
    shared: &Shared,
    site: &Site,
    parts: &request::Parts,
    conn: ConnInfo,
) -> Option<Answer> {
    if parts.method.as_str() != "PURGE" {
        return None;
    }
    Some(answer(shared, site, parts, conn))
}

fn answer(shared: &Shared, site: &Site, parts: &request::Parts, conn: ConnInfo) -> Answer {
    if !crate::purge::allowed(&shared.conf().settings, conn.peer.ip()) {
        return respond::error(
            http::StatusCode::FORBIDDEN,
            "PURGE is allowed only from the addresses in [purge] allow",
        );
    }
    let key = crate::purge::key_of_request(parts, conn.scheme()).in_site(site.index);
    let n: usize = crate::purge::both_schemes(&key)
        .iter()
        .map(|k| {
            if let Some(tiers) = &shared.tiers {
                tiers.ban(levee_tiers::url_ban(k, false));
            }
            shared.store.purge_key(k, false)
        })
        .sum();
    shared.stats.purged.inc_by(n as u64);
    let mut resp = Response::new(ProxyBody::full(Bytes::from(format!(
        "{{\"purged\":{n}}}\n"
    ))));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    respond::mark(shared, resp, CacheResult::Answered, None, None)
}
