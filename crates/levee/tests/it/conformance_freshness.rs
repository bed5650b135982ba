//! RFC 9111 conformance of what levee stores and for how long, observed from outside:
//! §3 (storing responses, incomplete responses, header fields), §4.2 (max-age, s-maxage,
//! Expires, heuristic freshness, Age calculation), §5 (parsing Age, Cache-Control,
//! Expires, Pragma) and which status codes are heuristically cacheable (RFC 9110 §15.1).
//!
//! Each case is a real levee in front of a real origin on loopback: "reused" means the
//! second request was answered from the cache (`X-Cache: HIT`) without reaching the
//! origin; "not reused" means the origin saw it.

// Panicking is how a test fails, helpers included.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use levee_test::{http_date, levee, Levee, Origin, RawConn, Reply, Req};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One response shape: its status, its header lines, and whether a shared cache should
/// reuse it for a second identical request made at once.
struct Case {
    status: u16,
    headers: &'static [(&'static str, &'static str)],
    reused: bool,
    /// The RFC clause (and, for deviations, what levee does).
    why: &'static str,
}

const fn case(
    headers: &'static [(&'static str, &'static str)],
    reused: bool,
    why: &'static str,
) -> Case {
    Case {
        status: 200,
        headers,
        reused,
        why,
    }
}

/// Header values starting with `@` are times relative to now (`@+3600`, `@-60`, `@0`),
/// written as an IMF-fixdate.
fn value(v: &str, now: SystemTime) -> String {
    let Some(rel) = v.strip_prefix('@') else {
        return v.to_string();
    };
    let secs: i64 = rel.parse().expect("relative seconds");
    let t = if secs >= 0 {
        now + Duration::from_secs(secs.unsigned_abs())
    } else {
        now - Duration::from_secs(secs.unsigned_abs())
    };
    http_date(t)
}

/// An origin answering `/case/<i>` with `cases[i]`, and a levee in front of it.
fn start(cases: &'static [Case]) -> (Origin, Levee) {
    let origin = Origin::start(move |r| {
        let i: usize = r
            .path
            .strip_prefix("/case/")
            .and_then(|s| s.parse().ok())
            .expect("a /case/<i> path");
        let c = &cases[i];
        let now = SystemTime::now();
        let mut reply = Reply::status(c.status);
        if c.status != 204 && c.status != 304 {
            reply = reply.body(format!("case {i} #{}", r.n));
        }
        for (name, v) in c.headers {
            reply = reply.header(name, &value(v, now));
        }
        reply
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    (origin, levee)
}

/// Polls with `only-if-cached` (never reaching the origin) until `path` is stored fresh.
async fn stored_within(levee: &Levee, path: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let r = levee
            .get_with(path, &[("cache-control", "only-if-cached")])
            .await;
        if r.x_cache() == "HIT" {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Requests every case twice and reports each whose second request was (not) reused
/// against expectations, all at once.
async fn check(cases: &'static [Case]) {
    let (origin, levee) = start(cases);
    for (i, c) in cases.iter().enumerate() {
        let path = format!("/case/{i}");
        let r = levee.get(&path).await;
        assert_eq!(r.status, c.status, "case {i} ({}): {}", c.why, r.summary());
        assert_eq!(r.x_cache(), "MISS", "case {i} ({}): {}", c.why, r.summary());
    }
    // Let fills of responses that are not reused finish storing whatever they store.
    levee.wait_fills_done().await;
    let mut wrong = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let path = format!("/case/{i}");
        if c.reused {
            stored_within(&levee, &path, Duration::from_secs(3)).await;
        }
        let r = levee.get(&path).await;
        let reused = r.x_cache() == "HIT" && origin.requests_for(&path) == 1;
        if reused != c.reused {
            wrong.push(format!(
                "case {i} {:?}: expected {}, got {} (origin saw {} requests) — {}",
                c.headers,
                if c.reused { "reused" } else { "not reused" },
                r.summary(),
                origin.requests_for(&path),
                c.why
            ));
        }
        if !c.reused {
            assert_ne!(r.x_cache(), "STALE", "case {i}: {}", r.summary());
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[tokio::test]
async fn max_age_values_are_parsed_strictly() {
    static CASES: &[Case] = &[
        case(&[("cache-control", "max-age=3600")], true, "§5.2.2.1"),
        case(
            &[("cache-control", "max-age=\"3600\"")],
            true,
            "§5.2: recipients accept the quoted-string form",
        ),
        case(
            &[("cache-control", "max-age='3600'")],
            false,
            "single quotes are not a quoted-string: invalid, stale (§4.2.1)",
        ),
        case(
            &[("cache-control", "max-age=\"3600")],
            false,
            "an unterminated quoted-string is invalid",
        ),
        case(&[("cache-control", "max-age=003600")], true, "1*DIGIT"),
        case(
            &[("cache-control", "MaX-AgE=3600")],
            true,
            "§5.2: directive names are case-insensitive",
        ),
        case(
            &[("cache-control", "foobar, max-age=3600, x=\"y, z\"")],
            true,
            "§5.2.3: unknown extensions are ignored",
        ),
        case(
            &[("cache-control", "max-age =3600")],
            false,
            "§5.2: no whitespace around '='",
        ),
        case(
            &[("cache-control", "max-age= 3600")],
            false,
            "§5.2: no whitespace around '='",
        ),
        case(
            &[("cache-control", "max-age=3600a")],
            false,
            "§4.2.1: invalid (non-integer) max-age is stale",
        ),
        case(&[("cache-control", "max-age=a3600")], false, "§4.2.1"),
        case(
            &[("cache-control", "max-age=-3600")],
            false,
            "§1.2.2: delta-seconds is non-negative",
        ),
        case(&[("cache-control", "max-age=+3600")], false, "§1.2.2"),
        case(&[("cache-control", "max-age=3600.0")], false, "§1.2.2"),
        case(&[("cache-control", "max-age")], false, "no argument"),
        case(&[("cache-control", "max-age=0")], false, "§5.2.2.1"),
        case(
            &[("cache-control", "extension=\"max-age=3600\", max-age=0")],
            false,
            "§5.2: max-age inside a quoted string is not a directive",
        ),
        case(
            &[("cache-control", "max-age=0, extension=\"max-age=3600\"")],
            false,
            "§5.2",
        ),
        case(
            &[("cache-control", "extension=\"a, max-age=3600\"")],
            false,
            "§5.2: no max-age at all here",
        ),
        case(
            &[("cache-control", "max-age=2147483648")],
            true,
            "§1.2.2: 2^31",
        ),
        case(
            &[("cache-control", "max-age=99999999999")],
            true,
            "§1.2.2: larger than 2^31",
        ),
        case(
            &[("cache-control", "max-age=99999999999999999999999999")],
            true,
            "§1.2.2: overflows any integer: 2^31",
        ),
        case(
            &[("cache-control", "max-age=3600, max-age=3600")],
            true,
            "§4.2.1: a repeated identical value is no conflict",
        ),
        // §4.2.1: "When there is more than one value present for a given directive ...
        // either the first occurrence should be used or the response should be considered
        // stale." levee takes the second option for conflicting values.
        case(
            &[("cache-control", "max-age=3600, max-age=0")],
            false,
            "§4.2.1: conflicting duplicates: stale",
        ),
        case(
            &[("cache-control", "max-age=0, max-age=3600")],
            false,
            "§4.2.1: conflicting duplicates: stale",
        ),
        case(
            &[
                ("cache-control", "max-age=3600"),
                ("cache-control", "max-age=5"),
            ],
            false,
            "§4.2.1: conflicting duplicates across field lines: stale",
        ),
        case(
            &[
                ("cache-control", "public"),
                ("cache-control", "max-age=3600"),
            ],
            true,
            "§5.2: field lines are combined",
        ),
        case(
            &[
                ("cache-control", "max-age=3600"),
                ("cache-control", "no-store"),
            ],
            false,
            "§5.2.2.5 on a second field line",
        ),
        case(
            &[("cache-control", "max-age=3600, No-StOrE")],
            false,
            "§5.2.2.5, case-insensitive",
        ),
        case(
            &[("cache-control", "max-age=3600, no-cache")],
            false,
            "§5.2.2.4: no-cache without a validator is never reused",
        ),
        case(
            &[("cache-control", "max-age=3600, private")],
            false,
            "§5.2.2.7: shared cache",
        ),
        // §5.2.2.7: a shared cache MAY store the rest of a response without the fields a
        // qualified private names; levee treats it as unqualified, as the RFC's note says
        // caches commonly do.
        case(
            &[("cache-control", "max-age=3600, private=\"x-user\"")],
            false,
            "§5.2.2.7: qualified private treated as unqualified",
        ),
    ];
    check(CASES).await;
}

#[tokio::test]
async fn s_maxage_overrides_max_age_and_expires() {
    static CASES: &[Case] = &[
        case(&[("cache-control", "s-maxage=3600")], true, "§5.2.2.10"),
        case(
            &[("cache-control", "max-age=0, s-maxage=3600")],
            true,
            "§5.2.2.10: s-maxage overrides max-age",
        ),
        case(
            &[("cache-control", "s-maxage=0, max-age=3600")],
            false,
            "§5.2.2.10: s-maxage overrides max-age",
        ),
        case(
            &[
                ("cache-control", "max-age=3600"),
                ("cache-control", "s-maxage=0"),
            ],
            false,
            "§5.2.2.10 across field lines",
        ),
        case(
            &[("cache-control", "s-maxage=3600"), ("expires", "@-3600")],
            true,
            "§5.3: a shared cache ignores Expires when s-maxage is present",
        ),
        case(
            &[("cache-control", "s-maxage=abc, max-age=3600")],
            false,
            "§4.2.1: invalid s-maxage is stale",
        ),
        case(
            &[("cache-control", "s-maxage=3600, s-maxage=1")],
            false,
            "§4.2.1: conflicting duplicates: stale",
        ),
    ];
    check(CASES).await;
}

#[tokio::test]
async fn expires_is_parsed_strictly_and_relative_to_date() {
    static CASES: &[Case] = &[
        case(&[("date", "@0"), ("expires", "@+3600")], true, "§5.3"),
        case(
            &[
                ("date", "@0"),
                ("expires", "Thursday, 18-Aug-50 02:01:18 GMT"),
            ],
            true,
            "RFC 9110 §5.6.7: rfc850-date is accepted",
        ),
        case(
            &[("date", "@0"), ("expires", "Thu Aug 18 02:01:18 2050")],
            true,
            "RFC 9110 §5.6.7: asctime-date is accepted",
        ),
        case(
            &[("date", "@0"), ("expires", "@-3600")],
            false,
            "§5.3: past",
        ),
        case(
            &[("date", "@0"), ("expires", "@0")],
            false,
            "§4.2.1: Expires == Date is a zero lifetime",
        ),
        case(
            &[("date", "@400"), ("expires", "@300")],
            false,
            "§4.2.1: lifetime is Expires minus Date, even when both are ahead of us",
        ),
        case(
            &[("date", "@-3600"), ("expires", "@+60")],
            true,
            "§4.2.1/§4.2.3: lifetime is Expires minus Date (3660 s), apparent age 3600 s",
        ),
        case(
            &[("date", "@0"), ("expires", "0")],
            false,
            "§5.3: invalid, especially \"0\", means already expired",
        ),
        case(&[("date", "@0"), ("expires", "garbage")], false, "§5.3"),
        case(
            &[("date", "@0"), ("expires", "Thu, 18 Aug 2050 02:01:18 UTC")],
            false,
            "§5.3: not an HTTP-date (UTC)",
        ),
        case(
            &[("date", "@0"), ("expires", "Thu, 18 Aug 50 02:01:18 GMT")],
            false,
            "§5.3: not an HTTP-date (two-digit year)",
        ),
        case(
            &[("date", "@0"), ("expires", "Thu 18 Aug 2050 02:01:18 GMT")],
            false,
            "§5.3: not an HTTP-date (no comma)",
        ),
        case(
            &[("date", "@0"), ("expires", "Thu, 18-Aug-2050 02:01:18 GMT")],
            false,
            "§5.3: not an HTTP-date (dashes)",
        ),
        case(
            &[("date", "@0"), ("expires", "Thu, 18 Aug 2050 2:01:18 GMT")],
            false,
            "§5.3: not an HTTP-date (one-digit hour)",
        ),
        case(
            &[("date", "@0"), ("expires", "Thu, 18 Aug 2050 02.01.18 GMT")],
            false,
            "§5.3: not an HTTP-date (periods)",
        ),
        // RFC 9110 §5.6.7 makes HTTP-date case-sensitive; RFC 9111 §4.2 relaxes it for
        // caches, which SHOULD match it case-insensitively (cache-tests: an optimal cache
        // does).
        case(
            &[("date", "@0"), ("expires", "THU, 18 Aug 2050 02:01:18 GMT")],
            true,
            "RFC 9111 §4.2: a cache matches HTTP-date case-insensitively",
        ),
        case(
            &[("date", "foo"), ("expires", "@+3600")],
            true,
            "RFC 9110 §6.6.1: an invalid Date is replaced by the time of receipt",
        ),
        case(
            &[
                ("date", "@0"),
                ("expires", "@+3600"),
                ("cache-control", "max-age=0"),
            ],
            false,
            "§5.3: max-age overrides Expires",
        ),
        case(
            &[
                ("date", "@0"),
                ("expires", "0"),
                ("cache-control", "max-age=3600"),
            ],
            true,
            "§5.3: max-age overrides even an invalid Expires",
        ),
        case(
            &[("date", "@0"), ("expires", "@+3600"), ("expires", "@+3600")],
            true,
            "§4.2.1: identical duplicates are no conflict",
        ),
        case(
            &[("date", "@0"), ("expires", "@+3600"), ("expires", "@-3600")],
            false,
            "§4.2.1: conflicting Expires lines: stale",
        ),
        case(
            &[("date", "@-10"), ("expires", "@+10"), ("age", "25")],
            false,
            "§4.2.3: Age beyond Expires minus Date (slow Date)",
        ),
        case(
            &[("date", "@+10"), ("expires", "@+20"), ("age", "15")],
            false,
            "§4.2.3: Age beyond Expires minus Date (fast Date)",
        ),
        case(
            &[("date", "@0"), ("expires", "Fri, 31 Dec 9999 23:59:59 GMT")],
            true,
            "a very distant Expires",
        ),
    ];
    check(CASES).await;
}

#[tokio::test]
async fn age_from_upstream_is_parsed_per_section_5_1() {
    static CASES: &[Case] = &[
        case(
            &[("cache-control", "max-age=3600"), ("age", "1800")],
            true,
            "§4.2.3",
        ),
        case(
            &[("cache-control", "max-age=10"), ("age", "15")],
            false,
            "§4.2.3: Age beyond max-age",
        ),
        case(
            &[("cache-control", "max-age=3600"), ("age", "abc")],
            true,
            "§5.1: an invalid Age is ignored",
        ),
        case(
            &[("cache-control", "max-age=3600"), ("age", "-7200")],
            true,
            "§5.1: a negative Age is invalid: ignored",
        ),
        case(
            &[("cache-control", "max-age=3600"), ("age", "7200.0")],
            true,
            "§5.1: a non-integer Age is invalid: ignored",
        ),
        case(
            &[("cache-control", "max-age=3600"), ("age", "7200,0")],
            false,
            "§5.1: a list-based Age: use the first member",
        ),
        case(
            &[("cache-control", "max-age=3600"), ("age", "0, 7200")],
            true,
            "§5.1: first member",
        ),
        case(
            &[
                ("cache-control", "max-age=3600"),
                ("age", "7200"),
                ("age", "0"),
            ],
            false,
            "§5.1: first member across field lines",
        ),
        case(
            &[
                ("cache-control", "max-age=3600"),
                ("age", "0"),
                ("age", "7200"),
            ],
            true,
            "§5.1: first member across field lines",
        ),
        case(
            &[("cache-control", "max-age=3600"), ("age", "7200, 7200")],
            false,
            "§5.1",
        ),
        case(
            &[
                ("cache-control", "max-age=3600"),
                ("age", "99999999999999999999999999"),
            ],
            false,
            "§1.2.2: an Age that overflows counts as 2^31",
        ),
    ];
    check(CASES).await;
}

#[tokio::test]
async fn heuristic_freshness_only_for_heuristically_cacheable_statuses() {
    const LM: (&str, &str) = ("last-modified", "@-86400");
    const DATE: (&str, &str) = ("date", "@0");
    const fn heuristic(status: u16, reused: bool, why: &'static str) -> Case {
        Case {
            status,
            headers: &[DATE, LM],
            reused,
            why,
        }
    }
    static CASES: &[Case] = &[
        heuristic(200, true, "RFC 9110 §15.3.1"),
        heuristic(203, true, "RFC 9110 §15.3.4"),
        heuristic(204, true, "RFC 9110 §15.3.5"),
        heuristic(300, true, "RFC 9110 §15.4.1"),
        heuristic(301, true, "RFC 9110 §15.4.2"),
        heuristic(308, true, "RFC 9110 §15.4.9"),
        heuristic(404, true, "RFC 9110 §15.5.5"),
        heuristic(405, true, "RFC 9110 §15.5.6"),
        heuristic(410, true, "RFC 9110 §15.5.11"),
        heuristic(414, true, "RFC 9110 §15.5.15"),
        heuristic(451, true, "RFC 7725 §3: cacheable by default"),
        heuristic(501, true, "RFC 9110 §15.6.2"),
        heuristic(201, false, "not heuristically cacheable"),
        heuristic(202, false, "not heuristically cacheable"),
        heuristic(302, false, "RFC 9110 §15.4.3: only with explicit freshness"),
        heuristic(303, false, "RFC 9110 §15.4.4"),
        heuristic(307, false, "RFC 9110 §15.4.8"),
        heuristic(400, false, "not heuristically cacheable"),
        heuristic(403, false, "not heuristically cacheable"),
        heuristic(500, false, "not heuristically cacheable"),
        heuristic(502, false, "not heuristically cacheable"),
        heuristic(503, false, "not heuristically cacheable"),
        heuristic(504, false, "not heuristically cacheable"),
        heuristic(599, false, "unknown status without public"),
        Case {
            status: 599,
            headers: &[DATE, LM, ("cache-control", "public")],
            reused: true,
            why: "§3 / §4.2.2: public allows heuristic freshness for any status",
        },
        Case {
            status: 302,
            headers: &[DATE, LM, ("cache-control", "public")],
            reused: true,
            why: "§4.2.2: public",
        },
        Case {
            status: 200,
            headers: &[DATE, ("last-modified", "@+60")],
            reused: false,
            why: "§4.2.2: Last-Modified after Date gives no heuristic lifetime",
        },
        Case {
            status: 200,
            headers: &[DATE, LM, ("cache-control", "max-age=0")],
            reused: false,
            why: "§4.2.2: no heuristics when explicit freshness is present",
        },
        Case {
            status: 200,
            headers: &[DATE, LM, ("expires", "@-60")],
            reused: false,
            why: "§4.2.2: no heuristics when Expires is present",
        },
        Case {
            status: 200,
            headers: &[DATE, LM, ("pragma", "no-cache")],
            reused: true,
            why: "§5.4: Pragma has no defined meaning in a response",
        },
        Case {
            status: 200,
            headers: &[DATE],
            reused: false,
            why: "§4.2.2: no Last-Modified, no heuristic lifetime",
        },
    ];
    check(CASES).await;
}

#[tokio::test]
async fn explicit_freshness_makes_any_final_status_storable() {
    const FRESH: &[(&str, &str)] = &[("cache-control", "max-age=3600")];
    // Stale on arrival: Age beyond max-age.
    const STALE: &[(&str, &str)] = &[("cache-control", "max-age=3600"), ("age", "7200")];
    const fn fresh(status: u16) -> Case {
        Case {
            status,
            headers: FRESH,
            reused: true,
            why: "§3: any final status with explicit freshness may be stored",
        }
    }
    const fn stale(status: u16) -> Case {
        Case {
            status,
            headers: STALE,
            reused: false,
            why: "§4.2: a stale response is not reused",
        }
    }
    static CASES: &[Case] = &[
        fresh(200),
        fresh(203),
        fresh(204),
        fresh(299),
        fresh(301),
        fresh(302),
        fresh(303),
        fresh(307),
        fresh(308),
        fresh(400),
        fresh(404),
        fresh(410),
        fresh(499),
        fresh(500),
        fresh(502),
        fresh(503),
        fresh(504),
        fresh(599),
        stale(200),
        stale(302),
        stale(404),
        stale(500),
        stale(503),
        Case {
            status: 302,
            headers: &[("etag", "\"x\"")],
            reused: false,
            why: "§3: a validator alone does not make a 302 storable",
        },
    ];
    check(CASES).await;
}

#[tokio::test]
async fn must_understand_overrides_no_store_only_for_understood_statuses() {
    static CASES: &[Case] = &[
        case(
            &[("cache-control", "max-age=3600, must-understand, no-store")],
            true,
            "§5.2.2.3: a cache that understands the status ignores no-store",
        ),
        Case {
            status: 404,
            headers: &[("cache-control", "max-age=3600, must-understand, no-store")],
            reused: true,
            why: "§5.2.2.3",
        },
        Case {
            status: 299,
            headers: &[("cache-control", "max-age=3600, must-understand, no-store")],
            reused: false,
            why: "§3: must-understand with a status levee does not know: not stored",
        },
        Case {
            status: 299,
            headers: &[("cache-control", "max-age=3600, must-understand")],
            reused: false,
            why: "§3: must-understand with a status levee does not know: not stored",
        },
    ];
    check(CASES).await;
}

#[tokio::test]
async fn pragma_no_cache() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(format!("#{}", r.n)).header("cache-control", "max-age=3600");
        if r.path == "/response-pragma" {
            reply.header("pragma", "no-cache")
        } else {
            reply
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    // §5.4: Pragma in a response has no defined meaning; Cache-Control decides.
    levee.get("/response-pragma").await;
    levee.wait_stored("/response-pragma").await;
    let r = levee.get("/response-pragma").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());

    levee.get("/p").await;
    levee.wait_stored("/p").await;
    // §5.4: Pragma: no-cache in a request without Cache-Control is read as
    // Cache-Control: no-cache (the stored response is not used without the origin)...
    let r = levee.get_with("/p", &[("pragma", "no-cache")]).await;
    assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests_for("/p"), 2);
    // ...and ignored when Cache-Control is present; other pragmas mean nothing.
    levee.wait_stored("/p").await;
    let r = levee
        .get_with(
            "/p",
            &[("pragma", "no-cache"), ("cache-control", "max-stale=10")],
        )
        .await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    let r = levee
        .get_with("/p", &[("pragma", "unrecognised-extension")])
        .await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests_for("/p"), 2);
}

#[tokio::test]
async fn request_no_store_is_not_stored_but_may_be_answered_from_the_cache() {
    let origin = Origin::start(|r| {
        Reply::text(format!("{} #{}", r.path, r.n)).header("cache-control", "max-age=3600")
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    // §5.2.1.5: no response to a no-store request is stored.
    let r = levee
        .get_with("/ns", &[("cache-control", "no-store")])
        .await;
    assert_eq!(r.reason(), "request-no-store", "{}", r.summary());
    levee.wait_fills_done().await;
    let r = levee.get("/ns").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(origin.requests_for("/ns"), 2);
    // "if a request containing this directive is satisfied from a cache, the no-store
    // request directive does not apply to the already stored response."
    levee.wait_stored("/ns").await;
    let r = levee
        .get_with("/ns", &[("cache-control", "no-store")])
        .await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests_for("/ns"), 2);
}

#[tokio::test]
async fn responses_to_post_are_not_reused_for_get() {
    let origin = Origin::start(|r| {
        Reply::text(format!("{} {} #{}", r.method, r.path, r.n))
            .header("cache-control", "max-age=3600")
            .header("content-location", &r.path)
    });
    let levee = levee!().backend(&origin.url()).start();
    let r = Req::post("/form", "a=1").send(&levee).await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    let r = levee.get("/form").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(r.text(), "GET /form #2");
    // §4.4: and a POST invalidates what GET stored.
    levee.wait_stored("/form").await;
    Req::post("/form", "a=2").send(&levee).await;
    let r = levee.get("/form").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
}

#[tokio::test]
async fn age_on_cached_responses_is_an_increasing_integer_including_upstream_age() {
    let origin = Origin::start(|r| {
        let now = SystemTime::now();
        let reply = Reply::text("aged").header("date", &http_date(now));
        match r.path.as_str() {
            "/expires" => reply
                .header("expires", &http_date(now + Duration::from_secs(30 * 86400)))
                .header("age", "30"),
            "/max-age" => reply
                .header("cache-control", "max-age=600")
                .header("age", "30"),
            // Date 100 s ago, no Age: the apparent age counts (§4.2.3).
            "/old-date" => Reply::text("old")
                .header("date", &http_date(now - Duration::from_secs(100)))
                .header("cache-control", "max-age=600"),
            "/overflow" => reply
                .header("cache-control", "max-age=600")
                .header("age", "99999999999999999999999"),
            _ => reply.header("cache-control", "max-age=600"),
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    let cases = [("/expires", 30), ("/max-age", 30), ("/old-date", 100)];
    let mut first_hit_ages = Vec::new();
    for (path, at_least) in cases {
        let miss = levee.get(path).await;
        let a0 = miss.age().expect("integer Age on a miss");
        assert!(a0 >= at_least, "{path}: {}", miss.summary());
        levee.wait_stored(path).await;
        let hit = levee.get(path).await;
        assert_eq!(hit.x_cache(), "HIT", "{path}: {}", hit.summary());
        let a1 = hit.age().expect("integer Age on a hit");
        assert!(a1 >= at_least, "{path}: {}", hit.summary());
        assert_eq!(
            hit.header_all("age").len(),
            1,
            "one Age field: {:?}",
            hit.headers
        );
        first_hit_ages.push(a1);
    }
    // All stored before the clock moves: the origin's Date (its own, real clock) and
    // levee's agree when each is received.
    levee.advance_clock(Duration::from_millis(1500)).await;
    for ((path, _), a1) in cases.into_iter().zip(first_hit_ages) {
        let later = levee.get(path).await;
        assert_eq!(later.x_cache(), "HIT", "{path}: {}", later.summary());
        let a2 = later.age().expect("integer Age");
        assert!(a2 > a1, "{path}: Age did not increase: {a1} then {a2}");
    }
    // §5.1: an Age that overflows is sent as 2^31, and such a response is stale.
    let r = levee.get("/overflow").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.header("age"), Some("2147483648"), "{}", r.summary());
    levee.wait_fills_done().await;
    let r = levee.get("/overflow").await;
    assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests_for("/overflow"), 2);
}

#[tokio::test]
async fn stale_while_revalidate_does_not_override_must_revalidate_or_s_maxage() {
    let origin = Origin::start(|r| {
        let cc = match r.path.as_str() {
            "/must" => "max-age=1, must-revalidate, stale-while-revalidate=60",
            "/proxy" => "max-age=1, proxy-revalidate, stale-while-revalidate=60",
            "/smax" => "s-maxage=1, stale-while-revalidate=60",
            _ => "max-age=1, stale-while-revalidate=60",
        };
        Reply::text(format!("{} #{}", r.path, r.n)).header("cache-control", cc)
    });
    let levee = levee!().backend(&origin.url()).start();
    for p in ["/must", "/proxy", "/smax", "/plain"] {
        levee.get(p).await;
        levee.wait_stored(p).await;
    }
    levee.advance_clock(Duration::from_millis(1500)).await;
    origin.advance_clock(Duration::from_millis(1500));
    // §4.2.4: "A cache MUST NOT generate a stale response if it is prohibited by an
    // explicit in-protocol directive (e.g., ... must-revalidate ..., or an applicable
    // s-maxage or proxy-revalidate response directive)". Most restrictive wins (§4.2.1).
    for p in ["/must", "/proxy", "/smax"] {
        let r = levee.get(p).await;
        assert_eq!(r.x_cache(), "MISS", "{p}: {}", r.summary());
        assert_eq!(origin.requests_for(p), 2, "{p}: {}", r.summary());
    }
    // Control: plain stale-while-revalidate serves stale.
    let r = levee.get("/plain").await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
}

#[tokio::test]
async fn a_stored_error_is_not_served_stale_in_place_of_a_new_error() {
    let origin = Origin::start(|r| {
        Reply::status(503)
            .body(format!("down #{}", r.n))
            .header("cache-control", "max-age=2")
    });
    let levee = levee!().backend(&origin.url()).start();
    let r = levee.get("/e").await;
    assert_eq!(r.status, 503);
    assert!(stored_within(&levee, "/e", Duration::from_secs(1)).await);
    let r = levee.get("/e").await;
    assert_eq!(
        r.x_cache(),
        "HIT",
        "§3: a 503 with max-age is storable: {}",
        r.summary()
    );
    // Past max-age=2, well within the default grace of 1 h.
    levee.advance_clock(Duration::from_secs(3)).await;
    origin.advance_clock(Duration::from_secs(3));
    // levee's grace serves a stale copy when the backend fails (an out-of-band contract,
    // §4.2.4); that copy being itself an error, the backend's new answer is better.
    let r = levee.get("/e").await;
    assert_eq!(r.text(), "down #2", "{}", r.summary());
    assert_ne!(r.x_cache(), "STALE", "{}", r.summary());
}

/// An origin that writes exactly the bytes a test gives it, one response per connection,
/// for what hyper would not send: no `Date`, a body cut short.
struct RawOrigin {
    addr: SocketAddr,
    count: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl RawOrigin {
    fn start(reply: impl Fn(&str, usize) -> Vec<u8> + Send + Sync + 'static) -> RawOrigin {
        let std = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        std.set_nonblocking(true).expect("nonblocking");
        let addr = std.local_addr().expect("addr");
        let listener = TcpListener::from_std(std).expect("tokio listener");
        let count = Arc::new(AtomicUsize::new(0));
        let reply = Arc::new(reply);
        let task_count = count.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    continue;
                };
                let count = task_count.clone();
                let reply = reply.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
                            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                    let _ = s.write_all(&reply(&path, n)).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        RawOrigin { addr, count, task }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn requests(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

impl Drop for RawOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn raw_response(head: &[&str], body: &str) -> Vec<u8> {
    let mut s = String::from("HTTP/1.1 200 OK\r\n");
    for h in head {
        s.push_str(h);
        s.push_str("\r\n");
    }
    s.push_str("connection: close\r\n\r\n");
    s.push_str(body);
    s.into_bytes()
}

#[tokio::test]
async fn a_response_without_date_is_stored_with_the_time_it_was_received() {
    let origin = RawOrigin::start(|_, n| {
        let body = format!("no date #{n}");
        raw_response(
            &[
                "cache-control: max-age=3600",
                &format!("content-length: {}", body.len()),
            ],
            &body,
        )
    });
    let levee = levee!().backend(&origin.url()).start();
    // levee's clock a minute ahead of the real one: the Date levee appends is then
    // neither the real time (which hyper would add to a response without one) nor, once
    // the clock moves on, levee's time of a later hit.
    levee.advance_clock(Duration::from_secs(60)).await;
    let first = levee.get("/nd").await;
    assert_eq!(first.text(), "no date #1");
    let date = first.header("date").expect("Date on a miss").to_string();
    assert_ne!(date, http_date(SystemTime::now()), "{}", first.summary());
    levee.wait_stored("/nd").await;
    levee.advance_clock(Duration::from_millis(1500)).await;
    // RFC 9110 §6.6.1: a recipient that caches a response without Date appends one with
    // the time it was received; so later hits carry that Date, not the current time.
    let hit = levee.get("/nd").await;
    assert_eq!(hit.x_cache(), "HIT", "{}", hit.summary());
    assert_eq!(hit.header("date"), Some(date.as_str()), "{:?}", hit.headers);
    assert!(hit.age().expect("Age") >= 1, "{}", hit.summary());
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn the_date_of_a_stored_response_is_not_updated() {
    // The origin's Date a minute ahead of the real time, and levee's clock with it: the
    // stored Date is then neither the real time (which hyper would add to a response
    // without one) nor, once levee's clock moves on, levee's time of a later hit.
    let ahead = Duration::from_secs(60);
    let origin = Origin::fixed(move || {
        Reply::text("dated")
            .header("date", &http_date(SystemTime::now() + ahead))
            .header("cache-control", "max-age=3600")
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.advance_clock(ahead).await;
    let first = levee.get("/d").await;
    let date = first.header("date").expect("Date").to_string();
    levee.wait_stored("/d").await;
    levee.advance_clock(Duration::from_millis(1500)).await;
    let hit = levee.get("/d").await;
    assert_eq!(hit.x_cache(), "HIT");
    assert_eq!(hit.header("date"), Some(date.as_str()));
}

#[tokio::test]
async fn an_incomplete_response_is_not_stored() {
    let origin = RawOrigin::start(|path, n| {
        let body = format!("complete #{n}");
        if path == "/short" && n == 1 {
            // Content-Length promises more than is sent before the connection closes.
            raw_response(
                &["cache-control: max-age=3600", "content-length: 1000"],
                "part",
            )
        } else {
            raw_response(
                &[
                    "cache-control: max-age=3600",
                    &format!("content-length: {}", body.len()),
                ],
                &body,
            )
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    // The client sees the body fail or end short; what matters is the next request.
    let mut raw = RawConn::connect(levee.addr()).await;
    raw.write(b"GET /short HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("send the request");
    let got = raw.read_until_closed(Duration::from_secs(10)).await;
    assert!(
        got.is_some(),
        "levee kept the connection of a broken body open"
    );
    levee.wait_fills_done().await;
    // §3.3: "A cache MUST NOT use an incomplete response to answer requests".
    let r = levee.get("/short").await;
    assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "complete #2", "{}", r.summary());
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn fields_named_by_connection_are_not_stored() {
    let origin = RawOrigin::start(|_, n| {
        let body = format!("conn #{n}");
        raw_response(
            &[
                "cache-control: max-age=3600",
                "connection: x-a",
                "connection: x-b",
                "x-a: 1",
                "x-b: 2",
                "x-c: 3",
                &format!("content-length: {}", body.len()),
            ],
            &body,
        )
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/c").await;
    levee.wait_stored("/c").await;
    let r = levee.get("/c").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    // §3.1 / RFC 9110 §7.6.1: connection-specific fields, on every Connection line.
    assert!(!r.has("x-a"), "{:?}", r.headers);
    assert!(!r.has("x-b"), "{:?}", r.headers);
    assert_eq!(r.header("x-c"), Some("3"));
}

#[tokio::test]
async fn a_304_without_date_makes_the_stored_response_fresh_again() {
    let origin = RawOrigin::start(|_, n| {
        if n > 1 {
            // A 304 as php-fpm behind levee would send it: no Date.
            return b"HTTP/1.1 304 Not Modified\r\netag: \"v1\"\r\ncache-control: max-age=1\r\nconnection: close\r\n\r\n".to_vec();
        }
        raw_response(
            &[
                "cache-control: max-age=1",
                "etag: \"v1\"",
                "content-length: 2",
            ],
            "v1",
        )
    });
    let levee = levee!().backend(&origin.url()).start();
    assert_eq!(levee.get("/r").await.text(), "v1");
    levee.wait_stored("/r").await;
    // Past max-age=1, and far enough that the first response's Date is not "recent".
    let later = Duration::from_secs(10);
    levee.advance_clock(later).await;
    let r = levee.get("/r").await;
    assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
    // §4.3.4 and §4.2.3: fresh for max-age from the 304, whose age is its own (no Date:
    // the time it was received), not that of the Date stored with the first response.
    let r = levee.get("/r").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "v1");
    assert_eq!(origin.requests(), 2);
    // And it carries the 304's time of receipt (by levee's clock) as its Date, not the
    // first response's.
    let now = SystemTime::now() + later;
    let recent: Vec<String> = (0..3)
        .map(|s| http_date(now - Duration::from_secs(s)))
        .collect();
    let date = r.header("date").expect("Date");
    assert!(
        recent.iter().any(|d| d == date),
        "Date {date} is not recent: {recent:?}"
    );
}

#[tokio::test]
async fn zero_freshness_with_a_validator_is_stored_and_revalidated() {
    let origin = Origin::start(|r| {
        let cc = match r.path.as_str() {
            "/max-age-0" => "max-age=0",
            // §5.2.2.4 allows using the rest of the response without the named fields;
            // levee treats the qualified form as unqualified (its note: caches commonly
            // do), so the response is revalidated before every reuse.
            "/no-cache-field" => "max-age=3600, no-cache=\"x-private\"",
            _ => "max-age=3600",
        };
        if r.header("if-none-match") == Some("\"v1\"") {
            return Reply::status(304)
                .header("etag", "\"v1\"")
                .header("cache-control", cc);
        }
        Reply::text(format!("{} #{}", r.path, r.n))
            .header("etag", "\"v1\"")
            .header("cache-control", cc)
            .header("x-private", "for the first client")
    });
    let levee = levee!().backend(&origin.url()).start();
    for p in ["/max-age-0", "/no-cache-field"] {
        let first = levee.get(p).await;
        assert_eq!(first.x_cache(), "MISS", "{p}: {}", first.summary());
        levee.wait_fills_done().await;
        for n in 2..=3 {
            let r = levee.get(p).await;
            assert_eq!(r.x_cache(), "REVALIDATED", "{p}: {}", r.summary());
            assert_eq!(r.text(), first.text(), "{p}: the stored body");
            assert_eq!(origin.requests_for(p), n, "{p}");
            assert_eq!(origin.last().header("if-none-match"), Some("\"v1\""));
        }
    }
}

#[tokio::test]
async fn request_directives_account_for_the_age_of_the_stored_response() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(format!("{} #{}", r.path, r.n));
        match r.path.as_str() {
            "/aged" => reply
                .header("cache-control", "max-age=3600")
                .header("age", "1800"),
            "/stale-on-arrival" => reply
                .header("cache-control", "max-age=1500")
                .header("age", "2000"),
            _ => reply.header("cache-control", "max-age=1500"),
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    for p in ["/aged", "/stale-on-arrival", "/fresh"] {
        levee.get(p).await;
    }
    levee.wait_stored("/aged").await;
    levee.wait_stored("/fresh").await;
    // §5.2.1.1: max-age=600 refuses a response 1800 s old; max-age=3000 accepts it.
    let r = levee
        .get_with("/aged", &[("cache-control", "max-age=3000")])
        .await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    let r = levee
        .get_with("/aged", &[("cache-control", "max-age=600")])
        .await;
    assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests_for("/aged"), 2);
    // §5.2.1.3: min-fresh=2000 refuses a response fresh for 1500 s more.
    let r = levee
        .get_with("/fresh", &[("cache-control", "min-fresh=2000")])
        .await;
    assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests_for("/fresh"), 2);
    // §5.2.1.2: max-stale=1000 accepts a response stale by 500 s (stored stale, its Age
    // beyond its max-age)...
    let r = levee
        .get_with("/stale-on-arrival", &[("cache-control", "max-stale=1000")])
        .await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert!(r.age().expect("Age") >= 2000, "{}", r.summary());
    assert_eq!(origin.requests_for("/stale-on-arrival"), 1);
    // ...and nothing else does.
    let r = levee.get("/stale-on-arrival").await;
    assert_ne!(r.x_cache(), "STALE", "{}", r.summary());
    assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
}

#[tokio::test]
async fn authorization_always_passes_even_when_the_response_allows_sharing() {
    let origin = Origin::start(|r| {
        Reply::text(format!("#{}", r.n)).header("cache-control", "public, s-maxage=3600")
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    // §3.5 lets a shared cache store a response to a request with Authorization when it
    // says public, s-maxage or must-revalidate. levee deliberately never does: such
    // requests pass and their responses are never stored (nor answered from the cache).
    for n in 1..=2 {
        let r = levee.get_with("/a", &[("authorization", "Bearer x")]).await;
        assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
        assert_eq!(r.reason(), "session-or-authorization; unproven");
        assert_eq!(origin.requests(), n);
    }
    let r = levee.get("/a").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
}

#[tokio::test]
async fn expires_without_date_is_relative_to_the_time_of_receipt() {
    let origin = RawOrigin::start(|path, n| {
        let body = format!("{path} #{n}");
        let expires = match path {
            "/future" => http_date(SystemTime::now() + Duration::from_secs(3600)),
            _ => http_date(SystemTime::now() - Duration::from_secs(3600)),
        };
        raw_response(
            &[
                &format!("expires: {expires}"),
                &format!("content-length: {}", body.len()),
            ],
            &body,
        )
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/future").await;
    levee.wait_stored("/future").await;
    let r = levee.get("/future").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    levee.get("/past").await;
    levee.wait_fills_done().await;
    let r = levee.get("/past").await;
    assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests(), 3);
}
