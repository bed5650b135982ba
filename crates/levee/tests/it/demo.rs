//! `levee demo`, the README's first command, run for real (short steps).

use std::process::Command;

#[test]
fn demo_caches_the_session_starting_origin_and_writes_charts() {
    let dir = std::env::temp_dir().join(format!("levee-demo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("demo.html");
    let out = Command::new(env!("CARGO_BIN_EXE_levee"))
        .args(["demo", "-d", "400ms", "-c", "16", "--html"])
        .arg(&html)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each level of each target is on a line; the origin caps direct at 5 pages / 20 ms.
    let rps = |who: &str, clients: &str| -> f64 {
        let line = stdout
            .lines()
            .find(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                l.contains(who) && f.get(2) == Some(&clients)
            })
            .unwrap_or_else(|| panic!("no {who} line at {clients} clients in:\n{stdout}"));
        line.split_whitespace().nth(3).unwrap().parse().unwrap()
    };
    let direct = rps("origin direct", "16");
    let levee = rps("through levee", "16");
    assert!(
        direct < 300.0,
        "direct beyond the origin's limit: {direct}\n{stdout}"
    );
    assert!(
        levee > 4.0 * direct,
        "levee {levee} vs direct {direct}\n{stdout}"
    );
    assert!(stdout.contains("speed-up at 16 clients"), "{stdout}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("origin direct") && page.contains("through levee"));
    assert!(
        page.matches("<svg class=\"chart\"").count() >= 3,
        "charts missing"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
