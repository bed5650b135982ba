//! The access log (issue 11): one line per request with its cache result and times,
//! written off the request path; SIGUSR1 reopens the file for logrotate.

use std::path::Path;
use std::time::Duration;

use levee_test::{eventually, levee, Origin, RawConn, Recorded, Reply};

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

async fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    assert!(
        eventually(Duration::from_secs(5), || lines(path).len() >= n).await,
        "{} has {:?}, expected {n} lines",
        path.display(),
        lines(path)
    );
    lines(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_combined_line_per_request_and_sigusr1_reopens_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("style.css"), "body{}").unwrap();
    let log = dir.path().join("access.log");
    let origin = Origin::start(|r: &Recorded| match r.path.as_str() {
        "/page" => Reply::text("cached").header("cache-control", "max-age=60"),
        _ => Reply::text("personal"),
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--root", root.to_str().unwrap()])
        .args(&[
            "--access-log",
            "combined",
            "--access-log-file",
            log.to_str().unwrap(),
        ])
        .start();

    assert_eq!(levee.get("/page").await.x_cache(), "MISS");
    levee.wait_fills_done().await;
    assert_eq!(levee.get("/page").await.x_cache(), "HIT");
    let r = levee
        .get_with(
            "/private?x=1",
            &[("cookie", "PHPSESSID=s"), ("user-agent", "agent \"7\"")],
        )
        .await;
    assert_eq!(r.x_cache(), "PASS");
    assert_eq!(levee.get("/style.css").await.x_cache(), "STATIC");
    let mut c = RawConn::connect(levee.addr()).await;
    c.write(b"GET /bad HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        .await
        .unwrap();
    c.read_until_closed(Duration::from_secs(5)).await.unwrap();

    let got = wait_lines(&log, 5).await;
    let expect = [
        ("\"GET /page HTTP/1.1\" 200 6 ", "cache=MISS backend=0."),
        ("\"GET /page HTTP/1.1\" 200 6 ", "cache=HIT backend=- "),
        (
            "\"GET /private?x=1 HTTP/1.1\" 200 8 ",
            "cache=PASS backend=0.",
        ),
        (
            "\"GET /style.css HTTP/1.1\" 200 6 ",
            "cache=STATIC backend=- ",
        ),
        ("\"GET /bad HTTP/1.1\" 400 ", "cache=ERROR backend=- "),
    ];
    for (line, (request, fields)) in got.iter().zip(expect) {
        assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
        assert!(line.contains(" +0000] "), "{line}");
        assert!(line.contains(request), "{line}\nshould contain {request}");
        assert!(line.contains(fields), "{line}\nshould contain {fields}");
        assert!(line.contains(" total=0."), "{line}");
    }
    // A client's quotes cannot break the fields.
    assert!(got[2].contains("\"agent \\x227\\x22\""), "{}", got[2]);

    // logrotate: move the file, SIGUSR1, and the next line goes to a new file.
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-USR1", &levee.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The reopen is asynchronous: requests until one lands in the new file.
    let mut n = 0;
    while lines(&log).is_empty() {
        levee.get("/page").await;
        n += 1;
        assert!(n < 500, "nothing was written to a new {}", log.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(lines(&log)[0].contains("cache=HIT"), "{:?}", lines(&log));
    assert_eq!(lines(&rotated).len() + lines(&log).len(), 5 + n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_are_objects_with_the_cache_result() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.json");
    let origin = Origin::fixed(|| Reply::text("x").header("cache-control", "max-age=60"));
    let levee = levee!()
        .backend(&origin.url())
        .config(&format!(
            "[log]\naccess = \"json\"\naccess_file = \"{}\"",
            log.display()
        ))
        .start();
    levee.get("/a").await;
    let got = wait_lines(&log, 1).await;
    let v: serde_json::Value = serde_json::from_str(&got[0]).unwrap();
    assert_eq!(v["cache"], "MISS");
    assert_eq!(v["status"], 200);
    assert_eq!(v["uri"], "/a");
    assert!(v["total_seconds"].as_f64().unwrap() > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_log_that_cannot_be_opened_is_a_clear_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
        .args([
            "serve",
            "--backend",
            "http://127.0.0.1:9",
            "--listen",
            "127.0.0.1:0",
        ])
        .args([
            "--access-log",
            "combined",
            "--access-log-file",
            "/nonexistent-dir/a.log",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent-dir/a.log") && err.contains("access_file"),
        "{err}"
    );
}
