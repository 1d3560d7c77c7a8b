//! The declared minimum Rust version (`rust-version` in `Cargo.toml`) holds
//! for everything the committed lockfile builds: no locked package, for any
//! target, declares a newer one. The workspace uses cargo's MSRV-aware
//! resolver (`resolver = "3"`), so `cargo update` keeps it so; this test
//! catches a lockfile refreshed another way, or a `rust-version` lowered
//! below a dependency's. Newer standard-library items in our own code are
//! caught by clippy's `incompatible_msrv` lint, which CI denies.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::process::Command;

/// `1.85` or `1.85.0` as comparable numbers (a missing patch is 0).
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text.split('.').map(|p| p.parse::<u64>().unwrap());
    (
        parts.next().unwrap(),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

#[test]
fn no_locked_package_needs_a_newer_rust_than_declared() {
    let declared = env!("CARGO_PKG_RUST_VERSION");
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo metadata --locked failed (is Cargo.lock out of date?): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    assert!(
        packages.len() > 50,
        "the whole graph, with dev-dependencies"
    );
    let newer: Vec<String> = packages
        .iter()
        .filter_map(|p| {
            let needs = p["rust_version"].as_str()?;
            (version(needs) > version(declared)).then(|| {
                format!(
                    "{} {} needs {needs}",
                    p["name"].as_str().unwrap(),
                    p["version"].as_str().unwrap()
                )
            })
        })
        .collect();
    assert!(
        newer.is_empty(),
        "rust-version is {declared}, but the lockfile has {newer:?}; \
         `cargo update` with the MSRV-aware resolver picks versions that fit"
    );
}

#[test]
fn the_readme_states_the_declared_version() {
    let readme = include_str!("../README.md");
    let declared = env!("CARGO_PKG_RUST_VERSION");
    assert!(
        readme.contains(&format!("Rust {declared} or newer")),
        "README.md should say \"Rust {declared} or newer\""
    );
}
