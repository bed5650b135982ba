//! DNS names as TLS compares them: lowercase, no trailing dot, and a wildcard
//! `*.example.com` standing for exactly one label (`a.example.com`, not `example.com`
//! nor `a.b.example.com`), as RFC 6125 §6.4.3 and browsers have it.

/// A name as the resolver keys it: lowercase, without the trailing dot of an absolute
/// name (clients send `example.com`, configurations may say `example.com.`).
pub(crate) fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The domain a wildcard name stands under: `*.example.com` -> `example.com`. `None` for
/// a name that is not a wildcard, or one too wide to honour (`*.com`, `*`): no
/// certificate authority issues those, and serving them would claim a whole TLD.
pub(crate) fn wildcard_parent(name: &str) -> Option<&str> {
    let parent = name.strip_prefix("*.")?;
    (parent.contains('.') && !parent.contains('*')).then_some(parent)
}

/// The domain under which `name` would be covered by a wildcard: `a.example.com` ->
/// `example.com`. `None` for a single label, which no wildcard covers.
pub(crate) fn parent_of(name: &str) -> Option<&str> {
    let (first, rest) = name.split_once('.')?;
    (!first.is_empty() && !rest.is_empty()).then_some(rest)
}

/// Whether a certificate name (`san`, normalized) covers the name `wanted` (normalized),
/// which may itself be a wildcard: `*.example.com` covers `*.example.com`.
pub(crate) fn covers(san: &str, wanted: &str) -> bool {
    if san == wanted {
        return true;
    }
    match wildcard_parent(san) {
        Some(parent) => !wanted.starts_with('*') && parent_of(wanted) == Some(parent),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_covers_itself_only() {
        assert!(covers("example.com", "example.com"));
        assert!(!covers("example.com", "www.example.com"));
        assert!(!covers("www.example.com", "example.com"));
    }

    #[test]
    fn a_wildcard_covers_one_label_below_its_domain() {
        assert!(covers("*.example.com", "a.example.com"));
        assert!(covers("*.example.com", "*.example.com"));
        assert!(!covers("*.example.com", "example.com"));
        assert!(!covers("*.example.com", "a.b.example.com"));
        assert!(!covers("*.example.com", "aexample.com"));
        assert!(!covers("*.example.com", ".example.com"));
    }

    #[test]
    fn a_wildcard_over_a_top_level_domain_covers_nothing() {
        assert!(!covers("*.com", "example.com"));
        assert_eq!(wildcard_parent("*"), None);
        assert_eq!(wildcard_parent("*.*.example.com"), None);
    }

    #[test]
    fn names_compare_without_case_or_trailing_dot() {
        assert_eq!(normalize("WWW.Example.COM."), "www.example.com");
    }
}
