//! The library crates keep defaults of their own (their tests and other users need
//! them); levee's come from levee-config's `DEFAULTS`. These tests prove the two agree,
//! so that a library default never silently differs from what `levee serve` runs with.

use super::*;
use levee_config::{AppOptions, Backend, Options};

fn defaults(o: Options) -> Settings {
    Settings::from_options(o).unwrap()
}

fn http() -> Options {
    Options {
        backend: Some("http://127.0.0.1:9".into()),
        ..Options::default()
    }
}

#[test]
fn the_storage_policys_defaults_are_levees() {
    let s = defaults(http());
    assert_eq!(
        format!("{:?}", policy_config(&s.sites[0].cache)),
        format!("{:?}", PolicyConfig::default())
    );
}

#[test]
fn the_file_servers_defaults_are_levees() {
    let s = defaults(http());
    let root = std::path::Path::new("/srv/www");
    assert_eq!(
        format!("{:?}", static_config(root, &s.sites[0].static_files)),
        format!("{:?}", StaticConfig::new(root))
    );
}

#[test]
fn the_app_pools_defaults_are_levees() {
    let s = defaults(Options {
        app: AppOptions {
            command: Some("php worker.php {port}".into()),
            ..AppOptions::default()
        },
        ..Options::default()
    });
    let Backend::App(a) = &s.sites[0].backend else {
        panic!("not an app backend");
    };
    assert_eq!(
        format!("{:?}", crate::upstream::app_config(a)),
        format!(
            "{:?}",
            levee_app::AppConfig::new("php worker.php {port}", a.processes)
        )
    );
}
