//! Every simulator file shown whole in the README or `docs/` (a TOML block
//! with a `[dependency]` table) reads as a scenario; the limiter files and
//! manifests among the blocks are the library's test (`tests/docs_toml.rs`).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::path::Path;

use rheostat_sim::Scenario;

#[test]
fn every_scenario_file_in_the_docs_reads_as_a_scenario() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut read = 0;
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut block: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match &mut block {
                None if line.trim_start().starts_with("```toml") => {
                    block = Some((i + 2, String::new()));
                }
                Some((at, body)) if line.trim_start().starts_with("```") => {
                    if body.lines().any(|l| l.trim() == "[dependency]") {
                        if let Err(e) = Scenario::from_toml("docs", body) {
                            panic!("{}, the block at line {at}: {e}\n{body}", page.display());
                        }
                        read += 1;
                    }
                    block = None;
                }
                Some((_, body)) => {
                    body.push_str(line);
                    body.push('\n');
                }
                None => {}
            }
        }
    }
    assert!(read >= 2, "{read} scenario files found");
}
