//! The public surface, read from the source: how many names the crate root
//! holds, how many methods `Limiter` has, and which it reads its timeouts
//! through.

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
fn a_limiter_reads_its_timeouts_through_timeouts_and_a_driver_applies_its_timer_through_wake() {
    let all = limiter_files().concat();
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
    for method in ["timeouts", "wake"] {
        assert!(
            all.contains(&format!("pub fn {method}(&self)")),
            "no `Limiter::{method}`"
        );
    }
}

/// The code of every file in `src/limiter/`, with comments but not
/// attributes dropped.
fn limiter_files() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/limiter");
    let mut paths: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    paths.sort();
    paths.iter().map(|path| code(path)).collect()
}

/// The documented public methods of `Limiter`: each `pub fn` one level
/// inside an `impl … Limiter<…>` block, not marked `#[doc(hidden)]` (what
/// only the simulator needs).
fn limiter_methods() -> Vec<String> {
    let mut names = Vec::new();
    for file in limiter_files() {
        let (mut inside, mut hidden) = (false, false);
        for line in file.lines() {
            if line.starts_with("impl") && line.contains(" Limiter<") {
                inside = true;
            } else if line.starts_with('}') {
                inside = false;
            } else if inside {
                let trimmed = line.trim();
                if trimmed == "#[doc(hidden)]" {
                    hidden = true;
                }
                let method = ["    pub fn ", "    pub async fn "]
                    .iter()
                    .find_map(|p| line.strip_prefix(p));
                if let Some(rest) = method {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !hidden {
                        names.push(name);
                    }
                    hidden = false;
                } else if !trimmed.is_empty() && !trimmed.starts_with('#') {
                    hidden = false;
                }
            }
        }
    }
    names
}

#[test]
fn a_limiter_has_at_most_fifteen_methods_and_reaches_the_rest_through_handles() {
    let methods = limiter_methods();
    for expected in ["try_acquire", "call", "overrides", "ready", "classes"] {
        assert!(methods.iter().any(|m| m == expected), "{methods:?}");
    }
    for handled in [
        "set_override",
        "wait_ready",
        "drive",
        "in_flight_by_class",
        "acquire",
    ] {
        assert!(
            !methods.iter().any(|m| m == handled),
            "{handled}: {methods:?}"
        );
    }
    assert!(
        methods.len() <= 15,
        "{} methods on Limiter: {methods:?}",
        methods.len()
    );
}
