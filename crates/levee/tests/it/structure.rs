//! The shape of the source tree, kept by tests rather than by review: no module imports
//! another in a loop (so every module can be read, and changed, from its dependencies
//! up), no source file grows past what one reads in a sitting, and no test sleeps to
//! let time pass (it moves levee's clock, or waits on state).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under `src`: `request/fill.rs` -> `request::fill`,
/// `request/mod.rs` -> `request`, `lib.rs` -> ``.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// A file's code without comments and without its inline test module (by convention
/// the last item: `#[cfg(test)] mod tests { ... }`).
fn code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expands a use tree (`a::{b, c::{d, E}}`) into paths.
fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let (mut depth, mut start) = (0, 0);
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(prefix, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(prefix, &inner[start..], out);
        return;
    }
    if tree.is_empty() {
        return;
    }
    if let Some(i) = tree.find("::{") {
        let mut p = prefix.to_vec();
        p.extend(tree[..i].split("::").map(str::to_string));
        expand(&p, &tree[i + 2..], out);
        return;
    }
    let path = tree.split(" as ").next().unwrap_or(tree);
    let mut p = prefix.to_vec();
    p.extend(
        path.split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    );
    out.push(p);
}

/// Every path a file names (its `use` trees, `crate::`/`super::` paths in its code, and
/// `child::` paths to the modules it declares), each with whether it is a re-export
/// (`pub use`): API surface, not something the module's code depends on.
fn paths(code: &str, children: &BTreeSet<String>) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    // The code outside `use` statements, for the paths written inline.
    let mut inline = String::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let boundary = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        let before = rest[..i].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let after = &rest[i + 4..];
        match (boundary, after.find(';')) {
            (true, Some(end)) => {
                let mut trees = Vec::new();
                expand(&[], &after[..end].replace(['\n', ' '], ""), &mut trees);
                out.extend(trees.into_iter().map(|t| (t, public)));
                inline.push_str(&rest[..i]);
                rest = &after[end..];
            }
            _ => {
                inline.push_str(&rest[..i + 4]);
                rest = after;
            }
        }
    }
    inline.push_str(rest);
    let tokens: Vec<&str> = inline
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| t.contains("::"))
        .collect();
    for t in tokens {
        let segs: Vec<String> = t
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let first = segs.first().map(String::as_str).unwrap_or("");
        if first == "crate" || first == "super" || first == "self" || children.contains(first) {
            out.push((segs, false));
        }
    }
    out
}

/// `path` as named in `module`, made absolute (`crate::`, `super::`, `self::`).
fn absolute(module: &[String], path: &[String]) -> Vec<String> {
    let mut abs = module.to_vec();
    let mut segs = path;
    match segs.first().map(String::as_str) {
        Some("crate") => {
            abs.clear();
            segs = &segs[1..];
        }
        Some("super") | Some("self") => {
            while let Some(s) = segs.first() {
                match s.as_str() {
                    "super" => {
                        abs.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segs = &segs[1..];
            }
        }
        _ => {}
    }
    abs.extend(segs.iter().cloned());
    abs
}

/// The longest prefix of `abs` that is a module, and the rest.
fn split_module<'a>(
    abs: &'a [String],
    modules: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<(&'a [String], &'a [String])> {
    (0..=abs.len())
        .rev()
        .map(|k| abs.split_at(k))
        .find(|(m, _)| modules.contains_key(*m))
}

/// The modules of a crate and the modules each one uses. A path through a re-export
/// (`crate::Thing` where lib.rs says `pub use thing::Thing`) counts as a use of the
/// module that defines it.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> =
        files.into_iter().map(|f| (module_of(src, &f), f)).collect();
    let named: BTreeMap<Vec<String>, Vec<(Vec<String>, bool)>> = modules
        .iter()
        .map(|(module, file)| {
            let children: BTreeSet<String> = modules
                .keys()
                .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
                .filter_map(|m| m.last().cloned())
                .collect();
            (module.clone(), paths(&code(file), &children))
        })
        .collect();
    // name re-exported by a module -> the module it comes from.
    let mut reexports: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
    for (module, paths) in &named {
        for (path, _) in paths.iter().filter(|(_, public)| *public) {
            let abs = absolute(module, path);
            if let (Some((from, rest)), Some(name)) = (split_module(&abs, &modules), abs.last()) {
                if !rest.is_empty() && from != module.as_slice() {
                    reexports.insert((module.clone(), name.clone()), from.to_vec());
                }
            }
        }
    }
    let mut graph = BTreeMap::new();
    for (module, paths) in &named {
        let mut uses = BTreeSet::new();
        for (path, _) in paths.iter().filter(|(_, public)| !*public) {
            let abs = absolute(module, path);
            let Some((mut target, rest)) = split_module(&abs, &modules) else {
                continue;
            };
            let mut target_owned;
            if let Some(name) = rest.first() {
                if let Some(from) = reexports.get(&(target.to_vec(), name.clone())) {
                    target_owned = from.clone();
                    target = &target_owned;
                    // A re-export of a re-export.
                    while let Some(from) = reexports.get(&(target.to_vec(), name.clone())) {
                        target_owned = from.clone();
                        target = &target_owned;
                    }
                }
            }
            if target != module.as_slice() {
                uses.insert(target.join("::"));
            }
        }
        graph.insert(module.join("::"), uses);
    }
    graph
}

/// A cycle of the graph, if it has one (depth-first search).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let start = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node) {
            let mut stack = Vec::new();
            if let Some(c) = visit(node, graph, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

fn crates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(workspace().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    out.sort();
    out
}

#[test]
fn no_module_imports_another_in_a_loop() {
    let mut cycles = Vec::new();
    for krate in crates() {
        let graph = module_graph(&krate.join("src"));
        if let Some(cycle) = find_cycle(&graph) {
            let name = krate.file_name().unwrap().to_string_lossy().into_owned();
            let shown: Vec<_> = cycle
                .iter()
                .map(|m| if m.is_empty() { "(crate root)" } else { m })
                .collect();
            cycles.push(format!("{name}: {}", shown.join(" -> ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "modules that import each other in a loop (move what both need to a module of \
         its own, or have the phase return a value instead of calling back):\n{}",
        cycles.join("\n")
    );
}

/// The request path's steps (`request/phases/`) are called by the driver alone: no step
/// names another, so that the order of a request's life is read in `request/mod.rs`.
#[test]
fn no_phase_names_another_phase() {
    let src = workspace().join("crates/levee-proxy/src");
    let graph = module_graph(&src);
    let phase = |m: &str| -> Option<String> {
        let rest = m.strip_prefix("request::phases::")?;
        Some(rest.split("::").next().unwrap_or(rest).to_string())
    };
    let phases: BTreeSet<String> = graph.keys().filter_map(|m| phase(m)).collect();
    assert!(
        ["classify", "fill", "lookup", "pass", "rules"]
            .iter()
            .all(|p| phases.contains(*p)),
        "the steps moved: {phases:?}"
    );
    let mut sideways = Vec::new();
    for (module, uses) in &graph {
        let Some(from) = phase(module) else {
            continue;
        };
        for target in uses {
            if target == "request::phases" || phase(target).is_some_and(|to| to != from) {
                sideways.push(format!("{module} -> {target}"));
            }
        }
    }
    assert!(
        sideways.is_empty(),
        "a step calls another (return a Next for the driver, or move what both need to a \
         helper of request/):\n{}",
        sideways.join("\n")
    );
    // The checker sees such a call.
    let mut fake = graph.clone();
    fake.entry("request::phases::fill".into())
        .or_default()
        .insert("request::phases::range_miss".into());
    assert!(fake
        .get("request::phases::fill")
        .is_some_and(|u| u.iter().any(|t| phase(t).is_some_and(|to| to != "fill"))));
}

/// A request's route is chosen in one function, `request::route::resolve`, called by the
/// driver alone; nothing else matches a path against the routes.
#[test]
fn the_route_is_resolved_in_one_function() {
    let src = workspace().join("crates/levee-proxy/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut matching = Vec::new();
    let mut callers = Vec::new();
    for f in &files {
        let code = code(f);
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        // Matching a path against the routes' prefixes.
        let n = code.matches("starts_with(&r.path)").count()
            + code.matches(".routes.iter().find(").count();
        if n > 0 {
            matching.push(format!("{rel} ({n})"));
        }
        if code.contains("route::resolve(") {
            callers.push(rel);
        }
    }
    assert_eq!(
        matching,
        ["request/route.rs (1)"],
        "routes matched elsewhere"
    );
    assert_eq!(callers, ["request/mod.rs"], "the route resolved elsewhere");
    let route = code(&src.join("request/route.rs"));
    assert_eq!(route.matches("fn resolve").count(), 1);
}

/// The crates cut out of the request path depend on nothing above them: never on
/// levee-proxy, the binary or the tools, so that each is read (and `levee doctor` built)
/// without the request path.
#[test]
fn the_capability_crates_depend_on_nothing_above_them() {
    let above = [
        "levee",
        "levee-proxy",
        "levee-doctor",
        "levee-bench",
        "levee-test",
    ];
    let mut wrong = Vec::new();
    for name in [
        "levee-limits",
        "levee-visitor",
        "levee-tiers",
        "levee-systemd",
        "levee-log",
        "levee-sendfile",
        "levee-websocket",
        "levee-h3",
        "levee-doctor",
    ] {
        let manifest =
            std::fs::read_to_string(workspace().join("crates").join(name).join("Cargo.toml"))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        let deps = manifest
            .split("[dependencies]")
            .nth(1)
            .unwrap_or("")
            .split("\n[")
            .next()
            .unwrap_or("");
        for line in deps.lines() {
            let dep = line.split(['.', ' ', '=']).next().unwrap_or("").trim();
            if above.contains(&dep) && !(name == "levee-doctor" && dep == "levee-doctor") {
                wrong.push(format!("{name} -> {dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The checker itself: it must see a loop through `super::` and one through `crate::`.
#[test]
fn the_loop_finder_finds_loops() {
    let dir = std::env::temp_dir().join(format!("levee-structure-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod c;\nuse crate::b::X;\n").unwrap();
    std::fs::write(src.join("a/c.rs"), "fn f() { super::Y::new(); }\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::a::{c::Z, W};\n").unwrap();
    let graph = module_graph(&src);
    assert_eq!(graph["a::c"], BTreeSet::from(["a".to_string()]));
    let cycle = find_cycle(&graph).expect("a <-> b");
    assert!(cycle.contains(&"a".to_string()) && cycle.contains(&"b".to_string()));
    std::fs::write(src.join("b.rs"), "pub struct X;\n").unwrap();
    assert_eq!(find_cycle(&module_graph(&src)), None);
    // Through the crate root's re-export, `crate::Z` is a use of `a::c`, not of lib.rs.
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub use a::c::Z;\n").unwrap();
    std::fs::write(src.join("b.rs"), "fn f() { crate::Z::new(); }\n").unwrap();
    std::fs::write(src.join("a/c.rs"), "use crate::b::Y;\n").unwrap();
    let graph = module_graph(&src);
    assert_eq!(graph["b"], BTreeSet::from(["a::c".to_string()]));
    assert!(find_cycle(&graph).is_some(), "a::c -> b -> a::c");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Files under `src` that are not tests: no test module file (`tests.rs`, `tests/`).
fn is_test_file(path: &Path) -> bool {
    path.file_name().is_some_and(|f| f == "tests.rs")
        || path.components().any(|c| c.as_os_str() == "tests")
}

#[test]
fn no_source_file_is_over_700_lines() {
    let mut long = Vec::new();
    for krate in crates() {
        let mut files = Vec::new();
        rust_files(&krate.join("src"), &mut files);
        for f in files.iter().filter(|f| !is_test_file(f)) {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            if lines > 700 {
                long.push(format!("{} ({lines} lines)", f.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "source files over 700 lines (split by what they own; inline test modules go to \
         a tests.rs of their own):\n{}",
        long.join("\n")
    );
}

/// A sleep of a second or more in a test is time let pass: advance levee's clock
/// (`Levee::advance_clock`) or wait on state (a metric, a log line, a poll with a
/// deadline). A peer that must hang does so with `std::future::pending()`.
#[test]
fn no_test_sleeps_a_second_or_more() {
    let mut found = Vec::new();
    for krate in crates() {
        let mut files = Vec::new();
        rust_files(&krate.join("tests"), &mut files);
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") || !line.contains("sleep(") {
                    continue;
                }
                let long =
                    [("from_secs(", 1u64), ("from_millis(", 1000)]
                        .iter()
                        .any(|(call, min)| {
                            line.split(call).skip(1).any(|rest| {
                                let digits: String = rest
                                    .chars()
                                    .take_while(|c| c.is_ascii_digit() || *c == '_')
                                    .filter(|c| *c != '_')
                                    .collect();
                                digits.parse::<u64>().is_ok_and(|v| v >= *min)
                            })
                        });
                if long {
                    found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "tests that sleep a second or more:\n{}",
        found.join("\n")
    );
}
