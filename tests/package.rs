//! What publishing the two crates relies on.
//!
//! The declared minimum Rust version (`rust-version` in `Cargo.toml`) holds
//! for everything the committed lockfile builds: no locked package, for any
//! target, declares a newer one. The workspace uses cargo's MSRV-aware
//! resolver (`resolver = "3"`), so `cargo update` keeps it so; this test
//! catches a lockfile refreshed another way, or a `rust-version` lowered
//! below a dependency's. Newer standard-library items in our own code are
//! caught by clippy's `incompatible_msrv` lint, which CI denies.
//!
//! The READMEs crates.io shows link only inside their crate or by absolute
//! address, and docs.rs builds every feature with each item badged with
//! the feature it needs. (`.ci/package` builds the packaged crates.)

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

/// The workspace's files, by path from its root.
fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn readmes_link_nowhere_outside_their_crate() {
    for readme in ["README.md", "algorithms/README.md", "sim/README.md"] {
        let text = read(readme);
        assert!(
            !text.contains("](../"),
            "{readme} links out of its crate, which breaks on crates.io"
        );
    }
}

#[test]
fn docs_rs_builds_every_feature_with_badges() {
    for (manifest, lib) in [
        ("Cargo.toml", "src/lib.rs"),
        ("algorithms/Cargo.toml", "algorithms/src/lib.rs"),
        ("sim/Cargo.toml", "sim/src/lib.rs"),
    ] {
        let manifest_text = read(manifest);
        let table = manifest_text
            .split("[package.metadata.docs.rs]")
            .nth(1)
            .unwrap_or_else(|| panic!("{manifest} has no docs.rs metadata"));
        let table = table.split("\n[").next().unwrap_or_default();
        assert!(table.contains("all-features = true"), "{manifest}");
        assert!(
            table.contains(r#"rustdoc-args = ["--cfg", "docsrs"]"#),
            "{manifest}"
        );
        assert!(
            read(lib).contains("#![cfg_attr(docsrs, feature(doc_cfg))]"),
            "{lib} does not badge items with their features on docs.rs"
        );
    }
}
