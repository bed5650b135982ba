//! MediaWiki as its users drive it: the API's login, CSRF token and edit, the pages this
//! benchmark writes, and the uncacheable URLs a crawler asks for.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use serde_json::Value;

use super::http::{form, urlencode, Conn, Failure, Jar, Reply};

pub const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
pub const EDITOR_PASSWORD: &str = "storm-editor-secret-7391";
/// The account whose one session the `replay` crawlers share (created by `setup` beside
/// the editors', with their password; logged in before the clock starts).
pub const REPLAYED_ACCOUNT: &str = "Storm crawler";
/// Special:UserLogin as its form posts to it (the `login-flood` crawlers' target).
pub const LOGIN_PATH: &str = "/index.php?title=Special:UserLogin&returnto=Main_Page";

/// Words for the pages' text and the crawlers' searches.
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

    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len() as u64) as usize]
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

/// The title of page `i` (0-based), as it appears in URLs.
pub fn title(i: usize) -> String {
    format!("Storm_page_{}", i + 1)
}

pub fn editor_name(i: usize) -> String {
    format!("Storm editor {}", i + 1)
}

/// An article of about 10 KiB of wikitext: paragraphs of words, links to the other
/// pages (for Special:WhatLinksHere), and `marker` at the end (what an edit changes).
pub fn page_text(i: usize, pages: usize, marker: &str) -> String {
    let mut rng = Rng::new(i as u64);
    let mut s = format!(
        "'''Storm page {}''' is an article about the weather.\n",
        i + 1
    );
    for section in 0..6 {
        s.push_str(&format!("\n== Section {} ==\n", section + 1));
        for _ in 0..4 {
            for _ in 0..60 {
                s.push_str(rng.word());
                s.push(' ');
            }
            let other = rng.below(pages as u64) as usize;
            s.push_str(&format!("See [[Storm page {}]].\n\n", other + 1));
        }
    }
    s.push_str(&format!("\nLast change: {marker}\n"));
    s
}

/// A path a crawler asks for: history at some offset, an old revision, a diff, recent
/// changes, what links here, a full-text search. Each one a different URL, none a page
/// view a cache may keep.
pub fn crawler_path(rng: &mut Rng, pages: usize, max_rev: u64) -> String {
    let page = title(rng.below(pages as u64) as usize);
    let limit = rng.pick(&[20, 50, 100, 250, 500]);
    // Within the wiki's life (this run's last half hour): an empty RecentChanges answers
    // 404, a history offset before the first edit an empty list.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let stamp = mw_timestamp(now.saturating_sub(rng.below(1800)));
    let rev = 1 + rng.below(max_rev);
    match rng.below(6) {
        0 => format!("/index.php?title={page}&action=history&offset={stamp}&limit={limit}"),
        1 => format!("/index.php?oldid={rev}"),
        2 => format!("/index.php?diff=prev&oldid={rev}"),
        3 => format!(
            "/index.php?title=Special:RecentChanges&days={}&limit={limit}&hidebots={}&from={stamp}",
            rng.pick(&[1, 3, 7, 14, 30, 90]),
            rng.below(2)
        ),
        4 => format!("/index.php?title=Special:WhatLinksHere/{page}&limit={limit}"),
        _ => format!(
            "/index.php?search={}+{}&fulltext=1&offset={}",
            rng.word(),
            rng.word(),
            20 * rng.below(5)
        ),
    }
}

/// A page view a cache may keep, made a new URL by a query parameter the wiki ignores:
/// what a crawler (or a cache-busting bot) asks for to get past a cache.
pub fn busting_path(rng: &mut Rng, pages: usize) -> String {
    let page = title(rng.below(pages as u64) as usize);
    format!("/index.php?title={page}&x={:016x}", rng.next())
}

/// A made-up session id as MediaWiki writes its own: 32 characters of base 32
/// (`0-9a-v`), here never given out by the wiki.
pub fn made_up_session_id(rng: &mut Rng) -> String {
    const DIGITS: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    (0..32)
        .map(|_| char::from(DIGITS[rng.below(32) as usize]))
        .collect()
}

/// The fields Special:UserLogin's form posts, with a wrong password and a login token
/// made up too (no cookie jar: the wiki never gave this client one).
pub fn wrong_login_form(rng: &mut Rng, user: &str) -> Bytes {
    let password = format!("guess-{:08x}", rng.next() as u32);
    let token = format!("{:016x}{:016x}+\\", rng.next(), rng.next());
    form(&[
        ("title", "Special:UserLogin"),
        ("wpName", user),
        ("wpPassword", &password),
        ("wploginattempt", "Log in"),
        ("wpEditToken", "+\\"),
        ("authAction", "login"),
        ("force", ""),
        ("wpLoginToken", &token),
    ])
}

/// MediaWiki's timestamp (`YYYYMMDDHHMMSS`, UTC) of a Unix time.
fn mw_timestamp(unix: u64) -> String {
    let (days, secs) = (unix / 86_400, unix % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (no negative dates).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}{:02}{:02}{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// A crawler's source address: 127.1.0.1 onwards, each in its own /24 and none in
/// 127.0.0.0/24, where the people are.
pub fn crawler_ip(i: usize) -> IpAddr {
    let i = i as u32;
    IpAddr::V4(Ipv4Addr::new(
        127,
        1 + (i / 256 % 254) as u8,
        (i % 256) as u8,
        1 + (i / (256 * 254) % 254) as u8,
    ))
}

/// The `replay` crawlers' source addresses: 127.1.0.1 to 127.1.0.254, one client network
/// (one /24) however many connections.
pub fn one_network_ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 1, 0, 1 + (i % 254) as u8))
}

fn json_of(r: &Reply) -> Result<Value, String> {
    serde_json::from_slice(&r.body).map_err(|e| {
        let mut t = r.text();
        t.truncate(200);
        format!("HTTP {}: not JSON ({e}): {t:?}", r.status)
    })
}

/// A logged-in (or anonymous) user of the wiki: one connection and their cookies.
pub struct Session {
    pub conn: Conn,
    pub jar: Jar,
    pub csrf: String,
}

impl Session {
    pub fn new(target: SocketAddr, timeout: Duration) -> Session {
        Session {
            conn: Conn::new(target, LOCALHOST, timeout),
            jar: Jar::default(),
            csrf: String::new(),
        }
    }

    /// A GET with the session's cookies; the reply's cookies kept.
    pub async fn get(&mut self, path: &str) -> Result<Reply, String> {
        let r = self
            .conn
            .get(path, &self.jar.header())
            .await
            .map_err(|e| format!("GET {path}: {e:?}"))?;
        self.jar.keep(&r.headers);
        Ok(r)
    }

    /// A POST of `fields` to api.php with the session's cookies.
    pub async fn api_post(&mut self, fields: &[(&str, &str)]) -> Result<Reply, Failure> {
        let mut headers = self.jar.header();
        headers.push((
            "content-type",
            "application/x-www-form-urlencoded".to_string(),
        ));
        let r = self
            .conn
            .send(Method::POST, "/api.php", &headers, form(fields))
            .await?;
        self.jar.keep(&r.headers);
        Ok(r)
    }

    async fn api_post_or(&mut self, fields: &[(&str, &str)]) -> Result<Reply, String> {
        self.api_post(fields)
            .await
            .map_err(|e| format!("POST api.php: {e:?}"))
    }

    async fn token(&mut self, kind: &str) -> Result<String, String> {
        let r = self
            .get(&format!(
                "/api.php?action=query&meta=tokens&type={kind}&format=json"
            ))
            .await?;
        let v = json_of(&r)?;
        v["query"]["tokens"][format!("{kind}token")]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("no {kind} token: {v}"))
    }

    /// Logs in with the API's clientlogin, as apps and scripts do, and fetches the CSRF
    /// token edits need (it lasts as long as the session).
    pub async fn login(&mut self, user: &str, password: &str) -> Result<(), String> {
        let token = self.token("login").await?;
        let return_url = format!("http://{}/", self.conn.host());
        let r = self
            .api_post_or(&[
                ("action", "clientlogin"),
                ("format", "json"),
                ("username", user),
                ("password", password),
                ("logintoken", &token),
                ("loginreturnurl", &return_url),
            ])
            .await?;
        let v = json_of(&r)?;
        if v["clientlogin"]["status"] != "PASS" {
            return Err(format!("login of {user:?} refused: {v}"));
        }
        self.csrf = self.token("csrf").await?;
        Ok(())
    }

    /// Saves `text` as `title`; the reply as it came (the caller judges it).
    pub async fn edit(&mut self, title: &str, text: &str) -> Result<Reply, Failure> {
        let csrf = self.csrf.clone();
        self.api_post(&[
            ("action", "edit"),
            ("format", "json"),
            ("title", title),
            ("text", text),
            ("summary", "storm benchmark edit"),
            ("token", &csrf),
        ])
        .await
    }
}

/// Whether an edit reply says the save was stored.
pub fn edit_stored(r: &Reply) -> Result<(), String> {
    let v = json_of(r)?;
    if r.status == 200 && v["edit"]["result"] == "Success" {
        Ok(())
    } else {
        Err(format!("edit refused: HTTP {} {v}", r.status))
    }
}

/// The newest revision id, so that crawlers ask for revisions that exist.
pub async fn max_revision(s: &mut Session) -> Result<u64, String> {
    let r = s
        .get("/api.php?action=query&list=recentchanges&rcprop=ids&rclimit=1&format=json")
        .await?;
    let v = json_of(&r)?;
    v["query"]["recentchanges"][0]["revid"]
        .as_u64()
        .ok_or_else(|| format!("no revid in {v}"))
}

/// Before a run: the admin creates the editors' accounts and the replayed one
/// ([`REPLAYED_ACCOUNT`]), and `pages` pages, each saved `revisions` times (histories and
/// diffs to crawl).
pub async fn setup(
    target: SocketAddr,
    timeout: Duration,
    admin: (&str, &str),
    editors: usize,
    pages: usize,
    revisions: usize,
) -> Result<(), String> {
    let mut s = Session::new(target, timeout);
    s.login(admin.0, admin.1).await?;
    let names = (0..editors).map(editor_name);
    for name in names.chain([REPLAYED_ACCOUNT.to_string()]) {
        let token = s.token("createaccount").await?;
        let return_url = format!("http://{}/", s.conn.host());
        let r = s
            .api_post_or(&[
                ("action", "createaccount"),
                ("format", "json"),
                ("username", &name),
                ("password", EDITOR_PASSWORD),
                ("retype", EDITOR_PASSWORD),
                ("createtoken", &token),
                ("createreturnurl", &return_url),
            ])
            .await?;
        let v = json_of(&r)?;
        let status = &v["createaccount"]["status"];
        let exists = v["error"]["code"] == "userexists";
        if status != "PASS" && !exists {
            return Err(format!("creating {name:?} failed: {v}"));
        }
    }
    for rev in 0..revisions.max(1) {
        for p in 0..pages {
            let text = page_text(p, pages, &format!("setup revision {}", rev + 1));
            let r = s
                .edit(&title(p), &text)
                .await
                .map_err(|e| format!("saving {}: {e:?}", title(p)))?;
            edit_stored(&r)?;
        }
    }
    Ok(())
}

/// Whether `body` shows `marker`.
pub fn shows(body: &Bytes, marker: &str) -> bool {
    body.windows(marker.len()).any(|w| w == marker.as_bytes())
}

/// The page path readers and editors view: as the wiki's own links write it.
pub fn page_path(title: &str) -> String {
    format!("/index.php?title={}", urlencode(title))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_addresses() {
        assert_eq!(mw_timestamp(0), "19700101000000");
        assert_eq!(mw_timestamp(1_700_000_000), "20231114221320");
        assert_eq!(mw_timestamp(951_782_400), "20000229000000");
        assert_eq!(crawler_ip(0).to_string(), "127.1.0.1");
        assert_eq!(crawler_ip(999).to_string(), "127.4.231.1");
        assert_eq!(one_network_ip(0).to_string(), "127.1.0.1");
        assert_eq!(one_network_ip(254).to_string(), "127.1.0.1");
        let mut rng = Rng::new(1);
        let id = made_up_session_id(&mut rng);
        assert!(
            id.len() == 32
                && id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'v').contains(&b))
        );
        assert!((0..100_000).all(|i| !matches!(crawler_ip(i), IpAddr::V4(a) if a.octets()[1] == 0)));
    }
}
