//! Reload (issue 11): SIGHUP and `POST /reload` re-read the configuration and apply it
//! without dropping a connection or the cache; an invalid file is refused with its
//! reason and the old configuration keeps running.

use std::time::Duration;

use levee_test::{eventually, levee, Levee, Origin, Recorded, Reply};

fn origin() -> Origin {
    Origin::start(|r: &Recorded| {
        Reply::text(format!("{} #{}", r.path, r.n)).header("cache-control", "max-age=600")
    })
}

/// Rewrites levee's config file and sends SIGHUP; waits for levee to say how it went.
async fn reload_with(levee: &Levee, toml: &str, expect: &str) {
    let path = levee.config_path().expect("started with a config file");
    std::fs::write(path, toml).unwrap();
    let before = levee.stderr().matches(expect).count();
    levee.signal("HUP");
    assert!(
        eventually(Duration::from_secs(5), || levee
            .stderr()
            .matches(expect)
            .count()
            > before)
        .await,
        "no {expect:?} after SIGHUP; stderr:\n{}",
        levee.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_a_new_configuration_and_keeps_the_cache() {
    let origin = origin();
    let base = format!("backend = \"{}\"\ndebug_headers = true\n", origin.url());
    let levee = levee!().config(&base).start();
    for p in ["/page", "/other"] {
        levee.get(p).await;
        levee.wait_stored(p).await;
    }

    // A pass path added: /page now goes to the backend; the cache is still there.
    reload_with(
        &levee,
        &format!("{base}[anonymous]\npass_paths = [\"/page*\"]\n"),
        "levee: configuration reloaded",
    )
    .await;
    let r = levee.get("/page").await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_eq!(levee.get("/other").await.x_cache(), "HIT");

    // An invalid file: refused with its reason, nothing changes, levee keeps serving.
    reload_with(
        &levee,
        &format!("{base}[anonymous]\npass_paths = 7\n"),
        "levee: reload refused",
    )
    .await;
    assert!(levee.stderr().contains("pass_paths"), "{}", levee.stderr());
    assert_eq!(levee.get("/page").await.x_cache(), "PASS");
    assert_eq!(levee.get("/other").await.x_cache(), "HIT");

    // What needs a restart is named and left as it runs.
    reload_with(
        &levee,
        &format!("{base}[cache]\nsize = \"64MiB\"\n"),
        "need a restart and were not applied: cache.size",
    )
    .await;
    assert_eq!(
        levee.get("/page").await.x_cache(),
        "HIT",
        "the pass path went away"
    );
    assert_eq!(levee.get("/other").await.x_cache(), "HIT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn levee_reload_asks_through_the_admin_listener() {
    let origin = origin();
    let base = format!("backend = \"{}\"\n", origin.url());
    let levee = levee!().config(&base).start();
    let admin = levee.admin_addr().await.to_string();
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
            .args(["reload", "--admin", &admin])
            .env_remove("LEVEE_ADMIN_TOKEN")
            .output()
            .unwrap()
    };
    std::fs::write(
        levee.config_path().unwrap(),
        format!("{base}[cache]\ngrace = \"2h\"\n"),
    )
    .unwrap();
    let out = run();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "levee: configuration reloaded"
    );
    std::fs::write(
        levee.config_path().unwrap(),
        format!("{base}[cache]\ngrace = \"soon\"\n"),
    )
    .unwrap();
    let out = run();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cache.grace"),
        "{out:?}"
    );
}

/// `levee reload --pid` (the systemd unit's ExecReload, issue 36: a minimal Debian has no
/// /bin/kill): SIGHUP without the admin listener; a bad pid is a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn levee_reload_by_pid_sends_sighup() {
    let origin = origin();
    let base = format!("backend = \"{}\"\ndebug_headers = true\n", origin.url());
    let levee = levee!().config(&base).start();
    std::fs::write(
        levee.config_path().unwrap(),
        format!("{base}[anonymous]\npass_paths = [\"/page*\"]\n"),
    )
    .unwrap();
    let run = |pid: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
            .args(["reload", &format!("--pid={pid}")])
            .env_remove("LEVEE_ADMIN")
            .output()
            .unwrap()
    };
    let out = run(&levee.pid().to_string());
    assert!(out.status.success(), "{out:?}");
    assert!(
        eventually(Duration::from_secs(5), || levee
            .stderr()
            .contains("levee: configuration reloaded"))
        .await,
        "{}",
        levee.stderr()
    );
    assert_eq!(levee.get("/page").await.x_cache(), "PASS");
    for bad in ["0", "-1"] {
        let out = run(bad);
        assert!(!out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("$MAINPID"),
            "{out:?}"
        );
    }
}

/// Waits until levee has answered 200 more requests (the load runs on the
/// configuration in place).
async fn served_under_load(levee: &Levee) {
    const ANSWERED: &str = "levee_request_duration_seconds_count";
    let before = levee.metric(ANSWERED).await;
    levee.wait_metric(ANSWERED, |n| n >= before + 200.0).await;
}

/// A reload under load: 64 clients on a cached and an uncached URL while SIGHUP comes
/// five times, once with an invalid file, with requests served before, between and after
/// the reloads: no request fails, and what was cached is still cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_load_fail_no_request() {
    let origin = Origin::start(|r: &Recorded| {
        if r.path == "/cached" {
            Reply::text("cached").header("cache-control", "max-age=600")
        } else {
            Reply::text("fresh every time").header("cache-control", "no-store")
        }
    });
    let base = format!("backend = \"{}\"\n", origin.url());
    let levee = levee!().config(&base).start();
    levee.get("/cached").await;
    levee.wait_stored("/cached").await;
    let dir = tempfile::tempdir().unwrap();
    let urls = dir.path().join("urls.txt");
    std::fs::write(
        &urls,
        format!("{}\n{}\n", levee.url("/cached"), levee.url("/uncached")),
    )
    .unwrap();
    let mut bench = std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
        .args([
            "bench",
            "-f",
            urls.to_str().unwrap(),
            "-c",
            "64",
            "-d",
            "6s",
            "-t",
            "1",
            "-q",
        ])
        .args(["--json", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let configs = [
        format!("{base}[cache]\ngrace = \"2h\"\n"),
        format!("{base}[anonymous]\npass_paths = [\"/nothing*\"]\n"),
        format!("{base}[cache]\ngrace = 12\n"),
        format!("{base}debug_headers = true\n"),
        base.clone(),
    ];
    for (i, c) in configs.iter().enumerate() {
        served_under_load(&levee).await;
        let expect = if i == 2 {
            "levee: reload refused"
        } else {
            "levee: configuration reloaded"
        };
        reload_with(&levee, c, expect).await;
    }
    served_under_load(&levee).await;
    assert!(
        bench.try_wait().unwrap().is_none(),
        "the load ended before the last reload had been served under it: lengthen -d"
    );
    let out = bench.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let step = &report["steps"][0];
    let errors = &step["errors"];
    for kind in ["connect", "timeout", "status_4xx", "status_5xx", "other"] {
        assert_eq!(errors[kind], 0, "{kind} errors during reloads: {errors}");
    }
    assert!(step["responses"].as_u64().unwrap() > 1000, "{step}");
    assert_eq!(levee.get("/cached").await.x_cache(), "HIT");
    assert_eq!(
        levee
            .stderr()
            .matches("levee: configuration reloaded")
            .count(),
        4
    );
}
