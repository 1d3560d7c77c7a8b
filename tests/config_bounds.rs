//! What a hostile or careless configuration file may cost: bounded memory
//! whatever its nesting, a bounded size, a bounded stack, and errors that
//! repeat at most the start of a long name or value. Each case once
//! crashed or cost gigabytes.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat::algorithms::{Algorithm, Fixed, Stack, MAX_MEMBERS};
use rheostat::config::{LimitersConfig, PolicyConfig, MAX_FILE_BYTES};

/// Every way an error is shown, in bytes: its message and its field.
fn size(e: &rheostat::config::ConfigFileError) -> usize {
    e.to_string().len() + e.field().len()
}

#[test]
fn json_nested_a_hundred_thousand_deep_is_refused_in_memory_linear_in_its_size() {
    // 100 KB of `[`: the index of lines once kept a path per level, which
    // for this input is about 20 GB, and aborted.
    for text in [
        "[".repeat(100_000),
        "{\"a\":".repeat(100_000),
        format!(
            "{{\"limiters\": {}{}}}",
            "[".repeat(50_000),
            "]".repeat(50_000)
        ),
    ] {
        let e = LimitersConfig::from_json(&text).unwrap_err();
        assert!(size(&e) < 1024, "{e}");
        assert!(PolicyConfig::from_json(&text).is_err());
    }
}

#[test]
fn toml_nested_a_hundred_thousand_deep_is_refused() {
    for text in [
        format!("a = {}", "[".repeat(100_000)),
        format!("a = {}{}", "{b = ".repeat(100_000), "}".repeat(100_000)),
    ] {
        let e = LimitersConfig::from_toml(&text).unwrap_err();
        assert!(e.reason().contains("recursion"), "{e}");
    }
}

#[test]
fn a_text_over_a_mebibyte_is_refused_by_its_size_before_it_is_parsed() {
    // A valid file, padded with a comment to just over the bound.
    let mut text = String::from("[limiters.a.policy]\npolicy = \"fixed\"\nlimit = 3\n#");
    assert!(LimitersConfig::from_toml(&text).is_ok());
    text.push_str(&"x".repeat(MAX_FILE_BYTES - text.len()));
    assert_eq!(text.len(), MAX_FILE_BYTES);
    assert!(
        LimitersConfig::from_toml(&text).is_ok(),
        "at the bound: read"
    );
    text.push('x');
    let e = LimitersConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.field(), "");
    assert!(
        e.reason()
            .starts_with("found a file of 1048577 bytes, expected at most 1048576"),
        "{e}"
    );
    // NUL bytes, which once aborted inside the TOML parser's error path.
    let nul = "\0".repeat(MAX_FILE_BYTES + 1);
    assert!(LimitersConfig::from_toml(&nul).is_err());
    assert!(LimitersConfig::from_json(&nul).is_err());
    assert!(PolicyConfig::from_toml(&nul).is_err());
}

#[test]
fn a_file_over_a_mebibyte_on_disk_is_refused_without_being_read_whole() {
    let dir = std::env::temp_dir().join(format!("rheostat-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.toml");
    // Limiter tables just over the bound...
    let table = "[limiters.x]\npolicy = { policy = \"fixed\", limit = 3 }\n";
    std::fs::write(&path, table.repeat((MAX_FILE_BYTES / table.len()) + 10)).unwrap();
    let e = LimitersConfig::load(&path).unwrap_err();
    assert_eq!(e.file(), Some(path.as_path()));
    assert!(e.reason().contains("expected at most 1048576"), "{e}");
    // ...and a file of 1 GiB (sparse: NUL bytes, which once aborted inside
    // the TOML parser), refused by its length before a byte is read.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(1 << 30).unwrap();
    let e = LimitersConfig::load(&path).unwrap_err();
    assert!(
        e.reason().starts_with("found a file of 1073741824 bytes"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_stack_of_more_than_sixty_four_policies_is_refused_naming_its_members() {
    // In code, nested stacks counted by their members.
    let fixed = |n: usize| -> Vec<Box<dyn Algorithm>> {
        (0..n)
            .map(|_| Box::new(Fixed::new(3).unwrap()) as Box<dyn Algorithm>)
            .collect()
    };
    assert!(Stack::new(fixed(MAX_MEMBERS)).is_ok());
    let e = Stack::new(fixed(MAX_MEMBERS + 1)).unwrap_err();
    assert_eq!(e.field(), "stack.members");
    assert_eq!(e.found(), "65 policies");
    let nested: Vec<Box<dyn Algorithm>> = (0..9)
        .map(|_| Box::new(Stack::new(fixed(8)).unwrap()) as Box<dyn Algorithm>)
        .collect();
    assert_eq!(Stack::new(nested).unwrap_err().found(), "72 policies");
    // In a file: 2,000 members once took 1.56 GB to index and aborted; a
    // 100,000-member stack was built and cost 23 ms a call.
    let member = r#"{"policy": "fixed", "limit": 3}"#;
    let members = vec![member; 2_000].join(",");
    let text = format!(
        r#"{{"limiters": {{"search": {{"policy": {{"policy": "stack", "members": [{members}]}}}}}}}}"#
    );
    let e = LimitersConfig::from_json(&text).unwrap_err();
    assert_eq!(e.field(), "limiters.search.policy.members");
    assert!(
        e.reason()
            .starts_with("found 2000 policies, expected at most 64 policies"),
        "{e}"
    );
}

#[test]
fn an_error_repeats_at_most_the_start_of_a_long_name_or_value() {
    let name = "n".repeat(500_000);
    // A bad value under a long name...
    let text = format!("[limiters.{name}.policy]\npolicy = \"fixed\"\nlimit = 0\n");
    let e = LimitersConfig::from_toml(&text).unwrap_err();
    assert!(size(&e) < 1024, "{} bytes", size(&e));
    assert!(e.field().contains("(500000 bytes)"), "{}", e.field());
    assert!(e.field().ends_with(".policy.limit"), "{}", e.field());
    assert_eq!(e.line(), Some(3));
    // ...an unknown field with a long name...
    let text = format!("[limiters.a.policy]\npolicy = \"fixed\"\n{name} = 1\n");
    let e = LimitersConfig::from_toml(&text).unwrap_err();
    assert!(size(&e) < 2048, "{} bytes", size(&e));
    assert!(e.to_string().contains("(500000 bytes)"), "{e}");
    // ...and a long value of the wrong kind, in JSON.
    let text = format!(r#"{{"limiters": {{"a": {{"policy": {{"policy": "{name}"}}}}}}}}"#);
    let e = LimitersConfig::from_json(&text).unwrap_err();
    assert!(size(&e) < 2048, "{} bytes", size(&e));
}

#[test]
fn an_empty_file_says_it_configures_nothing_and_a_yaml_file_is_refused_by_name() {
    for text in ["", "\n# only a comment\n"] {
        let e = LimitersConfig::from_toml(text).unwrap_err();
        assert!(e.reason().contains("configures nothing"), "{e}");
    }
    assert!(LimitersConfig::from_json("{}")
        .unwrap_err()
        .reason()
        .contains("configures nothing"));
    // A default alone is a configuration (for keyed limiters).
    assert!(LimitersConfig::from_toml("[default.policy]\npolicy = \"aimd\"\n").is_ok());
    let dir = std::env::temp_dir().join(format!("rheostat-yaml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["limits.yaml", "limits.YML"] {
        let path = dir.join(name);
        // Valid TOML inside: the name alone decides, so nothing YAML-like
        // is ever read as TOML.
        std::fs::write(
            &path,
            "[limiters.a.policy]\npolicy = \"fixed\"\nlimit = 3\n",
        )
        .unwrap();
        let e = LimitersConfig::load(&path).unwrap_err();
        assert!(e.reason().contains("YAML is not read"), "{e}");
        assert_eq!(e.file(), Some(path.as_path()));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_mebibyte_of_faults_is_read_again_a_bounded_number_of_times() {
    // Limiter tables each with an unknown field, to just under the bound:
    // each error found costs a reading of the whole file, so a long file
    // is read again fewer times, and the error says the search stopped.
    let mut text = String::new();
    let mut i = 0;
    while text.len() < MAX_FILE_BYTES - 100 {
        text.push_str(&format!(
            "[limiters.l{i}]\nmax_wat = \"1s\"\npolicy = {{ policy = \"fixed\", limit = 1 }}\n"
        ));
        i += 1;
    }
    let e = LimitersConfig::from_toml(&text).unwrap_err();
    let found = e.errors().count();
    assert!((2..=rheostat::config::MAX_ERRORS).contains(&found), "{e}");
    assert!(
        e.to_string()
            .ends_with("stopped there: fix these and read again)"),
        "{e}"
    );
    assert!(size(&e) < found * 1024, "{} bytes", size(&e));
    // Errors found, in file order.
    let lines: Vec<_> = e.errors().map(|e| e.line().unwrap()).collect();
    assert!(lines.windows(2).all(|w| w[0] < w[1]), "{lines:?}");
}
