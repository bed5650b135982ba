//! The cache key and the Vary key: what they cover, how they normalise.

use super::*;
use http::HeaderValue;

fn key(host: Option<&'static str>, target: &str) -> CacheKey {
    let mut h = HeaderMap::new();
    if let Some(host) = host {
        h.insert(header::HOST, HeaderValue::from_static(host));
    }
    CacheKey::for_request(Scheme::Http, &target.parse().unwrap(), &h)
}

#[test]
fn host_is_case_insensitive_path_and_query_are_not() {
    assert_eq!(
        key(Some("Example.COM"), "/a?b=1"),
        key(Some("example.com"), "/a?b=1")
    );
    assert_eq!(
        key(Some("example.com"), "/a?b=1").as_str(),
        "http://example.com/a?b=1"
    );
    assert_ne!(
        key(Some("example.com"), "/A"),
        key(Some("example.com"), "/a")
    );
    assert_ne!(
        key(Some("example.com"), "/a?B=1"),
        key(Some("example.com"), "/a?b=1")
    );
    assert_ne!(
        key(Some("example.com"), "/a"),
        key(Some("example.com"), "/a?")
    );
}

#[test]
fn host_of_a_key() {
    assert_eq!(
        key(Some("Example.com:8080"), "/a/b?c").host(),
        "example.com:8080"
    );
    assert_eq!(key(Some("example.com"), "/").host(), "example.com");
    assert_eq!(key(None, "/x").host(), "");
}

#[test]
fn hosts_and_ports_are_distinct_sites() {
    assert_ne!(key(Some("a.example"), "/"), key(Some("b.example"), "/"));
    assert_ne!(
        key(Some("a.example:8080"), "/"),
        key(Some("a.example"), "/")
    );
}

#[test]
fn one_host_one_spelling() {
    let plain = key(Some("example.com"), "/a");
    for spelling in [
        "EXAMPLE.com",
        "example.com.",
        "example.com:80",
        "Example.Com.:80",
        "example.com:",
        "example.com:0080",
    ] {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(spelling).unwrap());
        let k = CacheKey::for_request(Scheme::Http, &"/a".parse().unwrap(), &h);
        assert_eq!(k, plain, "{spelling}");
    }
    assert_eq!(
        normalize_host("[::1]:80", Scheme::Http).as_deref(),
        Some("[::1]")
    );
    assert_eq!(
        normalize_host("[::1]:8080", Scheme::Http).as_deref(),
        Some("[::1]:8080")
    );
    assert_eq!(normalize_host("", Scheme::Http).as_deref(), Some(""));
}

#[test]
fn a_host_already_normal_is_borrowed_and_others_are_rewritten() {
    use std::borrow::Cow;
    for normal in [
        "example.com",
        "example.com:8080",
        "[::1]:8080",
        "127.0.0.1:19012",
        "",
    ] {
        let n = normalize_host(normal, Scheme::Http);
        assert!(
            matches!(n, Some(Cow::Borrowed(s)) if s == normal),
            "{normal}: {n:?}"
        );
    }
    for (raw, want) in [
        ("Example.com", "example.com"),
        ("example.com.", "example.com"),
        ("example.com:80", "example.com"),
        ("example.com:", "example.com"),
        ("[::A]:8080", "[::a]:8080"),
        ("a.b.:8080", "a.b:8080"),
    ] {
        let n = normalize_host(raw, Scheme::Http);
        assert!(
            matches!(&n, Some(Cow::Owned(s)) if s == want),
            "{raw}: {n:?}"
        );
    }
    assert_eq!(
        normalize_host("example.com:443", Scheme::Https).as_deref(),
        Some("example.com")
    );
}

#[test]
fn invalid_hosts_have_no_spelling() {
    for bad in [
        "user@example.com",
        "example.com:80:80",
        "example.com:99999",
        "example.com:8o",
        "exa mple.com",
        "example.com/evil",
        "example.com\\evil",
        "[::1",
        "[zz::1]",
        "[::1]x",
        ":80",
        ".",
        "a\"b",
        // Empty labels; ".." was the fuzzer's first find (it normalized to ".").
        "..",
        "a..b",
        ".a",
        "example.com..",
    ] {
        assert_eq!(normalize_host(bad, Scheme::Http), None, "{bad}");
    }
}

#[test]
fn absolute_form_target_without_host_uses_its_authority() {
    assert_eq!(
        key(None, "http://Example.com/x").as_str(),
        "http://example.com/x"
    );
    // With a Host field, Host wins (RFC 9112 §3.2.2 makes them agree).
    assert_eq!(key(None, "/x").as_str(), "http:///x");
}

#[test]
fn same_origin_locations_only() {
    let k = key(Some("example.com"), "/post?id=1");
    assert_eq!(
        k.same_origin("/post/1").map(|k| k.url),
        Some("http://example.com/post/1".into())
    );
    assert_eq!(
        k.same_origin("http://EXAMPLE.com/x?y").map(|k| k.url),
        Some("http://example.com/x?y".into())
    );
    assert!(k.same_origin("http://other.example/x").is_none());
    assert!(k.same_origin("https://example.com/x").is_none());
    assert!(k.same_origin("relative").is_none());
    assert!(k.same_origin("not a uri").is_none());
}

#[test]
fn vary_matches_normalized_values() {
    let mut resp = HeaderMap::new();
    resp.insert(
        VARY,
        HeaderValue::from_static("Accept-Language, accept-encoding, x-theme"),
    );
    let mut req = HeaderMap::new();
    req.insert("accept-language", HeaderValue::from_static("ko, en"));
    let key = VaryKey::new(&resp, &req);
    let mut other = HeaderMap::new();
    other.insert("accept-language", HeaderValue::from_static("ko,en"));
    assert!(key.matches(&other));
    // levee negotiates codings itself: Accept-Encoding never splits variants.
    other.insert("accept-encoding", HeaderValue::from_static("gzip"));
    assert!(key.matches(&other));
    other.insert("x-theme", HeaderValue::from_static("dark"));
    assert!(!key.matches(&other), "absent and present differ");
    other.remove("x-theme");
    other.insert("accept-language", HeaderValue::from_static("en"));
    assert!(!key.matches(&other));
}

#[test]
fn vary_on_fields_levee_never_forwards_keeps_nothing() {
    let mut resp = HeaderMap::new();
    resp.insert(
        VARY,
        HeaderValue::from_static("Accept-Encoding, Cookie, Authorization"),
    );
    let key = VaryKey::new(&resp, &HeaderMap::new());
    assert!(key.is_empty());
    assert!(key.fields().is_empty());
    let mut other = HeaderMap::new();
    other.insert("accept-encoding", HeaderValue::from_static("br"));
    assert!(key.matches(&other));
}

fn language_key(values: &[&'static str]) -> VaryKey {
    let mut resp = HeaderMap::new();
    resp.insert(VARY, HeaderValue::from_static("Accept-Language"));
    let mut req = HeaderMap::new();
    for v in values {
        req.append("accept-language", HeaderValue::from_static(v));
    }
    VaryKey::new(&resp, &req)
}

#[test]
fn accept_language_in_another_order_case_or_spacing_is_the_same_variant() {
    let key = language_key(&["en, fr"]);
    for same in [
        &["fr, en"][..],
        &["FR,EN"],
        &["en,fr,en"],
        &[" fr ,  en "],
        &["en;q=1, fr;q=1.000"],
        &["fr", "en"],
    ] {
        assert_eq!(key, language_key(same), "{same:?}");
    }
    let key = language_key(&["en-US, fr;q=0.50"]);
    assert_eq!(key, language_key(&["FR; Q=0.5,en-us"]));
}

#[test]
fn accept_language_weighted_differently_is_another_variant() {
    // RFC 9110 §12.5.4: weights choose; a different weight may choose another
    // representation.
    let a = language_key(&["en;q=0.5, fr"]);
    let b = language_key(&["en, fr;q=0.5"]);
    assert_ne!(a, b);
    assert_ne!(language_key(&["en"]), language_key(&["en;q=0"]));
    assert_ne!(language_key(&["en"]), language_key(&["en, fr"]));
    assert_ne!(language_key(&["en"]), language_key(&["en-gb"]));
    assert_ne!(language_key(&["en;q=0.5"]), language_key(&["en;q=0.501"]));
    // An unreadable weight matches only itself.
    assert_ne!(language_key(&["en;q=2"]), language_key(&["en"]));
    assert_eq!(language_key(&["en;q=2"]), language_key(&["EN;Q=2"]));
}

#[test]
fn qvalues_in_the_fewest_digits() {
    let q = |s: &str| {
        let mut out = Vec::new();
        push_qvalue(&mut out, qvalue(s.as_bytes()).unwrap());
        String::from_utf8(out).unwrap()
    };
    assert_eq!(q("0"), "0");
    assert_eq!(q("0.000"), "0");
    assert_eq!(q("0.5"), "0.5");
    assert_eq!(q("0.50"), "0.5");
    assert_eq!(q("0.125"), "0.125");
    assert_eq!(q("0.05"), "0.05");
    for bad in ["1.001", "2", "0.1234", "", ".5", "0.x", "-0"] {
        assert_eq!(qvalue(bad.as_bytes()), None, "{bad}");
    }
}

#[test]
fn cookies_never_split_variants() {
    let mut resp = HeaderMap::new();
    resp.insert(VARY, HeaderValue::from_static("Cookie"));
    let key = VaryKey::new(&resp, &HeaderMap::new());
    let mut req = HeaderMap::new();
    req.insert("cookie", HeaderValue::from_static("_ga=1"));
    assert!(key.matches(&req));
}
