//! gnuboard5 and Rhymix as they answer, replayed (issue 34). The response heads are read
//! from the recordings of the real applications in benchmarks/seedapps/recordings/
//! (gnuboard5 at 0b6f081f, Rhymix at 8b62fb0e, PHP 8.2 behind nginx, recorded by
//! benchmarks/seedapps/{gnuboard5,rhymix}.sh: headers, cookie names and values, the
//! login and logout exchanges); only the session ids are made fresh per visitor and the
//! bodies are stand-ins that say whose page it is. Through levee with each preset:
//! new and returning anonymous visitors get stored pages, the member's login holds and
//! their pages are theirs, nobody else sees them.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use levee_test::{levee, Levee, Origin, Recorded, Reply, Req, Resp};

/// One recorded exchange: its number, and the response's status and fields.
struct Exchange {
    id: String,
    status: u16,
    fields: Vec<(String, String)>,
}

/// The exchanges of a recording. gnuboard5.txt holds them as "## (N) title" with the
/// request and response in a fenced block; rhymix.txt as "== (N) title" with "> " and
/// "< " lines.
fn recording(name: &str) -> Vec<Exchange> {
    let path = format!(
        "{}/../../benchmarks/seedapps/recordings/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out: Vec<Exchange> = Vec::new();
    let mut in_response = false;
    let marked_lines = text.contains("\n< ");
    for line in text.lines() {
        if line.starts_with("## (") || line.starts_with("== (") {
            let id = line[4..].split(')').next().unwrap_or_default().to_string();
            out.push(Exchange {
                id,
                status: 0,
                fields: Vec::new(),
            });
            in_response = false;
            continue;
        }
        let Some(ex) = out.last_mut() else { continue };
        let (line, marked) = match line.strip_prefix("< ") {
            Some(l) => (l, true),
            None => (line, false),
        };
        if line.starts_with("HTTP/1.1 ") && ex.status == 0 {
            ex.status = line[9..12].parse().unwrap();
            in_response = true;
        } else if in_response
            && (line.is_empty() || line.starts_with("```") || (marked_lines && !marked))
        {
            in_response = false;
        } else if in_response {
            let (n, v) = line.split_once(": ").unwrap_or_else(|| panic!("{line}"));
            ex.fields.push((n.to_ascii_lowercase(), v.to_string()));
        }
    }
    out
}

fn exchange<'a>(all: &'a [Exchange], id: &str) -> &'a Exchange {
    all.iter()
        .find(|e| e.id == id)
        .unwrap_or_else(|| panic!("no exchange ({id})"))
}

/// The value the recorded response sets for cookie `name`.
fn set_cookie_value(ex: &Exchange, name: &str) -> String {
    let prefix = format!("{name}=");
    ex.fields
        .iter()
        .filter(|(n, _)| n == "set-cookie")
        .find_map(|(_, v)| v.strip_prefix(prefix.as_str()))
        .and_then(|v| v.split(';').next())
        .unwrap_or_else(|| panic!("exchange ({}) sets no {name}", ex.id))
        .to_string()
}

/// The recorded response, with a fresh session id and a stand-in body.
fn replay(ex: &Exchange, n: usize, body: String) -> Reply {
    let mut reply = Reply::status(ex.status).body(body);
    for (name, value) in &ex.fields {
        if matches!(
            name.as_str(),
            "server" | "date" | "transfer-encoding" | "connection" | "content-length"
        ) {
            continue;
        }
        let value = match value.strip_prefix("PHPSESSID=") {
            Some(rest) if name == "set-cookie" && !rest.starts_with("deleted") => {
                let tail = rest.split_once(';').map_or("", |(_, t)| t);
                format!("PHPSESSID=fresh{n};{tail}")
            }
            _ => value.clone(),
        };
        reply = reply.header(name, &value);
    }
    reply
}

/// What one application is, for the replay and the test.
struct App {
    preset: &'static str,
    pages: [&'static str; 2],
    first_visit: &'static str,
    login: Req,
    logout: &'static str,
    mark: &'static str,
}

/// A browser's cookies: `Set-Cookie` applied, deletions too.
#[derive(Default, Clone)]
struct Jar(BTreeMap<String, String>);

impl Jar {
    fn take(&mut self, r: &Resp) {
        for field in r.header_all("set-cookie") {
            let pair = field.split(';').next().unwrap_or_default();
            let Some((n, v)) = pair.split_once('=') else {
                continue;
            };
            let deleted = v.is_empty() || v == "deleted" || field.contains("Max-Age=0");
            match deleted {
                true => self.0.remove(n.trim()),
                false => self.0.insert(n.trim().to_string(), v.to_string()),
            };
        }
    }

    fn header(&self) -> String {
        let pairs: Vec<String> = self.0.iter().map(|(n, v)| format!("{n}={v}")).collect();
        pairs.join("; ")
    }
}

async fn get(levee: &Levee, path: &str, jar: &Jar) -> Resp {
    let mut req = Req::get(path);
    if !jar.0.is_empty() {
        req = req.header("cookie", &jar.header());
    }
    req.send(levee).await
}

/// The same story for each application, through levee with its preset.
async fn story(app: App, origin: &Origin) {
    let levee = levee!()
        .args(&["--backend", &origin.url(), "--preset", app.preset])
        .debug_headers()
        .start();
    let nobody = Jar::default();
    // New visitors: stored pages, none of the application's cookies.
    for page in app.pages {
        let first = get(&levee, page, &nobody).await;
        assert_eq!(first.status, 200, "{}", first.summary());
        assert!(
            first.header("set-cookie").is_none(),
            "{page}: {:?}",
            first.headers
        );
        levee.wait_stored(page).await;
        let again = get(&levee, page, &nobody).await;
        assert_eq!(again.x_cache(), "HIT", "{page}: {}", again.summary());
    }
    // A returning visitor: every cookie the login form gave them, sent back.
    let mut visitor = Jar::default();
    let form = get(&levee, app.first_visit, &visitor).await;
    assert_eq!(form.x_cache(), "PASS", "{}", form.summary());
    visitor.take(&form);
    assert!(visitor.0.contains_key("PHPSESSID"), "{:?}", form.headers);
    for page in app.pages {
        let back = get(&levee, page, &visitor).await;
        assert_eq!(
            back.x_cache(),
            "HIT",
            "{page} with {}: {}",
            visitor.header(),
            back.summary()
        );
        assert!(!back.text().contains(app.mark));
    }
    // The login, from that visitor's browser.
    let mut member = visitor.clone();
    let login = app
        .login
        .header("cookie", &member.header())
        .send(&levee)
        .await;
    assert_eq!(login.status, 302, "{}", login.summary());
    member.take(&login);
    let own = get(&levee, app.pages[0], &member).await;
    assert_eq!(
        own.x_cache(),
        "PASS",
        "{}: {}",
        member.header(),
        own.summary()
    );
    assert!(own.text().contains(app.mark), "{}", own.summary());
    // Logged in for good: the page after, also once the application renews the session.
    member.take(&own);
    let next = get(&levee, app.pages[1], &member).await;
    assert!(next.text().contains(app.mark), "{}", next.summary());
    // Nobody else: the stored page, no member cookie.
    for jar in [&nobody, &visitor] {
        let r = get(&levee, app.pages[0], jar).await;
        assert!(!r.text().contains(app.mark), "{}", r.summary());
        for v in member.0.values().filter(|v| v.len() >= 16) {
            assert!(!format!("{:?}", r.headers).contains(v.as_str()));
        }
    }
    // The logout (a GET), then what the browser kept: no member page.
    let out = get(&levee, app.logout, &member).await;
    member.take(&out);
    let after = get(&levee, app.pages[0], &member).await;
    assert!(!after.text().contains(app.mark), "{}", after.summary());
    // A session id nobody was given: passes (the application makes it a new session).
    let made_up = Req::get(app.pages[0])
        .header("cookie", "PHPSESSID=leveemadeup0123456789abcd")
        .send(&levee)
        .await;
    assert_eq!(made_up.x_cache(), "PASS", "{}", made_up.summary());
}

fn page(r: &Recorded, member: bool, mark: &str) -> String {
    match member {
        true => format!("{} for the member, {mark}", r.path),
        false => format!("{} for everyone", r.path),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnuboard5_as_recorded() {
    let rec = Arc::new(recording("gnuboard5.txt"));
    const MARK: &str = "/bbs/logout.php\">로그아웃</a>";
    // gnuboard keeps the login in the session (bbs/login_check.php): the ids logged in.
    let members: Arc<Mutex<HashSet<String>>> = Arc::default();
    let m = members.clone();
    let origin = Origin::start(move |r| {
        let sid = r.cookie("PHPSESSID");
        let member = sid.as_ref().is_some_and(|s| m.lock().unwrap().contains(s));
        let id = match (r.method.as_str(), r.path.as_str(), sid.is_some()) {
            ("POST", "/bbs/login_check.php", _) => "5",
            (_, "/bbs/logout.php", _) => "7",
            (_, "/bbs/login.php", false) => "4b",
            (_, "/bbs/login.php", true) => "4",
            (_, "/bbs/board.php", true) => "3b",
            // A new visitor's post page: the session of (1), the board cookie of (3).
            (_, "/bbs/board.php", false) => "3",
            (_, _, false) => "1",
            (_, _, true) if member => "6",
            _ => "2",
        };
        let ex = exchange(&rec, id);
        let mut reply = replay(ex, r.n, page(r, member && id != "7", MARK));
        if id == "3" {
            for (n, v) in &exchange(&rec, "1").fields {
                if n == "set-cookie" {
                    reply = reply.header(
                        n,
                        &v.replace("nc8j4mog2bitcaejv4op804asl", &format!("fresh{}", r.n)),
                    );
                }
            }
        }
        if id == "5" {
            // The session id the login gave (regenerated), kept as recorded.
            m.lock().unwrap().insert(set_cookie_value(ex, "PHPSESSID"));
            reply = Reply::status(302).header("location", "/");
            for (n, v) in &ex.fields {
                if n == "set-cookie" {
                    reply = reply.header(n, v);
                }
            }
        }
        if id == "7" {
            if let Some(s) = &sid {
                m.lock().unwrap().remove(s);
            }
        }
        reply
    });
    let app = App {
        preset: "gnuboard",
        pages: ["/", "/bbs/board.php?bo_table=free&wr_id=2"],
        first_visit: "/bbs/login.php",
        login: Req::post(
            "/bbs/login_check.php",
            "url=%2F&mb_id=admin&mb_password=levee-admin-1",
        )
        .header("content-type", "application/x-www-form-urlencoded"),
        logout: "/bbs/logout.php",
        mark: MARK,
    };
    story(app, &origin).await;
    assert!(members.lock().unwrap().is_empty(), "logged out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rhymix_as_recorded() {
    let rec = Arc::new(recording("rhymix.txt"));
    const MARK: &str = "act=dispMemberLogout";
    // Rhymix says who is logged in with rx_login_status (common/framework/Session.php):
    // "none", or a hash of the member's.
    let hash = set_cookie_value(exchange(&rec, "6"), "rx_login_status");
    let origin = Origin::start(move |r| {
        let member = r.cookie("rx_login_status").as_deref() == Some(hash.as_str());
        let query = r.uri.split_once('?').map_or("", |(_, q)| q);
        let id = if r.method == "POST" {
            "6"
        } else if query.contains("act=dispMemberLogout") {
            "8"
        } else if member {
            "7"
        } else if r.cookie("PHPSESSID").is_none() {
            "1"
        } else {
            "2"
        };
        replay(exchange(&rec, id), r.n, page(r, member && id != "8", MARK))
    });
    let app = App {
        preset: "rhymix",
        pages: ["/board", "/board/72"],
        first_visit: "/index.php?mid=member&act=dispMemberLoginForm",
        login: Req::post(
            "/index.php",
            "act=procMemberLogin&user_id=admin%40example.com&password=levee-admin-1",
        )
        .header("content-type", "application/x-www-form-urlencoded"),
        logout: "/index.php?act=dispMemberLogout",
        mark: MARK,
    };
    story(app, &origin).await;
}
