//! URL list files in siege's format, so lists written for siege work unchanged.
//!
//! ```text
//! # comments start with '#'
//! HOST=127.0.0.1:8080                      variables, used as $(HOST) or ${HOST}
//! http://$(HOST)/index.php
//! $(HOST)/login.php POST user=ann&pw=x     scheme defaults to http://
//! http://$(HOST)/upload PUT </tmp/f.json   '<' reads the body from a file
//! ```

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use http::Method;

/// One line of a URL file: where to send what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlEntry {
    /// Absolute URL, variables expanded.
    pub url: String,
    /// GET unless the line names another method.
    pub method: Method,
    /// The data after the method, if any (sent form-encoded, as siege does).
    pub body: Option<Bytes>,
}

/// Reads and parses a URL file; `<file` bodies are resolved next to it.
pub fn read_url_file(path: &Path) -> Result<Vec<UrlEntry>> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read URL file {}: check the path given to -f",
            path.display()
        )
    })?;
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    parse_url_file(&text, base).with_context(|| format!("in URL file {}", path.display()))
}

/// Parses URL-file text; `base` is where relative `<file` bodies are looked up.
pub fn parse_url_file(text: &str, base: &Path) -> Result<Vec<UrlEntry>> {
    let mut vars: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((name, value)) = variable(line) {
            let value = expand(value, &vars).map_err(|e| anyhow!("line {lineno}: {e}"))?;
            vars.insert(name.to_string(), value);
            continue;
        }
        let line = expand(line, &vars).map_err(|e| anyhow!("line {lineno}: {e}"))?;
        out.push(parse_line(&line, base).map_err(|e| anyhow!("line {lineno}: {e}"))?);
    }
    if out.is_empty() {
        bail!("no URLs found (one URL per line; lines starting with # are comments)");
    }
    Ok(out)
}

fn parse_line(line: &str, base: &Path) -> Result<UrlEntry> {
    let (url, rest) = split_word(line);
    let url = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    let rest = rest.trim_start();
    if rest.is_empty() {
        return Ok(UrlEntry {
            url,
            method: Method::GET,
            body: None,
        });
    }
    let (word, data) = split_word(rest);
    let method = match word.to_ascii_uppercase().as_str() {
        "GET" => Method::GET,
        "POST" => Method::POST,
        "PUT" => Method::PUT,
        "PATCH" => Method::PATCH,
        "DELETE" => Method::DELETE,
        "HEAD" => Method::HEAD,
        "OPTIONS" => Method::OPTIONS,
        _ => {
            bail!("expected 'URL', 'URL POST data' or 'URL PUT data', found '{word}' after the URL")
        }
    };
    let data = data.trim();
    let body = if data.is_empty() {
        None
    } else if let Some(file) = data.strip_prefix('<') {
        let file = base.join(file.trim());
        let bytes = std::fs::read(&file)
            .with_context(|| format!("cannot read body file {}", file.display()))?;
        Some(Bytes::from(bytes))
    } else {
        Some(Bytes::copy_from_slice(data.as_bytes()))
    };
    Ok(UrlEntry { url, method, body })
}

fn split_word(s: &str) -> (&str, &str) {
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

/// `NAME=value` with a shell-like name and no URL before it.
fn variable(line: &str) -> Option<(&str, &str)> {
    let (name, value) = line.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    if !(first.is_ascii_alphabetic() || first == '_')
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return None;
    }
    Some((name, value.trim()))
}

fn expand(s: &str, vars: &HashMap<String, String>) -> Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let close = match after.chars().next() {
            Some('(') => ')',
            Some('{') => '}',
            _ => {
                out.push('$');
                rest = after;
                continue;
            }
        };
        let end = after
            .find(close)
            .ok_or_else(|| anyhow!("unclosed variable reference in '{s}'"))?;
        let name = &after[1..end];
        let value = vars.get(name).ok_or_else(|| {
            anyhow!("variable '{name}' is used before it is defined (NAME=value)")
        })?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_siege_format() {
        let text = "\
# a comment
HOST=127.0.0.1:8080

http://$(HOST)/index.html
${HOST}/login.php POST user=ann&pw=secret
http://example.test/a put {\"x\": 1}
   # indented comment
http://example.test/b HEAD
";
        let got = parse_url_file(text, Path::new(".")).unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].url, "http://127.0.0.1:8080/index.html");
        assert_eq!(got[0].method, Method::GET);
        assert_eq!(got[0].body, None);
        assert_eq!(got[1].url, "http://127.0.0.1:8080/login.php");
        assert_eq!(got[1].method, Method::POST);
        assert_eq!(got[1].body.as_deref(), Some(&b"user=ann&pw=secret"[..]));
        assert_eq!(got[2].method, Method::PUT);
        assert_eq!(got[2].body.as_deref(), Some(&b"{\"x\": 1}"[..]));
        assert_eq!(got[3].method, Method::HEAD);
    }

    #[test]
    fn body_from_file() {
        let dir = std::env::temp_dir().join(format!("levee-urls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("body.txt"), b"a=1&b=2").unwrap();
        let got = parse_url_file("http://h/x POST <body.txt\n", &dir).unwrap();
        assert_eq!(got[0].body.as_deref(), Some(&b"a=1&b=2"[..]));
        let err = parse_url_file("http://h/x POST <missing.txt\n", &dir).unwrap_err();
        assert!(format!("{err:#}").contains("line 1"), "{err:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_the_line() {
        let err = parse_url_file("http://h/\nhttp://h/x FROB data\n", Path::new(".")).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("line 2") && msg.contains("FROB"), "{msg}");
        let err = parse_url_file("http://$(NOPE)/\n", Path::new(".")).unwrap_err();
        assert!(format!("{err:#}").contains("NOPE"));
        let err = parse_url_file("# only comments\n\n", Path::new(".")).unwrap_err();
        assert!(format!("{err:#}").contains("no URLs"));
    }
}
