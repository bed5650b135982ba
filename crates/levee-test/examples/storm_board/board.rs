//! gnuboard5 as its visitors drive it: the pages readers read, the board's write form as
//! a member posts through it, the cookies a member's login left in curl's jar (the login
//! itself is benchmarks/seedapps/gnuboard5.sh's `login_gnuboard5`, run by
//! storm-board.sh through the front before the clock), and the URLs crawlers ask for.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};

use super::http::{form, urlencode, Conn, Failure, Jar, Reply};

pub const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Words for the posts and the crawlers' searches.
const WORDS: &[&str] = &[
    "river", "levee", "flood", "storm", "harbour", "granite", "meadow", "lantern", "copper",
    "orchard", "signal", "tunnel", "willow", "ember", "glacier", "quarry", "beacon", "marsh",
    "falcon", "thistle", "canal", "basalt", "cinder", "prairie", "harvest", "compass", "lichen",
    "anchor", "delta", "spruce", "tide", "furnace",
];

/// A small, fast, seedable generator (SplitMix64): the load needs variety, not secrecy.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A duration in `[lo, hi]`.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_millis() as u64;
        lo + Duration::from_millis(self.below(span + 1))
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len() as u64) as usize]
    }
}

/// Crawler connection `i`'s source address: 127.1.N.1, one client network (/24) each.
pub fn crawler_ip(i: usize) -> IpAddr {
    let i = i as u32;
    IpAddr::V4(Ipv4Addr::new(
        127,
        1 + (i / 256 % 254) as u8,
        (i % 256) as u8,
        1,
    ))
}

/// A made-up PHP session id as Debian's php.ini makes them (26 characters of 5 bits).
pub fn made_up_session_id(rng: &mut Rng) -> String {
    const DIGITS: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    (0..26)
        .map(|_| char::from(DIGITS[rng.below(32) as usize]))
        .collect()
}

/// The board's list: where a new post must show to anonymous readers.
pub fn list_path(board: &str) -> String {
    format!("/bbs/board.php?bo_table={board}")
}

pub fn post_path(board: &str, id: u64) -> String {
    format!("/bbs/board.php?bo_table={board}&wr_id={id}")
}

/// What a crawler searching the site asks for: the site-wide search (bbs/search.php) or
/// the board's own, subject and content, with words no page holds (every URL new).
pub fn search_path(rng: &mut Rng, board: &str) -> String {
    let stx = urlencode(&format!(
        "{} {}{}",
        rng.word(),
        rng.word(),
        rng.below(100_000)
    ));
    let sfl = urlencode("wr_subject||wr_content");
    match rng.below(3) {
        0 => format!("/bbs/search.php?sfl={sfl}&stx={stx}&sop=and&gr_id=&onetable="),
        1 => format!(
            "/bbs/search.php?sfl={sfl}&stx={stx}&sop=or&page={}",
            1 + rng.below(5)
        ),
        _ => format!("/bbs/board.php?bo_table={board}&sfl={sfl}&stx={stx}&sop=and"),
    }
}

/// What a crawler walking member pages asks for: profiles (real and guessed ids), the
/// memo box (members only: gnuboard answers a guest with an alert page), a member's posts.
pub fn member_page_path(rng: &mut Rng, members: &[String]) -> String {
    let id = if !members.is_empty() && rng.below(2) == 0 {
        members[rng.below(members.len() as u64) as usize].clone()
    } else {
        format!("{}{}", rng.word(), rng.below(10_000))
    };
    match rng.below(3) {
        0 => format!("/bbs/profile.php?mb_id={id}"),
        1 => {
            let kind = if rng.below(2) == 0 { "recv" } else { "send" };
            format!("/bbs/memo.php?kind={kind}&page={}", 1 + rng.below(20))
        }
        _ => format!("/bbs/new.php?mb_id={id}&page={}", 1 + rng.below(5)),
    }
}

/// The cookies of a curl cookie jar (Netscape format, as `curl -c` writes it; HttpOnly
/// cookies on `#HttpOnly_` lines), for a member logged in by storm-board.sh.
pub fn read_jar(path: &str) -> Result<Jar, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut headers = HeaderMap::new();
    for line in text.lines() {
        let line = line.strip_prefix("#HttpOnly_").unwrap_or(line);
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() == 7 {
            let v = HeaderValue::from_str(&format!("{}={}", f[5], f[6]))
                .map_err(|_| format!("{path}: a cookie that is no header value"))?;
            headers.append(http::header::SET_COOKIE, v);
        }
    }
    if headers.is_empty() {
        return Err(format!("{path}: no cookie"));
    }
    let mut jar = Jar::default();
    jar.keep(&headers);
    Ok(jar)
}

pub fn shows(body: &Bytes, marker: &str) -> bool {
    !marker.is_empty() && body.windows(marker.len()).any(|w| w == marker.as_bytes())
}

/// A post body of a few lines (plain text: the boards have no editor).
pub fn post_text(rng: &mut Rng, subject: &str) -> String {
    let mut s = format!("{subject}, written during the storm benchmark.\n\n");
    for _ in 0..40 {
        s.push_str(rng.word());
        s.push(' ');
    }
    s
}

/// One request as a browser on this site: the jar's cookies sent, its answer's kept,
/// and reported to `record` (when it started, what came of it).
pub async fn browse(
    conn: &mut Conn,
    jar: &mut Jar,
    method: Method,
    path: &str,
    extra: &[(&str, String)],
    body: Bytes,
    record: &mut (dyn FnMut(Instant, &Result<Reply, Failure>) + Send),
) -> Result<Reply, Failure> {
    let mut headers = jar.header();
    headers.extend(extra.iter().cloned());
    let start = Instant::now();
    let r = conn.send(method, path, &headers, body).await;
    if let Ok(reply) = &r {
        jar.keep(&reply.headers);
    }
    record(start, &r);
    r
}

/// A new post on `board` through the write form, as gnuboard5.sh's `gnuboard5_post`
/// sends it: the form (its `uid`), a token from write_token.php (what common.js asks for
/// on submit), then the multipart post with the form as Referer (write_update.php refuses
/// a post without a same-site Origin or Referer). The new post's id, from the redirect.
pub async fn write_post(
    conn: &mut Conn,
    jar: &mut Jar,
    board: &str,
    subject: &str,
    content: &str,
    record: &mut (dyn FnMut(Instant, &Result<Reply, Failure>) + Send),
) -> Result<u64, String> {
    let write = format!("/bbs/write.php?bo_table={board}");
    let referer = vec![("referer", format!("http://{}{write}", conn.host()))];
    let failed = |what: &str, r: &Result<Reply, Failure>| match r {
        Ok(r) => format!("{what}: HTTP {}", r.status),
        Err(f) => format!("{what}: {f:?}"),
    };
    let r = browse(conn, jar, Method::GET, &write, &[], Bytes::new(), record).await;
    let uid = match &r {
        Ok(page) if page.status == 200 => levee_test::apps::form_value(&page.text(), "uid"),
        _ => None,
    }
    .ok_or_else(|| failed("no write form (uid)", &r))?;
    let mut h = referer.clone();
    h.push(("x-requested-with", "XMLHttpRequest".to_string()));
    h.push((
        "content-type",
        "application/x-www-form-urlencoded".to_string(),
    ));
    let path = "/bbs/write_token.php";
    let body = form(&[("bo_table", board)]);
    let r = browse(conn, jar, Method::POST, path, &h, body, record).await;
    let token = match &r {
        Ok(reply) if reply.status == 200 => {
            serde_json::from_slice::<serde_json::Value>(&reply.body)
                .ok()
                .and_then(|v| v["token"].as_str().map(str::to_string))
                .filter(|t| !t.is_empty())
        }
        _ => None,
    }
    .ok_or_else(|| failed("no token from write_token.php", &r))?;
    let fields = [
        ("token", token.as_str()),
        ("uid", uid.as_str()),
        ("w", ""),
        ("bo_table", board),
        ("wr_id", ""),
        ("sca", ""),
        ("sfl", ""),
        ("stx", ""),
        ("spt", ""),
        ("sst", ""),
        ("sod", ""),
        ("page", ""),
        ("html", ""),
        ("wr_subject", subject),
        ("wr_content", content),
        ("wr_link1", ""),
        ("wr_link2", ""),
    ];
    let (content_type, body) = levee_test::multipart(&fields, &[]);
    let mut h = referer;
    h.push(("content-type", content_type));
    let path = "/bbs/write_update.php";
    let r = browse(conn, jar, Method::POST, path, &h, body.into(), record).await;
    // Accepted: a redirect to the new post (an alert page names what was refused).
    let id = match &r {
        Ok(reply) if (300..400).contains(&reply.status) => reply
            .headers
            .get(http::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .and_then(|l| l.split("wr_id=").nth(1))
            .and_then(|v| v.split(['&', '#']).next())
            .and_then(|v| v.parse().ok()),
        _ => None,
    };
    id.ok_or_else(|| match &r {
        Ok(reply) => {
            // gnuboard's alert page (bbs/alert.php) repeats its message for noscript.
            let text = reply.text();
            let alert = text
                .split("class=\"cbg\">")
                .nth(1)
                .and_then(|s| s.split("</p>").next())
                .unwrap_or("")
                .trim();
            format!("write_update.php: HTTP {} {alert}", reply.status)
        }
        Err(f) => format!("write_update.php: {f:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_ids_and_urls() {
        assert_eq!(crawler_ip(0).to_string(), "127.1.0.1");
        assert_eq!(crawler_ip(63).to_string(), "127.1.63.1");
        let mut rng = Rng::new(1);
        let id = made_up_session_id(&mut rng);
        assert_eq!(id.len(), 26);
        assert_ne!(id, made_up_session_id(&mut rng));
        assert!(search_path(&mut rng, "free").contains("stx="));
        let d = rng.between(Duration::from_secs(5), Duration::from_secs(10));
        assert!(d >= Duration::from_secs(5) && d <= Duration::from_secs(10));
    }
}
