//! The public surface, read from the source: how many names the crate root
//! holds, and which methods `Limiter` reads its timeouts through.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::fs;
use std::path::Path;

/// The text of a file of the crate, with `//` comments (and so doc
/// comments) dropped, line by line.
fn code(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names `src/lib.rs` re-exports with `pub use` (a name re-exported
/// `as` another counts as the other), not counting a crate re-exported as
/// a module (`pub use rheostat_algorithms as algorithms`).
fn root_names() -> Vec<String> {
    let lib = code(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"));
    let mut names = Vec::new();
    for statement in lib.split(';') {
        let Some(at) = statement.find("pub use ") else {
            continue;
        };
        let path = statement[at + "pub use ".len()..].trim();
        if !path.contains("::") {
            continue; // a crate as a module
        }
        // The leaves: the last segment of each path, or its `as` name.
        let flat = path.replace(['{', '}'], ",");
        for item in flat.split(',') {
            let item = item.trim();
            if item.is_empty() || item.ends_with("::") {
                continue;
            }
            let name = item.rsplit(" as ").next().unwrap();
            let name = name.rsplit("::").next().unwrap().trim();
            names.push(name.to_owned());
        }
    }
    names
}

#[test]
fn the_crate_root_re_exports_at_most_fifteen_names() {
    let names = root_names();
    assert!(names.contains(&"Limiter".to_owned()), "{names:?}");
    assert!(
        names.len() <= 15,
        "{} names at the root: {names:?}",
        names.len()
    );
}

#[test]
fn a_limiter_reads_its_timeouts_through_timeouts_and_its_timer_through_wake_at_and_wake() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/limiter");
    let mut all = String::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            all.push_str(&code(&path));
        }
    }
    for gone in [
        "attempt_timeout",
        "learned_timeout",
        "timeout_in_force",
        "probe_timeout",
        "poll_timeout",
        "handle_timeout",
    ] {
        assert!(
            !all.contains(&format!("pub fn {gone}(")),
            "`Limiter::{gone}` is public again"
        );
    }
    for method in ["timeouts", "wake_at", "wake"] {
        assert!(
            all.contains(&format!("pub fn {method}(&self)")),
            "no `Limiter::{method}`"
        );
    }
}
