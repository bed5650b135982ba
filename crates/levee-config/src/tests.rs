//! Resolving options into settings: defaults, precedence, validation messages.

use std::time::Duration;

use super::*;

/// Flags (as options) over a config file's text.
fn resolve(file: &str, flags: Options) -> Result<Settings, ConfigError> {
    let file: Options = toml::from_str(file).unwrap();
    Settings::from_options(flags.combine(file))
}

fn with_backend() -> Options {
    Options {
        backend: Some("http://127.0.0.1:9000".into()),
        ..Options::default()
    }
}

fn micro_cache(v: &str) -> CacheOptions {
    CacheOptions {
        micro_cache: Some(v.into()),
        ..CacheOptions::default()
    }
}

#[test]
fn backend_alone_is_a_complete_setup() {
    let s = resolve("", with_backend()).unwrap();
    assert_eq!(s.listen, vec!["127.0.0.1:8080".parse().unwrap()]);
    assert_eq!(s.cache.size, 256 * 1024 * 1024);
    assert!(s.sites[0].cache.micro_cache.is_none());
    assert!(
        s.admin.listen.is_none(),
        "the admin listener is off by default"
    );
    assert!(s.sites[0].anonymous.session_cookies.is_session("PHPSESSID"));
    assert!(s.sites[0]
        .anonymous
        .session_cookies
        .is_session("wordpress_logged_in_abc"));
    assert!(!s.sites[0].anonymous.session_cookies.is_session("_ga"));
    assert!(s.sites[0]
        .static_files
        .asset_extensions
        .iter()
        .any(|e| e == "css"));
}

#[test]
fn flags_override_file_and_file_overrides_defaults() {
    let file = r#"
        backend = "http://127.0.0.1:1"
        listen = "127.0.0.1:1234"
        [cache]
        micro_cache = "10s"
        size = "1MiB"
        max_object_size = "512KiB"
        "#;
    let flags = Options {
        cache: micro_cache("3s"),
        ..with_backend()
    };
    let s = resolve(file, flags).unwrap();
    assert_eq!(s.sites[0].backend.to_string(), "http://127.0.0.1:9000");
    assert_eq!(s.listen, vec!["127.0.0.1:1234".parse().unwrap()]);
    assert_eq!(s.sites[0].cache.micro_cache, Some(Duration::from_secs(3)));
    assert_eq!(s.cache.size, 1024 * 1024, "a table merges key by key");
    assert_eq!(
        s.sites[0].cache.grace,
        Duration::from_secs(3600),
        "the default"
    );
}

#[test]
fn unknown_keys_are_errors() {
    let err = toml::from_str::<Options>("bakend = \"x\"").unwrap_err();
    assert!(err.to_string().contains("bakend"), "{err}");
    let err = toml::from_str::<Options>("[cache]\nsise = \"1MiB\"").unwrap_err();
    assert!(err.to_string().contains("sise"), "{err}");
}

#[test]
fn missing_backend_says_what_to_do() {
    let err = resolve("", Options::default()).unwrap_err();
    assert!(err.to_string().contains("--backend"));
}

#[test]
fn bad_values_name_the_option() {
    for (o, needle) in [
        (
            Options {
                cache: micro_cache("three seconds"),
                ..with_backend()
            },
            "micro_cache",
        ),
        (
            Options {
                backend: Some("127.0.0.1:9000".into()),
                ..Options::default()
            },
            "backend",
        ),
        (
            Options {
                preset: OneOrMany::from_flags(&["joomla-ish".into()]),
                ..with_backend()
            },
            "preset",
        ),
        (
            Options {
                listen: Some(OneOrMany::One("localhost".into())),
                ..with_backend()
            },
            "is not an address",
        ),
        (
            Options {
                admin: AdminOptions {
                    listen: Some("9091".into()),
                    ..AdminOptions::default()
                },
                ..with_backend()
            },
            "admin.listen",
        ),
    ] {
        let err = resolve("", o).unwrap_err();
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn purge_allow_list_and_admin_token() {
    let s = resolve("", with_backend()).unwrap();
    assert!(s.purge.allows("127.0.0.1".parse().unwrap()));
    assert!(s.purge.allows("::1".parse().unwrap()));
    assert!(s.purge.allows("::ffff:127.0.0.1".parse().unwrap()));
    assert!(!s.purge.allows("10.0.0.1".parse().unwrap()));
    assert!(s.admin.token.is_none());
    let s = resolve(
        "[purge]\nallow = [\"10.0.0.0/8\", \"192.0.2.7\"]\n[admin]\ntoken = \"s3cret\"",
        with_backend(),
    )
    .unwrap();
    assert!(s.purge.allows("10.1.2.3".parse().unwrap()));
    assert!(s.purge.allows("192.0.2.7".parse().unwrap()));
    assert!(!s.purge.allows("127.0.0.1".parse().unwrap()));
    assert_eq!(s.admin.token.as_deref(), Some("s3cret"));
    for (file, needle) in [
        ("[purge]\nallow = [\"10.0.0.0/33\"]", "purge.allow"),
        ("[admin]\ntoken = \" \"", "admin.token"),
    ] {
        let err = resolve(file, with_backend()).unwrap_err();
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn admin_listener_from_file_or_flag() {
    let s = resolve("[admin]\nlisten = \"127.0.0.1:9091\"", with_backend()).unwrap();
    assert_eq!(s.admin.listen, Some("127.0.0.1:9091".parse().unwrap()));
    let flags = Options {
        admin: AdminOptions {
            listen: Some("[::1]:9092".into()),
            ..AdminOptions::default()
        },
        ..with_backend()
    };
    let s = resolve("[admin]\nlisten = \"127.0.0.1:9091\"", flags).unwrap();
    assert_eq!(s.admin.listen, Some("[::1]:9092".parse().unwrap()));
}

#[test]
fn presets_add_pass_paths() {
    let o = Options {
        preset: OneOrMany::from_flags(&["wordpress".into()]),
        ..with_backend()
    };
    let s = resolve("", o).unwrap();
    assert!(s.sites[0]
        .anonymous
        .pass_paths
        .is_match("/wp-admin/edit.php"));
    assert!(s.sites[0]
        .anonymous
        .pass_paths
        .is_match("/wp-login.php?action=lostpassword"));
    assert!(!s.sites[0]
        .anonymous
        .pass_paths
        .is_match("/2024/01/hello-world/"));
}

#[test]
fn fastcgi_backends_parse_and_need_a_root() {
    for (s, want) in [
        (
            "fastcgi://127.0.0.1:9000",
            FastCgiAddress::Tcp("127.0.0.1:9000".into()),
        ),
        (
            "fastcgi+unix:/run/php/php8.2-fpm.sock",
            FastCgiAddress::Unix("/run/php/php8.2-fpm.sock".into()),
        ),
        (
            "fastcgi+unix:///run/php.sock",
            FastCgiAddress::Unix("/run/php.sock".into()),
        ),
    ] {
        assert_eq!(
            Backend::parse(s).unwrap(),
            Backend::FastCgi(want.clone()),
            "{s}"
        );
    }
    let unix = Backend::parse("fastcgi+unix:///run/php.sock").unwrap();
    assert_eq!(unix.to_string(), "fastcgi+unix:/run/php.sock");
    for bad in [
        "fastcgi://127.0.0.1",
        "fastcgi://:9000",
        "fastcgi://h:1/x",
        "fastcgi+unix:run.sock",
    ] {
        let err = Backend::parse(bad).unwrap_err().to_string();
        assert!(err.contains("backend"), "{bad}: {err}");
    }
    let o = Options {
        backend: Some("fastcgi://127.0.0.1:9000".into()),
        ..Options::default()
    };
    let err = resolve("", o.clone()).unwrap_err().to_string();
    assert!(err.contains("--root"), "{err}");
    let s = resolve(
        "",
        Options {
            root: Some(std::env::temp_dir()),
            ..o.clone()
        },
    )
    .unwrap();
    assert_eq!(s.sites[0].fastcgi.index, "index.php");
    let err = resolve(
        "",
        Options {
            root: Some("/nonexistent/levee-root".into()),
            ..o
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("not a directory"), "{err}");
}

#[test]
fn compression_store_is_checked() {
    let err = resolve("[compression]\nstore = \"lzma\"", with_backend())
        .unwrap_err()
        .to_string();
    assert!(err.contains("compression.store"), "{err}");
    let s = resolve("", with_backend()).unwrap();
    assert!(s.compression.enabled);
    assert_eq!(s.compression.store, "gzip");
}

#[test]
fn example_config_parses() {
    let text = include_str!("../../../levee.example.toml");
    resolve(text, Options::default()).unwrap();
}

/// The Debian package's `/etc/levee/levee.toml` (packaging/levee.toml) loads as
/// `levee serve --config` reads it and keeps the safe defaults: loopback only, no admin
/// listener, the ACME directory inside the unit's StateDirectory (/var/lib/levee), the
/// same as the built-in default; the disk tier in its CacheDirectory (/var/cache/levee),
/// sized by the machine, so that the cache survives restarts and upgrades.
#[test]
fn packaged_config_loads_with_safe_defaults() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/levee.toml");
    let s = Settings::load(Some(&path), Options::default()).unwrap();
    assert!(!s.listen.is_empty());
    assert!(
        s.listen.iter().all(|a| a.ip().is_loopback()),
        "{:?}",
        s.listen
    );
    assert!(s.listen_tls.is_empty());
    assert!(s.admin.listen.is_none());
    assert!(s.access_log.is_none());
    assert_eq!(s.sites.len(), 1);
    let disk = s.cache.disk.as_ref().unwrap();
    assert_eq!(disk.path, std::path::Path::new("/var/cache/levee"));
    assert_eq!(disk.size, crate::DiskSize::Auto);
    let file: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let defaults: toml::Table = toml::from_str(DEFAULTS).unwrap();
    let acme_dir = |t: &toml::Table| t["tls"]["acme_dir"].clone();
    assert_eq!(acme_dir(&file), acme_dir(&defaults));
    assert!(acme_dir(&file)
        .as_str()
        .unwrap()
        .starts_with("/var/lib/levee/"));
}

/// `levee.example.toml` documents every option with its default: each key of the
/// defaults table is written there with the same value (the example's `backend` has no
/// default, `workers = 0` means "auto").
#[test]
fn example_config_shows_the_defaults() {
    let example: toml::Table = toml::from_str(include_str!("../../../levee.example.toml")).unwrap();
    let defaults: toml::Table = toml::from_str(DEFAULTS).unwrap();
    let mut wrong = Vec::new();
    for (key, value) in &defaults {
        match (value, example.get(key)) {
            (toml::Value::Table(t), Some(toml::Value::Table(e))) => {
                for (k, v) in t {
                    if e.get(k) != Some(v) {
                        wrong.push(format!("[{key}] {k} = {v} (example: {:?})", e.get(k)));
                    }
                }
            }
            (_, Some(e)) if key == "workers" && e.as_integer() == Some(0) => {}
            (_, Some(e)) if e == value => {}
            (_, e) => wrong.push(format!("{key} = {value} (example: {e:?})")),
        }
    }
    assert!(
        wrong.is_empty(),
        "levee.example.toml disagrees with DEFAULTS: {wrong:#?}"
    );
}

#[test]
fn workers_is_a_count_or_auto_and_defaults_to_one_per_core() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = |toml: &str, flag: Option<usize>| {
        let o = Options {
            workers: flag.map(Workers::Count),
            ..with_backend()
        };
        resolve(toml, o).map(|s| s.workers)
    };
    assert_eq!(workers("", None).unwrap(), cores);
    assert_eq!(workers("workers = 3", None).unwrap(), 3);
    assert_eq!(workers("workers = 0", None).unwrap(), cores);
    assert_eq!(workers("workers = \"auto\"", None).unwrap(), cores);
    assert_eq!(workers("workers = 3", Some(5)).unwrap(), 5, "the flag wins");
    let err = workers("workers = \"many\"", None).unwrap_err().to_string();
    assert!(err.contains("workers") && err.contains("auto"), "{err}");
}

#[test]
fn presets_turn_the_anonymous_ttl_on_unless_told_otherwise() {
    let preset = |p: &str| Options {
        preset: OneOrMany::from_flags(&[p.into()]),
        ..with_backend()
    };
    assert_eq!(
        resolve("", with_backend()).unwrap().sites[0]
            .cache
            .anonymous_ttl,
        None
    );
    let s = resolve("", preset("dokuwiki")).unwrap();
    assert_eq!(
        s.sites[0].cache.anonymous_ttl,
        Some(Duration::from_secs(60))
    );
    assert!(s.sites[0].anonymous.session_cookies.is_session("DokuWiki"));
    assert!(s.sites[0]
        .anonymous
        .session_cookies
        .is_session("DW68700bfd16c2027de7de74a5a8202a6f"));
    assert!(s.sites[0]
        .anonymous
        .pass_paths
        .is_match("/doku.php?id=start&do=edit"));
    assert!(!s.sites[0]
        .anonymous
        .pass_paths
        .is_match("/doku.php?id=start"));
    let s = resolve("[cache]\nanonymous_ttl = \"off\"", preset("wordpress")).unwrap();
    assert_eq!(
        s.sites[0].cache.anonymous_ttl, None,
        "the file switches it off"
    );
    let flags = Options {
        cache: CacheOptions {
            anonymous_ttl: Some("5s".into()),
            ..CacheOptions::default()
        },
        ..preset("mediawiki")
    };
    let s = resolve("", flags).unwrap();
    assert_eq!(s.sites[0].cache.anonymous_ttl, Some(Duration::from_secs(5)));
    assert_eq!(
        resolve("", preset("rhymix")).unwrap().sites[0]
            .anonymous
            .presets,
        vec![Preset::Xe]
    );
}

#[test]
fn app_directory_and_environment() {
    let dir = std::env::temp_dir();
    let file = format!(
        "[app]\ncommand = \"php w.php {{port}}\"\ncwd = \"{}\"\nenv = {{ APP_ENV = \"prod\", B = \"2\" }}\n",
        dir.display()
    );
    let s = resolve(&file, Options::default()).unwrap();
    let Backend::App(a) = &s.sites[0].backend else {
        panic!("not an app backend: {}", s.sites[0].backend);
    };
    assert_eq!(a.cwd.as_deref(), Some(dir.as_path()));
    assert_eq!(
        a.env,
        vec![("APP_ENV".into(), "prod".into()), ("B".into(), "2".into())]
    );
    let err = resolve(
        "[app]\ncommand = \"php w.php {port}\"\ncwd = \"/no/such/dir\"\n",
        Options::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("app.cwd"), "{err}");
}

/// `--check` prints every option: each key of the defaults table (and of `[app]` for an
/// app backend) is described, so a new option cannot be forgotten there.
#[test]
fn describe_covers_every_option_of_the_defaults_table() {
    let defaults: toml::Table = toml::from_str(DEFAULTS).unwrap();
    let mut keys = Vec::new();
    for (k, v) in &defaults {
        match v {
            toml::Value::Table(t) => keys.extend(t.keys().map(|n| format!("{k}.{n}"))),
            _ => keys.push(k.clone()),
        }
    }
    let app = Options {
        app: AppOptions {
            command: Some("python3 app.py {port}".into()),
            ..AppOptions::default()
        },
        ..Options::default()
    };
    let described: Vec<_> = [
        resolve("", with_backend()).unwrap(),
        resolve("", app).unwrap(),
    ]
    .iter()
    .flat_map(|s| s.describe())
    .map(|d| d.option)
    .collect();
    for key in keys {
        // Merged into anonymous.session_cookies, which is described.
        if key == "anonymous.extra_session_cookies" {
            continue;
        }
        assert!(
            described.contains(&key.as_str()),
            "`levee serve --check` does not describe {key}"
        );
    }
}

#[test]
fn acme_lets_an_https_listener_start_without_certificate_files() {
    let toml =
        "listen_tls = [\"127.0.0.1:8443\"]\n[tls]\nacme_email = \"mailto:admin@example.com\"\n";
    let s = resolve(toml, with_backend()).unwrap();
    let acme = s.tls.acme.unwrap();
    assert_eq!(acme.email, "admin@example.com");
    assert_eq!(
        acme.directory,
        "https://acme-v02.api.letsencrypt.org/directory"
    );
    assert_eq!(acme.dir, std::path::PathBuf::from("/var/lib/levee/acme"));
    assert_eq!(acme.ca, None);
    assert_eq!(acme.challenge, crate::AcmeChallenge::TlsAlpn01);

    let err = resolve("listen_tls = [\"127.0.0.1:8443\"]", with_backend())
        .unwrap_err()
        .to_string();
    assert!(err.contains("acme_email"), "{err}");
}

#[test]
fn hsts_is_a_header_value_made_once_or_an_error_that_says_how() {
    let hsts =
        |v: &str| resolve(&format!("[tls]\nhsts = \"{v}\"\n"), with_backend()).map(|s| s.tls.hsts);
    assert_eq!(
        hsts("max-age=600; includeSubDomains").unwrap(),
        Some(http::HeaderValue::from_static(
            "max-age=600; includeSubDomains"
        ))
    );
    assert_eq!(hsts("off").unwrap(), None);
    for bad in ["max-age=600\\u0001", "600"] {
        let err = hsts(bad).unwrap_err().to_string();
        assert!(
            err.contains("tls.hsts") && err.contains("max-age=31536000"),
            "{err}"
        );
    }
}

#[test]
fn acme_settings_are_checked() {
    let with = |tls: &str| {
        resolve(
            &format!(
                "listen_tls = [\"127.0.0.1:8443\"]\n[tls]\nacme_email = \"a@example.com\"\n{tls}"
            ),
            with_backend(),
        )
    };
    assert!(with("").is_ok());
    let err = |tls: &str| with(tls).unwrap_err().to_string();
    assert!(err("acme_directory = \"http://x/dir\"").contains("https"));
    assert!(err("acme_challenge = \"dns-01\"").contains("http-01"));
    assert_eq!(
        with("acme_challenge = \"http-01\"")
            .unwrap()
            .tls
            .acme
            .unwrap()
            .challenge,
        crate::AcmeChallenge::Http01
    );
    let bad_email = resolve(
        "listen_tls = [\"127.0.0.1:8443\"]\n[tls]\nacme_email = \"nobody\"\n",
        with_backend(),
    )
    .unwrap_err()
    .to_string();
    assert!(bad_email.contains("email address"), "{bad_email}");
    let no_https = resolve("[tls]\nacme_email = \"a@example.com\"\n", with_backend())
        .unwrap_err()
        .to_string();
    assert!(no_https.contains("listen-tls"), "{no_https}");
}

#[test]
fn cdn_cache_control_is_stripped_unless_kept_for_every_site_at_once() {
    let s = resolve("", with_backend()).unwrap();
    assert!(s.cache.strip_cdn_cache_control);
    let s = resolve("[cache]\nstrip_cdn_cache_control = false", with_backend()).unwrap();
    assert!(!s.cache.strip_cdn_cache_control);
    let site = "[[site]]\nhosts = [\"a.example\"]\n[site.cache]\nstrip_cdn_cache_control = false";
    let e = resolve(site, with_backend()).unwrap_err();
    assert!(
        e.to_string().contains("cache.strip_cdn_cache_control"),
        "{e}"
    );
}

#[test]
fn the_tiers_below_memory_are_off_unless_given_and_checked_when_given() {
    let s = resolve("", with_backend()).unwrap();
    assert_eq!(s.cache.disk, None);
    assert!(s.cache.redis.is_empty());
    let s = resolve(
        "[cache]\ndisk_path = \"/var/cache/levee\"\ndisk_size = \"2GiB\"\nredis = \"redis://10.0.0.5:6379\"",
        with_backend(),
    )
    .unwrap();
    let disk = s.cache.disk.unwrap();
    assert_eq!(disk.path, std::path::Path::new("/var/cache/levee"));
    assert_eq!(disk.size, crate::DiskSize::Bytes(2 << 30));
    assert_eq!(s.cache.redis, ["redis://10.0.0.5:6379"]);
    let s = resolve(
        "[cache]\ndisk_path = \"/var/cache/levee\"\ndisk_size = \"auto\"",
        with_backend(),
    )
    .unwrap();
    assert_eq!(s.cache.disk.unwrap().size, crate::DiskSize::Auto);
    for (toml, option) in [
        (
            "[cache]\ndisk_path = \"/d\"\ndisk_size = \"0\"",
            "cache.disk_size",
        ),
        ("[cache]\nredis = \"10.0.0.5:6379\"", "cache.redis"),
        ("[cache]\nredis = [\"http://x\"]", "cache.redis"),
        (
            "[[site]]\nhosts = [\"a.example\"]\n[site.cache]\ndisk_path = \"/d\"",
            "cache.disk_path",
        ),
        (
            "[[site]]\nhosts = [\"a.example\"]\n[site.cache]\nredis = \"redis://x\"",
            "cache.redis",
        ),
    ] {
        let e = resolve(toml, with_backend()).unwrap_err().to_string();
        assert!(e.contains(option), "{toml}: {e}");
    }
}
