//! Content coding of responses (RFC 9110 §8.4, §12.5.3): which coding each client gets.
//!
//! - A stored response worth compressing is compressed once, in the `store` coding
//!   (gzip by default), and kept that way: memory holds the small form
//!   ([`Encoder::for_storage`]).
//! - A client that accepts the stored coding gets the stored bytes. Any other coding, or
//!   the uncompressed body, is made once on demand and kept in a bounded side cache keyed
//!   by the entry's id ([`Encoder::entry_form`]), so hot pages never pay twice.
//! - Responses that stream through (misses, passes, large files) are compressed on the
//!   fly at a fast level ([`Encoder::stream`]).
//!
//! A representation levee compressed gets a weak `ETag` (RFC 9110 §8.8.1: the bytes
//! differ, the content does not), `Vary: Accept-Encoding`, and no `Content-Length` when
//! streamed. Ties between codings the client accepts equally go to gzip: every browser
//! has it (also over plain HTTP, where they offer nothing else) and a gzip stream needs
//! a fifth of brotli's memory.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use levee_cache::headers::decimal;
use levee_cache::{DerivedBody, DerivedBudget, Entry, LeveeCoded};
use levee_compress::{
    add_vary_accept_encoding, compress, compress_chunks, compressible, decompress,
};
use levee_compress::{Accepted, Coding, CompressBody, DecompressBody, Level};
use levee_config::CompressionSettings;

use crate::body::ProxyBody;

/// Bodies this small are compressed on the calling worker; larger ones on the blocking
/// pool (a 100 KiB page takes ~2.5 ms at gzip level 6, too long to stall other clients).
const INLINE_LIMIT: usize = 32 << 10;

/// Largest body made by decompressing a stored one: far above any object the cache
/// stores, it only guards against a backend's decompression bomb.
const MAX_DECODED: usize = 256 << 20;

/// Preference among codings a client accepts equally (see the module comment).
const STREAM_ORDER: [Coding; 4] = [Coding::Gzip, Coding::Br, Coding::Zstd, Coding::Identity];

/// What the cache-side compression needs to know, shared by every request.
pub struct Encoder {
    enabled: bool,
    min_size: u64,
    store: Coding,
    /// Bounds the other forms of stored entries, which are kept with their entries
    /// (`Entry::derived`) and go with them.
    derived: Arc<DerivedBudget>,
    /// Compressed forms of static files held in memory: (path + ETag, coding) → the
    /// content they were made from and the compressed body (see [`Encoder::static_file`]).
    files: moka::future::Cache<(Arc<str>, Coding), (Bytes, Bytes)>,
}

/// How a stored entry is sent to one client.
pub enum EntryForm {
    /// The stored bytes and headers as they are.
    AsStored,
    /// Another coding of the same content (`Coding::Identity`: uncompressed).
    Derived { coding: Coding, body: Bytes },
}

impl Encoder {
    pub fn new(c: &CompressionSettings) -> Encoder {
        // The content a static form was made from is counted too: it is usually the
        // very `Bytes` levee-static keeps in memory, but this cache may outlive it there.
        fn weigh_file<K>(_: &K, v: &(Bytes, Bytes)) -> u32 {
            u32::try_from(v.0.len() + v.1.len() + 64).unwrap_or(u32::MAX)
        }
        let half = (c.transcode_memory / 2).max(1);
        Encoder {
            enabled: c.enabled,
            min_size: c.min_size,
            store: Coding::from_token(&c.store).unwrap_or(Coding::Gzip),
            derived: DerivedBudget::new(half),
            files: moka::future::Cache::builder()
                .max_capacity(half)
                .weigher(weigh_file)
                .build(),
        }
    }

    /// May levee compress this response? Only uncompressed, complete (not 206) bodies
    /// of text-like types at least `min_size` long (unknown length: yes), and never one
    /// marked `no-transform` (RFC 9111 §5.2.2.6).
    fn may_compress(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        if !self.enabled
            || status.is_informational()
            || matches!(status.as_u16(), 204 | 206 | 304)
            || headers.contains_key(header::CONTENT_ENCODING)
            || headers.contains_key(header::CONTENT_RANGE)
            || !compressible(headers.get(header::CONTENT_TYPE))
            || no_transform(headers)
        {
            return false;
        }
        let len = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        len.is_none_or(|l| l >= self.min_size)
    }

    /// Puts a complete response about to be stored in the form it is kept in: compressed
    /// in the store coding when worthwhile. Adjusts `headers` to that form and returns
    /// the body, its coding, and what levee changed.
    ///
    /// `chunks` is the body as it arrived; what is stored is always a new, exactly sized
    /// buffer (a chunk from hyper can be a slice of a much larger read buffer, which
    /// storing it would pin in memory for the entry's lifetime).
    pub async fn for_storage(
        &self,
        status: StatusCode,
        headers: &mut HeaderMap,
        chunks: Vec<Bytes>,
    ) -> (Bytes, Coding, Option<LeveeCoded>) {
        let len: usize = chunks.iter().map(|c| c.len()).sum();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        match Coding::from_headers(headers) {
            Some(Coding::Identity) => {}
            Some(coding) => {
                // The backend compressed it: kept as sent, decoded for clients that need it.
                add_vary_accept_encoding(headers);
                return (concat(&chunks), coding, None);
            }
            // Codings levee cannot undo: only clients that accept them as sent get them.
            None => return (concat(&chunks), Coding::Identity, None),
        }
        if !self.may_compress(status, headers) || (len as u64) < self.min_size {
            return (concat(&chunks), Coding::Identity, None);
        }
        let store = self.store;
        let chunks = Arc::new(chunks);
        let input = chunks.clone();
        let work = move || compress_chunks(store, &input, Level::Default);
        let compressed = if len <= INLINE_LIMIT {
            work()
        } else {
            tokio::task::spawn_blocking(work)
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)))
        };
        let compressed = match compressed {
            Ok(c) if c.len() < len => c,
            // Incompressible (already compressed data served as text, say): keep it.
            Ok(_) => return (concat(&chunks), Coding::Identity, None),
            Err(e) => {
                tracing::warn!(error = %e, "compressing a response for storage failed");
                return (concat(&chunks), Coding::Identity, None);
            }
        };
        let original_etag = headers.get(header::ETAG).cloned();
        set_coded_headers(headers, store, Some(compressed.len()));
        (compressed, store, Some(LeveeCoded { original_etag }))
    }

    /// The form of a stored entry this client gets.
    pub async fn entry_form(&self, entry: &Entry, request: &HeaderMap) -> EntryForm {
        if entry.coding() == Coding::Identity {
            return EntryForm::AsStored;
        }
        let accepted = Accepted::parse(request);
        let recodable = entry.levee_coded().is_some() && self.enabled;
        let chosen = if recodable {
            // The stored coding first, then the others: no allocation on the hit path.
            let mut order = [entry.coding(); 1 + STREAM_ORDER.len()];
            let mut n = 1;
            for c in STREAM_ORDER.iter().filter(|c| **c != entry.coding()) {
                order[n] = *c;
                n += 1;
            }
            accepted.choose(&order[..n])
        } else {
            accepted.choose(&[entry.coding(), Coding::Identity])
        };
        let chosen = chosen.unwrap_or(Coding::Identity);
        if chosen == entry.coding() {
            return EntryForm::AsStored;
        }
        let cell = entry.derived.forms().cell(chosen);
        // The common case, already derived, stays out of the large future of
        // `get_or_try_init`: hits move their futures around, and size costs copies.
        let made = match cell.get() {
            Some(d) => Ok(d.get().clone()),
            None => Box::pin(self.derive(cell, entry.body(), entry.coding(), chosen)).await,
        };
        match made {
            Ok(body) => EntryForm::Derived {
                coding: chosen,
                body,
            },
            Err(e) => {
                // A corrupt body from the backend: send it as stored, as the backend did.
                tracing::warn!(error = %e, coding = %entry.coding(), "decoding a stored response failed");
                EntryForm::AsStored
            }
        }
    }

    /// Makes `body` in coding `to` once, however many ask at the same time, and keeps it
    /// in `cell` while the budget has room (else it is made for this request only).
    async fn derive(
        &self,
        cell: &tokio::sync::OnceCell<DerivedBody>,
        body: Bytes,
        from: Coding,
        to: Coding,
    ) -> Result<Bytes, std::io::Error> {
        enum Failed {
            Codec(std::io::Error),
            NoRoom(Bytes),
        }
        let made = cell
            .get_or_try_init(|| async {
                let coded = run_codec(body, move |b| recode(&b, from, to))
                    .await
                    .map_err(Failed::Codec)?;
                let len = coded.len();
                DerivedBody::keep(coded, len, &self.derived).map_err(Failed::NoRoom)
            })
            .await;
        match made {
            Ok(d) => Ok(d.get().clone()),
            Err(Failed::NoRoom(body)) => Ok(body),
            Err(Failed::Codec(e)) => Err(e),
        }
    }

    /// Bytes held now by other codings of stored entries, and their bound (metrics).
    pub fn derived_bytes(&self) -> (u64, u64) {
        (self.derived.used(), self.derived.max())
    }

    /// Bytes held now by compressed forms of static files (a metric; bounded by
    /// `transcode_memory / 2`, evicted by size).
    pub fn static_forms_bytes(&self) -> u64 {
        self.files.weighted_size()
    }

    /// After a 304 merged new headers into a compressed entry: the new `ETag` is the
    /// backend's, of the uncompressed form; keep it for revalidation and serve it weak.
    pub fn after_refresh(headers: &mut HeaderMap, coded: &mut LeveeCoded) {
        if let Some(etag) = headers.get(header::ETAG) {
            if !etag.as_bytes().starts_with(b"W/") {
                coded.original_etag = Some(etag.clone());
            }
        }
        weaken_etag(headers);
    }

    /// Headers of `entry` adjusted for a derived form.
    pub fn derived_headers(entry: &Entry, coding: Coding, len: usize) -> HeaderMap {
        let mut h = entry.headers.to_map();
        if coding == Coding::Identity {
            h.remove(header::CONTENT_ENCODING);
            h.insert(header::CONTENT_LENGTH, decimal(len as u64));
            match entry.levee_coded().map(|c| c.original_etag.clone()) {
                // levee compressed it: uncompressed is exactly what the backend sent.
                Some(Some(etag)) => {
                    h.insert(header::ETAG, etag);
                }
                Some(None) => {}
                // The backend's ETag named its compressed bytes.
                None => weaken_etag(&mut h),
            }
        } else {
            set_coded_headers(&mut h, coding, Some(len));
        }
        h
    }

    /// Compresses a streamed response on the fly when the client accepts a coding, or
    /// decodes one the backend compressed in a coding the client does not accept:
    /// adjusts `headers` and wraps `body`. A HEAD gets the same headers as the GET.
    pub fn stream(
        &self,
        request: &HeaderMap,
        method: &Method,
        status: StatusCode,
        headers: &mut HeaderMap,
        body: ProxyBody,
    ) -> ProxyBody {
        if let Some(from) = backend_coding(status, headers) {
            // The backend compressed it although a fill asks for no coding (or a pass's
            // client may not accept it): as with a stored copy (`entry_form`), a client
            // that does not accept the coding gets the content decoded, on the fly.
            add_vary_accept_encoding(headers);
            if Accepted::parse(request).accepts(from) {
                return body;
            }
            headers.remove(header::CONTENT_ENCODING);
            headers.remove(header::CONTENT_LENGTH);
            // The backend's ETag named its compressed bytes.
            weaken_etag(headers);
            if *method == Method::HEAD {
                return body;
            }
            return ProxyBody::Decoded(Box::new(DecompressBody::new(body, from)));
        }
        if !self.may_compress(status, headers) {
            return body;
        }
        add_vary_accept_encoding(headers);
        let chosen = Accepted::parse(request)
            .choose(&STREAM_ORDER)
            .unwrap_or(Coding::Identity);
        if chosen == Coding::Identity {
            return body;
        }
        set_coded_headers(headers, chosen, None);
        if *method == Method::HEAD {
            return body;
        }
        ProxyBody::Coded(Box::new(CompressBody::new(body, chosen, Level::Fast)))
    }

    /// A static 304 (whose `Content-Type` and `Content-Length`, which levee-static adds
    /// for this, are removed here): when the 200 would have been compressed for this
    /// client it carries what that 200 would, a weak `ETag` and `Vary` (RFC 9110
    /// §15.4.5).
    pub fn static_not_modified(&self, request: &HeaderMap, headers: &mut HeaderMap) {
        let coded_200 = self.may_compress(StatusCode::OK, headers);
        headers.remove(header::CONTENT_TYPE);
        if !coded_200 {
            headers.remove(header::CONTENT_LENGTH);
            return;
        }
        headers.remove(header::CONTENT_LENGTH);
        add_vary_accept_encoding(headers);
        let chosen = Accepted::parse(request)
            .choose(&STREAM_ORDER)
            .unwrap_or(Coding::Identity);
        if chosen != Coding::Identity {
            weaken_etag(headers);
        }
    }

    /// A static file held in memory, compressed once per version and coding. `None`:
    /// send it as it is (the headers then only gain `Vary` when that applies).
    pub async fn static_file(
        &self,
        request: &HeaderMap,
        path: &str,
        headers: &mut HeaderMap,
        content: &Bytes,
    ) -> Option<Bytes> {
        if !self.may_compress(StatusCode::OK, headers) {
            return None;
        }
        add_vary_accept_encoding(headers);
        let chosen = Accepted::parse(request)
            .choose(&STREAM_ORDER)
            .unwrap_or(Coding::Identity);
        if chosen == Coding::Identity {
            return None;
        }
        // The ETag (mtime in whole seconds and length) is not enough to tell versions
        // apart: a same-size edit within the same second, or one that restores the mtime
        // (`rsync -a`, `cp -p`), keeps it while levee-static serves the new content. So
        // each form keeps the content it was made from and is used only for that content.
        let etag = headers.get(header::ETAG).map_or(&b""[..], |e| e.as_bytes());
        let key: Arc<str> = format!("{path}\n{}", String::from_utf8_lossy(etag)).into();
        let key = (key, chosen);
        if let Some((source, body)) = self.files.get(&key).await {
            if same_content(&source, content) {
                if source.as_ptr() != content.as_ptr() {
                    // Read again but unchanged: hold the copy levee-static now holds.
                    self.files
                        .insert(key, (content.clone(), body.clone()))
                        .await;
                }
                set_coded_headers(headers, chosen, Some(body.len()));
                return Some(body);
            }
            self.files.invalidate(&key).await;
        }
        let source = content.clone();
        let made = self
            .files
            .try_get_with(key, async move {
                let body = run_codec(source.clone(), move |b| {
                    compress(chosen, &b, Level::Default)
                })
                .await?;
                Ok::<_, std::io::Error>((source, body))
            })
            .await;
        match made {
            Ok((source, body)) if same_content(&source, content) => {
                set_coded_headers(headers, chosen, Some(body.len()));
                Some(body)
            }
            // A concurrent request compressed another version: send this one as it is.
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "compressing a static file failed");
                None
            }
        }
    }
}

/// The coding the backend applied to a complete body, when levee can undo it. Not for
/// partial content (a slice of a compressed stream cannot be decoded) nor for responses
/// without content.
fn backend_coding(status: StatusCode, headers: &HeaderMap) -> Option<Coding> {
    if status.is_informational()
        || matches!(status.as_u16(), 204 | 206 | 304)
        || headers.contains_key(header::CONTENT_RANGE)
    {
        return None;
    }
    match Coding::from_headers(headers) {
        Some(Coding::Identity) | None => None,
        Some(c) => Some(c),
    }
}

/// `Content-Encoding`, `Content-Length` (or none when streamed), weak `ETag`, `Vary`.
fn set_coded_headers(h: &mut HeaderMap, coding: Coding, len: Option<usize>) {
    h.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(coding.token()),
    );
    match len {
        Some(n) => {
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        None => {
            h.remove(header::CONTENT_LENGTH);
        }
    }
    weaken_etag(h);
    add_vary_accept_encoding(h);
}

/// `"x"` → `W/"x"`: the same content in other bytes (RFC 9110 §8.8.1).
fn weaken_etag(h: &mut HeaderMap) {
    let Some(etag) = h.get(header::ETAG) else {
        return;
    };
    if etag.as_bytes().starts_with(b"W/") {
        return;
    }
    let mut weak = Vec::with_capacity(etag.len() + 2);
    weak.extend_from_slice(b"W/");
    weak.extend_from_slice(etag.as_bytes());
    match HeaderValue::from_maybe_shared(Bytes::from(weak)) {
        Ok(v) => {
            h.insert(header::ETAG, v);
        }
        // Cannot happen for a valid field value; a strong ETag must not stay, though.
        Err(_) => {
            h.remove(header::ETAG);
        }
    }
}

/// Whether two bodies are the same content: the same bytes in memory (the usual case,
/// cheap; the cache holds its `Bytes`, so the memory cannot have been reused for another
/// version), or equal bytes (a file levee-static read again, unchanged).
fn same_content(a: &Bytes, b: &Bytes) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

fn no_transform(h: &HeaderMap) -> bool {
    h.get_all(header::CACHE_CONTROL).iter().any(|v| {
        v.as_bytes()
            .split(|b| *b == b',')
            .any(|d| d.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
    })
}

/// One exactly sized copy of the pieces.
fn concat(chunks: &[Bytes]) -> Bytes {
    let len = chunks.iter().map(|c| c.len()).sum();
    let mut b = bytes::BytesMut::with_capacity(len);
    for c in chunks {
        b.extend_from_slice(c);
    }
    b.freeze()
}

/// `from` → `to`, through the uncompressed form.
fn recode(body: &[u8], from: Coding, to: Coding) -> std::io::Result<Bytes> {
    let plain = decompress(from, body, MAX_DECODED)?;
    if to == Coding::Identity {
        Ok(plain)
    } else {
        compress(to, &plain, Level::Default)
    }
}

/// Runs a codec inline for small bodies, on the blocking pool for large ones.
async fn run_codec(
    body: Bytes,
    f: impl FnOnce(Bytes) -> std::io::Result<Bytes> + Send + 'static,
) -> std::io::Result<Bytes> {
    if body.len() <= INLINE_LIMIT {
        return f(body);
    }
    tokio::task::spawn_blocking(move || f(body))
        .await
        .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_are_weakened_once() {
        let mut h = HeaderMap::new();
        h.insert(header::ETAG, HeaderValue::from_static("\"abc\""));
        weaken_etag(&mut h);
        assert_eq!(h[header::ETAG], "W/\"abc\"");
        weaken_etag(&mut h);
        assert_eq!(h[header::ETAG], "W/\"abc\"");
    }

    #[test]
    fn same_content_is_the_same_bytes_not_the_same_etag() {
        let v1 = Bytes::from_static(b"version one");
        assert!(same_content(&v1, &v1.clone()));
        assert!(same_content(&v1, &Bytes::copy_from_slice(b"version one")));
        // Same length, as a same-size edit that keeps the ETag.
        assert!(!same_content(&v1, &Bytes::from_static(b"version two")));
        assert!(!same_content(&v1, &v1.slice(..7)));
    }

    #[test]
    fn backend_codings_are_undone_only_for_complete_bodies() {
        let mut h = HeaderMap::new();
        assert_eq!(backend_coding(StatusCode::OK, &h), None);
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("x-gzip"));
        assert_eq!(backend_coding(StatusCode::OK, &h), Some(Coding::Gzip));
        for status in [204, 206, 304] {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            assert_eq!(backend_coding(status, &h), None, "{status}");
        }
        h.insert(
            header::CONTENT_RANGE,
            HeaderValue::from_static("bytes 0-9/99"),
        );
        assert_eq!(backend_coding(StatusCode::OK, &h), None);
        h.remove(header::CONTENT_RANGE);
        // Two codings, or one levee does not know: left as they are.
        h.insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static("gzip, br"),
        );
        assert_eq!(backend_coding(StatusCode::OK, &h), None);
        h.insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static("deflate"),
        );
        assert_eq!(backend_coding(StatusCode::OK, &h), None);
    }

    #[test]
    fn no_transform_is_found_in_any_field_line() {
        let mut h = HeaderMap::new();
        h.append(header::CACHE_CONTROL, HeaderValue::from_static("public"));
        assert!(!no_transform(&h));
        h.append(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=3, No-Transform"),
        );
        assert!(no_transform(&h));
    }
}
