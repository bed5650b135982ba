//! A range request that misses (RFC 9110 §14; RFC 9111 §3.3–3.4): the fill asks the
//! backend for the whole response (it never forwards `Range`) and is shared by concurrent
//! requests as any fill. A range request whose response is to be stored waits for the
//! whole body (at most `max_object_size`), then is answered from the entry the filler
//! stored (the range is cut by `partial.rs`, called from `respond::entry`): the same
//! bytes later hits get. A response that is not stored, or outgrows the limit, is
//! streamed whole (200, always a correct answer to a range request).

use http::StatusCode;

use crate::outcome::CacheResult;
use crate::request::next::FillHead;
use crate::request::next::{Next, Serve, Stream};
use crate::request::respond;

/// Reads the fill's whole body, then serves the entry the filler stored from it (the
/// range is cut in `respond::entry`). When the fill does not store (it outgrew `max`,
/// or something else kept it from the store), the whole response streams as for any
/// miss, from the bytes read so far; when the backend failed mid-body, 502.
pub(crate) async fn after_fill(stream: Stream, max: usize) -> Next {
    let Stream {
        head,
        mut reader,
        now,
        waited,
    } = stream;
    let FillHead::Stream(h) = &*head else {
        return Next::Stream(Stream {
            head,
            reader,
            now,
            waited,
        });
    };
    let mut stored = h.stored.clone();
    let mut read = Vec::new();
    let mut len = 0;
    let whole = loop {
        match reader.next_chunk().await {
            Some(Ok(chunk)) => {
                len += chunk.len();
                read.push(chunk);
                if len > max {
                    break false;
                }
            }
            Some(Err(e)) => {
                return Next::Respond(respond::error(StatusCode::BAD_GATEWAY, &e.to_string()));
            }
            None => break true,
        }
    };
    if whole {
        // The filler stores right after the body ends (or ends without storing).
        if let Ok(entry) = stored.wait_for(Option::is_some).await {
            if let Some(entry) = entry.clone() {
                return Next::Serve(Serve {
                    entry,
                    result: CacheResult::Miss,
                    now: levee_cache::clock::now(),
                    waited: Some(waited),
                    reason: None,
                });
            }
        }
    }
    reader.unread(read);
    Next::Stream(Stream {
        head,
        reader,
        now,
        waited,
    })
}
