//! Glob matchers for session-cookie names and never-cache paths.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::ConfigError;

fn build(
    option: &'static str,
    patterns: &[String],
    case_insensitive: bool,
) -> Result<GlobSet, ConfigError> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let glob = GlobBuilder::new(p)
            .case_insensitive(case_insensitive)
            .literal_separator(false)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                ConfigError::invalid(option, format!("`{p}` is not a glob pattern: {e}"))
            })?;
        b.add(glob);
    }
    b.build()
        .map_err(|e| ConfigError::invalid(option, e.to_string()))
}

/// Which cookie names belong to a session. Matching ignores case: a false positive
/// only costs a cache pass, a false negative could share a private page.
///
/// Visitor cookies (a preset's or `anonymous.visitor_cookies`) are the exception named
/// by an application's own behaviour: per-visitor decoration such as MoniWiki's page
/// trail or gnuboard's visit counter, set on anonymous pages and never a login. They
/// are never a session, whatever glob of the session list they also match.
#[derive(Debug, Clone)]
pub struct CookieMatcher {
    set: GlobSet,
    patterns: Vec<String>,
    visitor: GlobSet,
    visitor_patterns: Vec<String>,
}

impl Default for CookieMatcher {
    /// Matches nothing.
    fn default() -> Self {
        CookieMatcher {
            set: GlobSet::empty(),
            patterns: Vec::new(),
            visitor: GlobSet::empty(),
            visitor_patterns: Vec::new(),
        }
    }
}

impl CookieMatcher {
    pub fn new(patterns: &[String]) -> Result<Self, ConfigError> {
        Ok(CookieMatcher {
            set: build("anonymous.session_cookies", patterns, true)?,
            patterns: patterns.to_vec(),
            visitor: GlobSet::empty(),
            visitor_patterns: Vec::new(),
        })
    }

    /// The same, with these visitor cookies (exact names or globs).
    pub fn with_visitors(self, patterns: &[String]) -> Result<Self, ConfigError> {
        Ok(CookieMatcher {
            visitor: build("anonymous.visitor_cookies", patterns, true)?,
            visitor_patterns: patterns.to_vec(),
            ..self
        })
    }

    pub fn is_session(&self, name: &str) -> bool {
        !self.is_visitor(name) && self.set.is_match(name)
    }

    /// A per-visitor cookie: dropped from a stored page's `Set-Cookie`, never a reason
    /// for a request to pass, never learnt as a session.
    pub fn is_visitor(&self, name: &str) -> bool {
        !self.visitor_patterns.is_empty() && self.visitor.is_match(name)
    }

    pub fn visitor_patterns(&self) -> &[String] {
        &self.visitor_patterns
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// Paths (matched against `path?query`) that are never cached nor stripped of cookies.
#[derive(Debug, Clone)]
pub struct PathMatcher {
    set: GlobSet,
    patterns: Vec<String>,
}

impl PathMatcher {
    pub fn new(patterns: &[String]) -> Result<Self, ConfigError> {
        Ok(PathMatcher {
            set: build("anonymous.pass_paths", patterns, false)?,
            patterns: patterns.to_vec(),
        })
    }

    pub fn is_match(&self, path_and_query: &str) -> bool {
        !self.patterns.is_empty() && self.set.is_match(path_and_query)
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}
