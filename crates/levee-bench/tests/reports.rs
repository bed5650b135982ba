//! Reports written and well formed: JSON parsed back, CSV shape, HTML structure, the
//! HTML rendered by headless Chromium without console errors, and `compare`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::ExitCode;

use common::{bench, parse, server, temp_dir};
use levee_bench::Report;

/// Equal up to float printing (serde_json does not round-trip every last bit).
fn same(a: &Report, b: &Report) {
    assert_eq!(a.config, b.config);
    assert_eq!(a.steps.len(), b.steps.len());
    for (x, y) in a.steps.iter().zip(&b.steps) {
        assert_eq!(x.concurrency, y.concurrency);
        assert_eq!(x.responses, y.responses);
        assert_eq!(x.errors, y.errors);
        assert_eq!(x.timeline.responses, y.timeline.responses);
        assert!((x.rps - y.rps).abs() <= 1e-9 * y.rps.max(1.0));
        assert!((x.latency.p99_ms - y.latency.p99_ms).abs() <= 1e-9);
    }
}

/// Runs a short sweep and writes every report kind into `dir`.
fn sweep_with_reports(dir: &Path) -> Report {
    let s = server(false);
    let json = dir.join("run.json");
    let csv = dir.join("run.csv");
    let html = dir.join("run.html");
    let (code, report) = bench(&[
        &s.url("/"),
        "--sweep",
        "1,2,4,8",
        "-d",
        "400ms",
        "--warmup",
        "100ms",
        "-t",
        "2",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--label",
        "baseline",
        "-q",
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    report
}

#[test]
fn json_csv_and_html_are_well_formed() {
    let dir = temp_dir("reports");
    let report = sweep_with_reports(&dir);

    let text = std::fs::read_to_string(dir.join("run.json")).unwrap();
    let back: Report = serde_json::from_str(&text).unwrap();
    same(&back, &report);
    assert_eq!(back.label.as_deref(), Some("baseline"));
    assert_eq!(back.steps.len(), 4);
    assert!(back.knee.is_some());
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(value["steps"][0]["latency"]["p99_ms"].is_number());
    assert!(value["steps"][0]["errors"]["connect"].is_number());

    let csv = std::fs::read_to_string(dir.join("run.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "header + 4 rows");
    let cols = lines[0].split(',').count();
    assert!(lines[0].starts_with("concurrency,") && lines[0].contains("p999_ms"));
    for (row, c) in lines[1..].iter().zip([1, 2, 4, 8]) {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!(f.len(), cols);
        assert_eq!(f[0], c.to_string());
        assert!(f[10].parse::<f64>().unwrap() > 0.0, "rps in {row}");
    }

    let html = std::fs::read_to_string(dir.join("run.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 4);
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    assert!(
        !html.contains("http://cdn") && !html.contains("<link"),
        "no network"
    );
    assert!(!html.contains("src=\"http"), "no external scripts");
    // the embedded data parses back too
    let start = html.find("id=\"levee-report-data\">").unwrap() + "id=\"levee-report-data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    let data: Vec<Report> = serde_json::from_str(&html[start..end].replace("<\\/", "</")).unwrap();
    same(&data[0], &report);

    // the text report has ab's table and the knee
    let text = levee_bench::render_text(&report);
    assert!(text.contains("Percentage of the requests served within a certain time"));
    assert!(text.contains("Knee: peak throughput"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn single_run_text_report_is_ab_like() {
    let s = server(false);
    let (_, r) = bench(&[&s.url("/"), "-n", "100", "-c", "2", "-t", "1", "-q"]);
    let text = levee_bench::render_text(&r);
    for want in [
        "Server Software:        levee-test",
        "Document Length:        1024 bytes",
        "Concurrency Level:      2",
        "Complete requests:      100",
        "Failed requests:        0",
        "Requests per second:",
        "Transfer rate:",
        "100%",
        "(longest request)",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn compare_two_reports() {
    let dir = temp_dir("compare");
    let s = server(false);
    let a = dir.join("a.json");
    let b = dir.join("b.json");
    bench(&[
        &s.url("/"),
        "-n",
        "200",
        "-c",
        "2",
        "-t",
        "1",
        "--json",
        a.to_str().unwrap(),
        "-q",
    ]);
    bench(&[
        &s.url("/"),
        "-n",
        "400",
        "-c",
        "2",
        "-t",
        "1",
        "--json",
        b.to_str().unwrap(),
        "-q",
    ]);
    let ra = Report::read_json(&a).unwrap();
    let rb = Report::read_json(&b).unwrap();
    let out = levee_bench::render_compare(&ra, &rb, ("a.json", "b.json"));
    assert!(out.contains("concurrency 2"));
    assert!(out.contains("req/s"));
    assert!(out.contains("2.00x"), "responses ratio 400/200:\n{out}");
    // the CLI path runs too
    let cmd = parse(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]).unwrap();
    let (code, none) = levee_bench::execute(cmd).unwrap();
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(none.is_none());
    // a file that is not a report says so
    std::fs::write(dir.join("bad.json"), "{}").unwrap();
    let cmd = parse(&[
        "compare",
        a.to_str().unwrap(),
        dir.join("bad.json").to_str().unwrap(),
    ])
    .unwrap();
    let err = levee_bench::execute(cmd).unwrap_err();
    assert!(format!("{err:#}").contains("not a levee bench JSON report"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn html_report_renders_in_headless_chromium() {
    // Fails without Chromium unless LEVEE_TEST_SKIP_MISSING says otherwise.
    let bin = levee_test::require!(levee_test::tools::CHROMIUM);
    let dir = temp_dir("chromium");
    sweep_with_reports(&dir);
    let url = format!("file://{}", dir.join("run.html").display());

    let (dom, stderr) =
        levee_test::tools::run_chromium(&bin, &dir.join("profile1"), &["--dump-dom"], &url);
    assert!(
        dom.contains("data-rendered=\"charts=4;reports=1\""),
        "the page script did not run to the end; stderr:\n{stderr}"
    );
    for bad in ["Uncaught", "SyntaxError", "TypeError", "ReferenceError"] {
        assert!(!stderr.contains(bad), "console error {bad}:\n{stderr}");
    }

    let shot = dir.join("shot.png");
    let (_, stderr) = levee_test::tools::run_chromium(
        &bin,
        &dir.join("profile2"),
        &[&format!("--screenshot={}", shot.display())],
        &url,
    );
    let png =
        std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}); stderr:\n{stderr}"));
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    assert!(
        png.len() > 20_000,
        "screenshot suspiciously small: {} bytes",
        png.len()
    );
    if let Ok(keep) = std::env::var("LEVEE_BENCH_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
    std::fs::remove_dir_all(dir).unwrap();
}
