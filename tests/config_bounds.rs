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

// Durations at every door: each duration an operator or a file gives is
// refused past its bound with an error naming the field, or taken within
// a bound, and nothing a duration does overflows an instant.

mod durations {
    use std::time::Duration;

    use proptest::prelude::*;
    use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
    use rheostat::algorithms::{ConfigError, Fixed, MAX_DURATION};
    use rheostat::config::LimitersConfig;
    use rheostat::keyed::KeyedLimiters;
    use rheostat::overrides::Override;
    use rheostat::retry::{Backoff, Budget, RetryConfig};
    use rheostat::{
        clock::{Clock as _, ManualClock},
        limiter::{ProbeAllowance, ProbeClaims},
        Limiter, Timeout,
    };

    /// A duration past a year: just past it, far past it, or the largest.
    fn past_a_year() -> impl Strategy<Value = Duration> {
        prop_oneof![
            (1u64..1_000_000_000).prop_map(|n| MAX_DURATION + Duration::from_nanos(n)),
            (MAX_DURATION.as_secs() + 1..=u64::MAX).prop_map(|s| Duration::new(s, 999_999_999)),
            Just(Duration::MAX),
        ]
    }

    fn refused(result: Result<impl Sized, ConfigError>, field: &str, d: Duration) {
        match result {
            Ok(_) => panic!("`{field}` = {d:?} was accepted"),
            Err(e) => assert_eq!(e.field(), field, "{e}"),
        }
    }

    /// A limiter whose breaker is open (its cooldown ends in 10 s), on a
    /// manual clock, with shared probes.
    fn open_breaker() -> (Limiter<Breaker, ManualClock>, ManualClock) {
        let clock = ManualClock::new();
        let breaker = Breaker::new(BreakerConfig {
            cooldown: Cooldown::Fixed(Duration::from_secs(10)),
            cooldown_jitter: 0.0,
            ..BreakerConfig::recommended()
        })
        .unwrap();
        let limiter = Limiter::builder(breaker)
            .clock(clock.clone())
            .shared_probes()
            .build()
            .unwrap();
        for _ in 0..10 {
            limiter.try_acquire().unwrap().overload();
        }
        assert!(limiter.try_acquire().is_err(), "open");
        (limiter, clock)
    }

    #[test]
    fn probe_claims_of_a_cycle_past_the_clock_claim_without_overflow() {
        // "overflow when adding duration to instant", once.
        let (limiter, clock) = open_breaker();
        let mut claims = ProbeClaims::new(Duration::MAX);
        clock.advance(Duration::from_millis(9_800));
        let claim = claims.due(&limiter, Duration::MAX).expect("due");
        let now = clock.now();
        assert_eq!(claim.lapse, now + Duration::from_millis(200) + MAX_DURATION);
        // The fleet's clock, saturated, in cycles of 365 days.
        assert_eq!(claim.cycle, u64::MAX / MAX_DURATION.as_secs());
        // Granted, the probe is sent when the cooldown ends.
        limiter.overrides().grant_probes(1, Some(claim.lapse));
        clock.advance(Duration::from_millis(200));
        assert!(limiter.try_acquire().unwrap().is_probe());
    }

    #[test]
    fn a_probe_allowance_with_a_cycle_out_of_range_is_refused_by_name() {
        let allowance = ProbeAllowance::default();
        assert!(allowance.validate().is_ok());
        for cycle in [
            Duration::ZERO,
            Duration::from_micros(999),
            MAX_DURATION + Duration::from_nanos(1),
            Duration::MAX,
        ] {
            let e = ProbeAllowance { cycle, ..allowance }
                .validate()
                .unwrap_err();
            assert_eq!(e.field(), "allowance.cycle");
            assert!(
                e.allowed().contains("at least 1 ms and at most 365 days"),
                "{e}"
            );
        }
        for cycle in [Duration::from_millis(1), MAX_DURATION] {
            assert!(ProbeAllowance { cycle, ..allowance }.validate().is_ok());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn probe_claims_take_any_cycle_and_fleet_clock_without_panicking(
            cycle in prop_oneof![any::<u64>().prop_map(Duration::from_nanos), past_a_year()],
            since in prop_oneof![any::<u64>().prop_map(Duration::from_millis), past_a_year()],
            steps in prop::collection::vec(0u64..20_000, 1..20),
        ) {
            let (limiter, clock) = open_breaker();
            let mut claims = ProbeClaims::new(cycle);
            let mut fleet = since;
            for step in steps {
                let step = Duration::from_millis(step);
                clock.advance(step);
                fleet = fleet.saturating_add(step);
                if let Some(claim) = claims.due(&limiter, fleet) {
                    prop_assert!(claim.lapse >= clock.now());
                    limiter.overrides().grant_probes(1, Some(claim.lapse));
                }
                if let Ok(permit) = limiter.try_acquire() {
                    permit.overload();
                }
                claims.recovered(&limiter);
            }
        }

        #[test]
        fn every_duration_past_its_bound_is_refused_by_name_in_code(d in past_a_year()) {
            let fixed = || Limiter::builder(Fixed::new(4).unwrap());
            refused(fixed().timeout(d).build(), "limiter.timeout", d);
            let learned = Timeout::learned(Duration::from_secs(15));
            refused(
                fixed().timeout(Timeout::learned(d)).build(),
                "limiter.timeout.ceiling",
                d,
            );
            refused(fixed().timeout(learned.floor(d)).build(), "limiter.timeout.floor", d);
            refused(fixed().timeout(learned.window(d)).build(), "limiter.timeout.window", d);
            let retry = RetryConfig::default;
            let with = |config: RetryConfig| fixed().retry(config).build();
            refused(with(RetryConfig { timeout: Some(d), ..retry() }), "retry.timeout", d);
            refused(with(RetryConfig { deadline: Some(d), ..retry() }), "retry.deadline", d);
            let backoff = |base, cap| RetryConfig { backoff: Backoff { base, cap }, ..retry() };
            refused(with(backoff(d, d)), "retry.backoff.base", d);
            refused(with(backoff(Duration::ZERO, d)), "retry.backoff.cap", d);
            let budget = Budget { ttl: d, ..Budget::default() };
            refused(with(RetryConfig { budget, ..retry() }), "retry.budget.ttl", d);
            refused(fixed().max_wait(d).build(), "limiter.max_wait", d);
            refused(
                KeyedLimiters::builder(|_: &u32| Ok(Limiter::builder(
                    Box::new(Fixed::new(4).unwrap()) as Box<dyn rheostat::algorithms::Algorithm>,
                )))
                .idle_timeout(d)
                .build(),
                "keyed.idle_timeout",
                d,
            );
            let limiter = fixed().build().unwrap();
            refused(limiter.overrides().set(Override::Cap(2), d), "override.lasting", d);
            refused(
                ProbeAllowance { cycle: d, ..ProbeAllowance::default() }.validate(),
                "allowance.cycle",
                d,
            );
        }

        #[test]
        fn every_duration_past_its_bound_is_refused_by_name_in_a_file(
            secs in MAX_DURATION.as_secs() + 1..=u64::MAX,
            unit in prop::sample::select(vec!["s", "h", "days", "years"]),
            field in 0usize..FIELDS.len(),
        ) {
            let (table, key, named) = FIELDS[field];
            let text = format!(
                "[limiters.a.policy]\npolicy = \"fixed\"\nlimit = 3\n[limiters.a{table}]\n{key} = \"{secs}{unit}\"\n"
            );
            let text = if table == ".policy" {
                format!("[limiters.a.policy]\npolicy = \"aimd\"\n{key} = \"{secs}{unit}\"\n")
            } else if table.is_empty() {
                format!("[limiters.a]\n{key} = \"{secs}{unit}\"\npolicy = {{ policy = \"fixed\", limit = 3 }}\n")
            } else {
                text
            };
            let e = LimitersConfig::from_toml(&text).unwrap_err();
            prop_assert_eq!(e.field(), named, "{}", e);
        }
    }

    /// Each duration a limiter's table takes: the table under
    /// `[limiters.a]`, the key, and the field its error names.
    const FIELDS: [(&str, &str, &str); 10] = [
        ("", "max_wait", "limiters.a.max_wait"),
        ("", "timeout", "limiters.a.timeout"),
        (".timeout", "ceiling", "limiters.a.timeout.ceiling"),
        (".timeout", "window", "limiters.a.timeout.window"),
        (".retry", "timeout", "limiters.a.retry.timeout"),
        (".retry", "deadline", "limiters.a.retry.deadline"),
        (".retry.backoff", "cap", "limiters.a.retry.backoff.cap"),
        (".retry.budget", "ttl", "limiters.a.retry.budget.ttl"),
        (".policy", "timeout", "limiters.a.policy.timeout"),
        (".policy", "window", "limiters.a.policy.window"),
    ];
}
