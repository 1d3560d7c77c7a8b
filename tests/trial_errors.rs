//! A configuration's errors as a trial met them: a limiter's name
//! misspelled in one of its two tables, and an error returned by `?` from
//! `main`, which prints its `Debug`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::path::PathBuf;

use rheostat::algorithms::{Aimd, AimdConfig};
use rheostat::config::{LimitersConfig, LiveLimiters};
use rheostat::Limiter;

/// A fresh directory for one test's file.
fn dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rheostat-errors-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The trial's file: the options under one name, the policy under another.
const MISSPELLED: &str = "\
[limiters.payments]
max_wait = \"100ms\"

[limiters.payment.policy]
policy = \"breaker\"
";

#[test]
fn a_limiter_without_its_policy_beside_a_near_name_with_one_names_both_tables_and_lines() {
    let e = LimitersConfig::from_toml(MISSPELLED).unwrap_err();
    assert_eq!((e.field(), e.line()), ("limiters.payments", Some(1)));
    assert_eq!(
        e.to_string(),
        "line 1: invalid `limiters.payments`: missing field `policy`; is \
         `[limiters.payment.policy]` on line 4 meant for it? `payment` looks like a \
         misspelling of `payments`"
    );
    // Read from a file, live: the same, after the file's name.
    let path = dir("misspelled").join("limits.toml");
    std::fs::write(&path, MISSPELLED).unwrap();
    let e = LiveLimiters::load(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:1: invalid `limiters.payments`: missing field `policy`; is \
             `[limiters.payment.policy]` on line 4 meant for it? `payment` looks like a \
             misspelling of `payments`",
            path.display()
        )
    );
}

#[test]
fn a_near_name_is_found_in_json_and_when_it_too_lacks_its_policy() {
    let json = "{\"limiters\": {\n  \"payments\": {\"max_wait\": \"100ms\"},\n  \
                \"paymetns\": {\"policy\": {\"policy\": \"breaker\"}}\n}}";
    let e = LimitersConfig::from_json(json).unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 2: invalid `limiters.payments`: missing field `policy`; is \
         `[limiters.paymetns.policy]` on line 3 meant for it? `paymetns` looks like a \
         misspelling of `payments`"
    );
    // Neither has a policy: each is named beside the other.
    let e = LimitersConfig::from_toml(
        "[limiters.search]\nmax_wait = \"1s\"\n\n[limiters.serach]\nmax_waiters = 8\n",
    )
    .unwrap_err();
    let all: Vec<String> = e.errors().map(|e| e.to_string()).collect();
    assert_eq!(
        all,
        [
            "line 1: invalid `limiters.search`: missing field `policy`; is \
             `[limiters.serach]` on line 4 meant for it? `serach` looks like a misspelling \
             of `search`",
            "line 4: invalid `limiters.serach`: missing field `policy`; is \
             `[limiters.search]` on line 1 meant for it? `search` looks like a misspelling \
             of `serach`",
        ]
    );
}

#[test]
fn a_limiter_without_its_policy_and_no_near_name_is_told_only_what_it_lacks() {
    let e = LimitersConfig::from_toml(
        "[limiters.payments]\nmax_wait = \"100ms\"\n\n[limiters.search.policy]\npolicy = \"fixed\"\nlimit = 4\n",
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1: invalid `limiters.payments`: missing field `policy`"
    );
}

/// What `?` in `main` prints is `Error: ` and the error's `Debug`: it
/// reads as the message, with the field, the value and the line, and no
/// struct's name.
#[test]
fn the_debug_of_a_configuration_error_reads_as_its_message() {
    let file =
        LimitersConfig::from_toml("[limiters.search.policy]\npolicy = \"aimd\"\nbackoff = 1.5\n")
            .unwrap_err();
    let code = Aimd::new(AimdConfig {
        backoff: 1.5,
        ..AimdConfig::default()
    })
    .unwrap_err();
    let built = Limiter::builder(Aimd::recommended())
        .max_wait(std::time::Duration::ZERO)
        .build()
        .unwrap_err();
    let misspelled = LimitersConfig::from_toml(MISSPELLED).unwrap_err();
    let keyed = rheostat::keyed::KeyedError::from(code.clone());
    for (debug, display, wanted) in [
        (
            format!("{file:?}"),
            file.to_string(),
            &["limiters.search.policy.backoff", "1.5", "line 3"][..],
        ),
        (
            format!("{code:?}"),
            code.to_string(),
            &["aimd.backoff", "1.5"][..],
        ),
        (
            format!("{built:?}"),
            built.to_string(),
            &["limiter.max_wait", "0ns"][..],
        ),
        (
            format!("{misspelled:?}"),
            misspelled.to_string(),
            &["limiters.payments", "payment", "line 1", "line 4"][..],
        ),
        (
            format!("{keyed:?}"),
            keyed.to_string(),
            &["aimd.backoff", "1.5"][..],
        ),
    ] {
        assert_eq!(debug, display);
        for part in wanted {
            assert!(debug.contains(part), "{part} in {debug}");
        }
        for name in [
            "ConfigFileError",
            "ConfigError",
            "Details",
            "KeyedError",
            "{",
        ] {
            assert!(!debug.contains(name), "{name} in {debug}");
        }
    }
    // Every error of a file, each on its line, as its message shows them.
    let several = LimitersConfig::from_toml(
        "[limiters.a.policy]\npolicy = \"aimd\"\nbackof = 0.5\nmaxx = 3\n",
    )
    .unwrap_err();
    assert_eq!(format!("{several:?}"), several.to_string());
    assert_eq!(format!("{several:?}").lines().count(), 2);
}
