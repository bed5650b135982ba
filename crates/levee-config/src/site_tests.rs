//! `[[site]]` tables: what they inherit, how a host finds its site, what is refused.

use super::*;

fn load(file: &str) -> Result<Settings, ConfigError> {
    let file: Options = toml::from_str(file).unwrap();
    Settings::from_options(file)
}

fn err(file: &str) -> String {
    load(file).unwrap_err().to_string()
}

const TWO_SITES: &str = r#"
    backend = "http://127.0.0.1:9000"
    preset = "wordpress"
    [cache]
    grace = "5m"

    [[site]]
    hosts = ["Example.com.", "www.example.com"]
    backend = "fastcgi+unix:/run/php/php8.2-fpm.sock"
    root = "/"
    preset = ["mediawiki"]
    [site.fastcgi_params]
    MW_CONFIG_FILE = "/etc/mediawiki/LocalSettings.php"
    [[site.route]]
    path = "/api/"
    backend = "http://127.0.0.1:9001"
    [[site.route]]
    path = "/api/v2/"
    backend = ["http://127.0.0.1:9002", "http://127.0.0.1:9003"]
    health = "/healthz"
    [[site.route]]
    path = "/assets/"
    static = true

    [[site]]
    name = "blog"
    hosts = ["*.blog.example"]
    default = true
    [site.cache]
    grace = "1m"
"#;

#[test]
fn sites_inherit_the_top_level_and_override_it() {
    let s = load(TWO_SITES).unwrap();
    assert_eq!(s.sites.len(), 2);
    let wiki = &s.sites[0];
    assert_eq!(wiki.name, "example.com", "named by its first host");
    assert_eq!(wiki.hosts, ["example.com", "www.example.com"]);
    assert!(matches!(wiki.backend, Backend::FastCgi(_)));
    assert_eq!(
        wiki.fastcgi.params,
        [(
            "MW_CONFIG_FILE".to_string(),
            "/etc/mediawiki/LocalSettings.php".to_string()
        )]
    );
    assert_eq!(wiki.anonymous.presets, [Preset::Mediawiki]);
    assert_eq!(wiki.cache.grace, std::time::Duration::from_secs(300));
    let blog = &s.sites[1];
    assert_eq!(blog.name, "blog");
    assert_eq!(blog.backend.to_string(), "http://127.0.0.1:9000");
    assert_eq!(blog.anonymous.presets, [Preset::Wordpress]);
    assert_eq!(blog.cache.grace, std::time::Duration::from_secs(60));
    assert!(blog
        .anonymous
        .session_cookies
        .is_session("wordpress_logged_in_x"));
}

#[test]
fn routes_are_matched_longest_prefix_first() {
    let s = load(TWO_SITES).unwrap();
    let wiki = &s.sites[0];
    let route = |p: &str| wiki.route_for(p).map(|r| r.path.as_str());
    assert_eq!(route("/api/v2/users"), Some("/api/v2/"));
    assert_eq!(route("/api/v1"), Some("/api/"));
    assert_eq!(route("/assets/a.css"), Some("/assets/"));
    assert_eq!(route("/index.php"), None);
    match &wiki.route_for("/api/v2/").unwrap().target {
        RouteTarget::Backend { backend, health } => {
            assert_eq!(
                backend.to_string(),
                "http://127.0.0.1:9002, http://127.0.0.1:9003"
            );
            assert_eq!(health.as_deref(), Some("/healthz"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        wiki.route_for("/assets/x").unwrap().target,
        RouteTarget::Static { .. }
    ));
}

#[test]
fn a_host_finds_its_site_exactly_then_by_pattern_then_the_default() {
    let s = load(TWO_SITES).unwrap();
    let site = |h: &str| s.site_for(h).map(|s| s.name.as_str());
    assert_eq!(site("www.example.com"), Some("example.com"));
    assert_eq!(site("a.blog.example"), Some("blog"));
    assert_eq!(
        site("blog.example"),
        Some("blog"),
        "not the pattern: the default"
    );
    assert_eq!(site("elsewhere.test"), Some("blog"));
    let no_default = TWO_SITES.replace("default = true", "");
    let s = load(&no_default).unwrap();
    assert!(s.site_for("elsewhere.test").is_none());
    assert_eq!(
        s.site_for("x.y.blog.example").map(|s| s.name.as_str()),
        Some("blog")
    );
}

#[test]
fn without_site_tables_one_site_answers_every_host() {
    let s = load("backend = \"http://127.0.0.1:9000\"").unwrap();
    assert_eq!(s.sites.len(), 1);
    assert!(s.sites[0].default && s.sites[0].hosts.is_empty());
    assert_eq!(s.site_for("anything").unwrap().name, "default");
}

#[test]
fn several_servers_must_be_http() {
    let s = load("backend = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2\"]").unwrap();
    assert!(matches!(&s.sites[0].backend, Backend::Http { servers } if servers.len() == 2));
    let e = err("backend = [\"http://127.0.0.1:1\", \"fastcgi://127.0.0.1:2\"]");
    assert!(e.contains("must all be http://"), "{e}");
    let e = err("backend = [\"http://127.0.0.1:1\", \"http://127.0.0.1:1\"]");
    assert!(e.contains("twice"), "{e}");
    let e = err("backend = \"fastcgi://127.0.0.1:2\"\nroot = \"/\"\nhealth = \"/h\"");
    assert!(e.contains("active checks are for http://"), "{e}");
}

#[test]
fn mistakes_in_sites_are_named_with_their_site() {
    let base = "backend = \"http://127.0.0.1:9000\"\n";
    for (file, says) in [
        ("[[site]]\nname = \"a\"", "add hosts"),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[[site]]\nhosts = [\"A.test\"]",
            "also listed by the site `a.test`",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\ndefault = true\n[[site]]\nhosts = [\"b.test\"]\ndefault = true",
            "only one site may say default = true",
        ),
        (
            "[[site]]\nname = \"x\"\nhosts = [\"a.test\"]\n[[site]]\nname = \"x\"\nhosts = [\"b.test\"]",
            "another site is named `x`",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[site.cache]\nsize = \"1GiB\"",
            "shared by every site",
        ),
        ("[[site]]\nhosts = [\"a.test:8080\"]", "not a host name"),
        ("[[site]]\nhosts = [\"http://a.test\"]", "not a host name"),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[[site.route]]\npath = \"/api/\"",
            "needs backend = ",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[[site.route]]\npath = \"api\"\nbackend = \"http://127.0.0.1:1\"",
            "path prefix",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[[site.route]]\npath = \"/s/\"\nstatic = true",
            "needs a directory",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[site.tls]\ncert = \"/a.pem\"",
            "give both",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[site.tls]\ncert = \"/a.pem\"\nkey = \"/a.key\"",
            "no HTTPS address",
        ),
        ("site = []", "no [[site]] table"),
        ("[[site]]\nhosts = [\"a.test\"]\nbogus = 1", "unknown field"),
    ] {
        let text = format!("{base}{file}");
        let e = match toml::from_str::<Options>(&text) {
            Ok(o) => Settings::from_options(o).unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(says), "{file:?}: {e}");
    }
    let e = err(&format!(
        "{base}[[site]]\nhosts = [\"a.test\"]\nroot = \"/nonexistent\""
    ));
    assert!(e.starts_with("in the site `a.test`:"), "{e}");
}

#[test]
fn a_site_backend_replaces_an_inherited_app_and_the_other_way_round() {
    let s = load(
        "[app]\ncommand = \"php w.php {port}\"\n[[site]]\nhosts = [\"a.test\"]\nbackend = \"http://127.0.0.1:1\"\n[[site]]\nhosts = [\"b.test\"]\n",
    )
    .unwrap();
    assert!(matches!(s.sites[0].backend, Backend::Http { .. }));
    assert!(matches!(s.sites[1].backend, Backend::App(_)));
    let s = load(
        "backend = \"http://127.0.0.1:1\"\n[[site]]\nhosts = [\"a.test\"]\n[site.app]\ncommand = \"php w.php {port}\"\n",
    )
    .unwrap();
    assert!(matches!(s.sites[0].backend, Backend::App(_)));
}
