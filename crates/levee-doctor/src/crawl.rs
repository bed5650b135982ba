//! Which pages to audit beyond those named: same-host links (`<a href>`) of the pages
//! fetched, in the order found, skipping what `robots.txt` disallows and what is not a
//! page (images, styles, scripts, feeds).

use crate::fetch::Url;

/// The links of `html` (read from `base`) to pages of the same host and port, without
/// fragments, in order, without repeats.
pub fn links(base: &Url, html: &str) -> Vec<Url> {
    let mut out: Vec<Url> = Vec::new();
    let lower = html.to_ascii_lowercase();
    let mut at = 0;
    while let Some(i) = lower[at..].find("<a ") {
        let start = at + i;
        let end = lower[start..].find('>').map_or(lower.len(), |e| start + e);
        at = end;
        let tag = &html[start..end];
        let Some(href) = attribute(tag, "href") else {
            continue;
        };
        let Some(url) = resolve(base, &decode_entities(&href)) else {
            continue;
        };
        if is_page(&url.path) && !out.contains(&url) {
            out.push(url);
        }
    }
    out
}

/// The value of `name="..."` (or single-quoted, or bare) in one tag.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    loop {
        let i = from + lower[from..].find(name)?;
        from = i + name.len();
        let before = lower[..i].chars().next_back();
        if !before.is_some_and(char::is_whitespace) {
            continue;
        }
        let rest = tag[from..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else {
            continue;
        };
        let rest = rest.trim_start();
        return Some(match rest.chars().next()? {
            q @ ('"' | '\'') => rest[1..].split(q).next()?.to_string(),
            _ => rest
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()?
                .to_string(),
        });
    }
}

fn decode_entities(s: &str) -> String {
    s.replace("&amp;", "&")
        .replace("&#038;", "&")
        .replace("&#38;", "&")
}

/// `href` read from `base`: absolute, scheme-relative, rooted or relative; `None` for
/// another host or scheme (mailto:, javascript:, or https: from an http: site).
pub fn resolve(base: &Url, href: &str) -> Option<Url> {
    let href = href.trim();
    let href = href.split('#').next().unwrap_or("");
    if href.is_empty() {
        return None;
    }
    if let Some(rest) = href.strip_prefix("//") {
        return same_site(base, &format!("{}://{rest}", base.scheme()));
    }
    if href.starts_with("http://") || href.starts_with("https://") {
        return same_site(base, href);
    }
    if href.contains(':') && !href.starts_with('/') && !href.starts_with('?') {
        // Another scheme, or a colon before any slash: mailto:, https:, javascript:.
        let colon = href.find(':').unwrap_or(0);
        if !href[..colon].contains('/') && !href[..colon].contains('?') {
            return None;
        }
    }
    let path = if href.starts_with('/') {
        href.to_string()
    } else if href.starts_with('?') {
        let p = base.path.split('?').next().unwrap_or("/");
        format!("{p}{href}")
    } else {
        let p = base.path.split('?').next().unwrap_or("/");
        let dir = &p[..p.rfind('/').map_or(0, |i| i + 1)];
        format!("{dir}{href}")
    };
    Some(base.with_path(&normalize(&path)))
}

fn same_site(base: &Url, absolute: &str) -> Option<Url> {
    let u = Url::parse(absolute).ok()?;
    (u.tls == base.tls && u.host == base.host && u.port == base.port)
        .then(|| base.with_path(&normalize(&u.path)))
}

/// Removes `.` and `..` segments of the path (the query is kept as is).
fn normalize(path: &str) -> String {
    let (p, q) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut segments: Vec<&str> = Vec::new();
    for s in p.split('/').skip(1) {
        match s {
            "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = format!("/{}", segments.join("/"));
    if p.ends_with("/.") || p.ends_with("/..") {
        out.push('/');
    }
    if let Some(q) = q {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// Not an image, style, script, archive or feed: what a visitor reads.
fn is_page(path: &str) -> bool {
    let p = path.split('?').next().unwrap_or("").to_ascii_lowercase();
    const NOT_PAGES: &[&str] = &[
        ".css", ".js", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".webp", ".pdf", ".zip",
        ".gz", ".xml", ".rss", ".mp4", ".mp3", ".woff", ".woff2", ".txt",
    ];
    !NOT_PAGES.iter().any(|e| p.ends_with(e)) && !p.ends_with("/feed/")
}

/// `robots.txt` rules for the doctor: the group for `levee-doctor` if there is one,
/// else `*`; the longest matching rule wins, `Allow` on a tie.
/// (allow, path pattern) in the file's order.
type Rules = Vec<(bool, String)>;

#[derive(Debug, Default)]
pub struct Robots {
    rules: Rules,
}

impl Robots {
    pub fn parse(text: &str) -> Robots {
        // (user agents, rules) per group.
        let mut groups: Vec<(Vec<String>, Rules)> = Vec::new();
        let mut in_agents = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((field, v)) = line.split_once(':') else {
                continue;
            };
            let (field, v) = (field.trim().to_ascii_lowercase(), v.trim().to_string());
            match field.as_str() {
                "user-agent" => {
                    if !in_agents || groups.is_empty() {
                        groups.push((Vec::new(), Vec::new()));
                    }
                    in_agents = true;
                    if let Some(g) = groups.last_mut() {
                        g.0.push(v.to_ascii_lowercase());
                    }
                }
                "allow" | "disallow" => {
                    in_agents = false;
                    if let Some(g) = groups.last_mut() {
                        if !v.is_empty() {
                            g.1.push((field == "allow", v));
                        }
                    }
                }
                _ => {}
            }
        }
        let pick = |name: &str| groups.iter().find(|g| g.0.iter().any(|a| a == name));
        let rules = pick("levee-doctor")
            .or_else(|| pick("*"))
            .map(|g| g.1.clone())
            .unwrap_or_default();
        Robots { rules }
    }

    /// May `path` (path and query) be fetched?
    pub fn allows(&self, path: &str) -> bool {
        let mut best: Option<(usize, bool)> = None;
        for (allow, rule) in &self.rules {
            if matches(rule, path) {
                let len = rule.len();
                if best.is_none_or(|(l, a)| len > l || (len == l && *allow && !a)) {
                    best = Some((len, *allow));
                }
            }
        }
        best.is_none_or(|(_, allow)| allow)
    }
}

/// A robots.txt path pattern: a prefix, with `*` for any run and a final `$` for the end.
fn matches(rule: &str, path: &str) -> bool {
    let (rule, anchored) = match rule.strip_suffix('$') {
        Some(r) => (r, true),
        None => (rule, false),
    };
    let mut parts = rule.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = path.strip_prefix(first) else {
        return false;
    };
    let mut pieces: Vec<&str> = parts.collect();
    let last = if anchored { pieces.pop() } else { None };
    for p in pieces {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    match (anchored, last) {
        (true, Some(l)) => rest.ends_with(l),
        (true, None) => rest.is_empty(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("http://site.test/blog/post?x=1").unwrap()
    }

    #[test]
    fn links_of_the_same_site_are_resolved_and_others_left() {
        let html = r#"<a href="/a">A</a> <A class=x HREF='b?c=1&amp;d=2#top'>
            <a href="http://site.test/c/../d">d</a> <a href="http://other.test/">o</a>
            <a href="mailto:x@y">m</a> <a href="/style.css">s</a> <a href="/a">again</a>
            <a href="//site.test/e">e</a> <a href="?page=2">p</a>"#;
        let paths: Vec<String> = links(&base(), html).into_iter().map(|u| u.path).collect();
        assert_eq!(
            paths,
            ["/a", "/blog/b?c=1&d=2", "/d", "/e", "/blog/post?page=2"]
        );
    }

    #[test]
    fn robots_txt_longest_rule_wins() {
        let r = Robots::parse(
            "User-agent: Googlebot\nDisallow: /\n\nUser-agent: *\nDisallow: /wp-admin/\nAllow: /wp-admin/admin-ajax.php\nDisallow: /*?replytocom=\nDisallow: /*.pdf$\n",
        );
        assert!(r.allows("/"));
        assert!(!r.allows("/wp-admin/edit.php"));
        assert!(r.allows("/wp-admin/admin-ajax.php"));
        assert!(!r.allows("/post?replytocom=3"));
        assert!(!r.allows("/a.pdf"));
        assert!(r.allows("/a.pdf?x"));
        assert!(Robots::parse("").allows("/x"));
        assert!(!Robots::parse("User-agent: levee-doctor\nDisallow: /\n").allows("/x"));
    }
}
