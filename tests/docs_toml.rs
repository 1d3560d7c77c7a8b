//! Every TOML block in the README and in `docs/` reads as its reader is
//! told it does: a limiter file parses and passes its checks, a manifest
//! or a simulator file is TOML (the simulator's own test reads its files
//! whole), and a block meant to show a refusal says so on its first line
//! (`# refused: ...`) and is refused.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::path::Path;

use rheostat::config::LimitersConfig;

/// Each ```` ```toml ```` block of `text`: its first line's number and its text.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut open {
            None if line.trim_start().starts_with("```toml") => open = Some((i + 2, String::new())),
            Some(_) if line.trim_start().starts_with("```") => blocks.push(open.take().unwrap()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    assert!(open.is_none(), "a ```toml block is never closed");
    blocks
}

/// The README and every page of `docs/`.
fn pages() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![("README.md".to_owned(), root.join("README.md"))];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs.into_iter().map(|p| {
        let name = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
        (name, p)
    }));
    pages
        .into_iter()
        .map(|(name, path)| (name, std::fs::read_to_string(path).unwrap()))
        .collect()
}

fn is_limiter_file(block: &str) -> bool {
    block.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("[limiters") || l.starts_with("[[overrides]]") || l.starts_with("[default")
    })
}

#[test]
fn every_toml_block_in_the_docs_parses_or_says_it_is_refused() {
    let mut limiter_files = 0;
    for (page, text) in pages() {
        for (line, block) in toml_blocks(&text) {
            let at = format!("{page}, the block at line {line}");
            let shows_refusal = block.trim_start().starts_with("# refused");
            if is_limiter_file(&block) {
                limiter_files += 1;
                match (LimitersConfig::from_toml(&block), shows_refusal) {
                    (Ok(_), false) | (Err(_), true) => {}
                    (Err(e), false) => panic!("{at} is refused: {e}\n{block}"),
                    (Ok(_), true) => panic!("{at} says it is refused, and parses\n{block}"),
                }
            } else {
                // A manifest, or a simulator file (read whole by the
                // simulator's tests): TOML, at least.
                if let Err(e) = block.parse::<toml::Table>() {
                    panic!("{at} is not TOML: {e}\n{block}");
                }
            }
        }
    }
    // The README's own files are among them.
    assert!(limiter_files >= 2, "{limiter_files} limiter files found");
}

#[test]
fn a_limiter_s_policy_may_be_named_alone() {
    let c = LimitersConfig::from_toml(
        "[limiters.payments]\npolicy = \"recommended\"\ntimeout = \"auto\"\n\n[limiters.search]\npolicy = \"aimd\"\n",
    )
    .unwrap();
    assert_eq!(
        c.limiters["payments"].policy,
        rheostat::config::PolicyConfig::Recommended
    );
    assert_eq!(
        c.limiters["search"].policy,
        rheostat::config::PolicyConfig::Aimd(Default::default())
    );
    // A policy that needs a field says which, with its line.
    let e = LimitersConfig::from_toml("[limiters.payments]\npolicy = \"fixed\"\n").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("limit"), "{text}");
    assert!(text.contains("line 2") || text.contains("line 1"), "{text}");
    // Neither a name nor a table.
    let e = LimitersConfig::from_toml("[limiters.payments]\npolicy = 3\n").unwrap_err();
    assert!(e.to_string().contains("a policy's name"), "{e}");
}
