//! One route per request, chosen on the path as the backend reads it, as nginx's
//! `location` matching does (issue 43): `/%61pi/x`, `//api/x` and `/x/../api/x` are
//! `/api/x` to php-fpm and to nginx, so they go to the `/api/` route's backend, under
//! its rules, and a files route serves its files whatever the spelling. The backend
//! still gets the path the client sent, as nginx's `$request_uri`.

use levee_test::{levee, Origin, Reply};

/// An origin that says who it is and the target it got, never stored (each request
/// reaches a backend, so that which one is plain).
fn named(name: &'static str) -> Origin {
    Origin::start(move |r| {
        Reply::text(format!("{name} {}", r.uri)).header("cache-control", "no-store")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_a_path_takes_the_route_nginx_would_pick() {
    let (site, api) = (named("site"), named("api"));
    let files = tempfile::tempdir().unwrap();
    std::fs::create_dir(files.path().join("assets")).unwrap();
    std::fs::write(files.path().join("assets/app.css"), "a file").unwrap();
    let config = format!(
        r#"
[[site]]
default = true
backend = "{site}"
[[site.route]]
path = "/api/"
backend = "{api}"
headers = {{ "X-Route" = "api" }}
[[site.route]]
path = "/assets/"
static = true
root = "{files}"
[[site.route]]
path = "/private/"
deny = true
"#,
        site = site.url(),
        api = api.url(),
        files = files.path().display(),
    );
    let levee = levee!().config(&config).start();

    // To the api backend, with the route's headers, and the path as the client sent it.
    for spelt in [
        "/api/x",
        "/%61pi/x",
        "/%61%70%69/x",
        "//api/x",
        "///api//x",
        "/x/../api/x",
        "/x/%2e%2e/api/x",
        "/./api/x",
        "/api%2Fx",
        "/api/x/.",
        "/api/x/y/..",
        "/api/.",
        "/api/x?q=1",
    ] {
        let r = levee.get(spelt).await;
        assert_eq!(r.status, 200, "{spelt}: {}", r.summary());
        assert_eq!(r.text(), format!("api {spelt}"), "{spelt}: {}", r.summary());
        assert_eq!(r.header("x-route"), Some("api"), "{spelt}");
    }
    assert_eq!(api.requests(), 13);
    assert_eq!(
        site.requests(),
        0,
        "no spelling of /api/ reached the site's backend"
    );

    // Not /api/ to nginx either: case counts, and dot segments that leave the route.
    for spelt in ["/API/x", "/Api/x", "/api/..", "/api/x/../..", "/apix"] {
        let r = levee.get(spelt).await;
        assert_eq!(r.status, 200, "{spelt}: {}", r.summary());
        assert_eq!(
            r.text(),
            format!("site {spelt}"),
            "{spelt}: {}",
            r.summary()
        );
        assert_eq!(r.header("x-route"), None, "{spelt}");
    }
    assert_eq!(api.requests(), 13);

    // The files route serves its file under every spelling, and never asks a backend.
    for spelt in ["/assets/app.css", "/%61ssets/app.css", "//assets/app.css"] {
        let r = levee.get(spelt).await;
        assert_eq!(
            (r.status.as_u16(), r.text()),
            (200, "a file".to_string()),
            "{spelt}: {}",
            r.summary()
        );
    }
    // Dot segments reach the files route too, whose file server refuses them as it
    // does everywhere (levee-static: no `..` into a root): its 403, not a backend's page.
    let r = levee.get("/x/../assets/app.css").await;
    assert_eq!(r.status, 403, "{}", r.summary());
    // A file the route does not have is its 404, not the site's backend's page.
    let r = levee.get("/%61ssets/missing.css").await;
    assert_eq!(r.status, 404, "{}", r.summary());
    assert_eq!(site.requests(), 5, "the files route asked no backend");

    // A rule under its route whatever the spelling.
    for spelt in [
        "/private/x",
        "/%70rivate/x",
        "//private/x",
        "/a/../private/x",
    ] {
        assert_eq!(levee.get(spelt).await.status, 403, "{spelt}");
    }
    assert_eq!((api.requests(), site.requests()), (13, 5));
}
