//! Policies and limiters from TOML and JSON: every policy round-trips, and
//! every bad field is reported by name, with the reason and the line.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::time::Duration;

use rheostat::algorithms::breaker::{BreakerConfig, BreakerWindow, Cooldown, HalfOpen};
use rheostat::algorithms::window::{Aggregation, WindowConfig};
use rheostat::algorithms::{AimdConfig, AimdMode, GradientConfig, ThrottleConfig, VegasConfig};
use rheostat::config::{ConfigFileError, KeyedConfig, LimiterConfig, LimitersConfig, PolicyConfig};
use rheostat::{
    clock::ManualClock,
    limiter::{QueueOrder, Sharding},
    timeout::LearnedTimeout,
    Limiter, Outcome, Timeout,
};

/// Each error of a file: the field as the file writes it, and its line.
fn fields_and_lines(err: &ConfigFileError) -> Vec<(String, Option<usize>)> {
    err.errors()
        .map(|e| (e.field().to_owned(), e.line()))
        .collect()
}

/// Each error of a file: the field, the reason and the line.
fn fields_reasons_and_lines(err: &ConfigFileError) -> Vec<(String, String, Option<usize>)> {
    err.errors()
        .map(|e| (e.field().to_owned(), e.reason().to_owned(), e.line()))
        .collect()
}

fn every_policy() -> Vec<PolicyConfig> {
    let ms = Duration::from_millis;
    vec![
        PolicyConfig::Fixed { limit: 12 },
        PolicyConfig::Aimd(AimdConfig::default()),
        PolicyConfig::Aimd(AimdConfig {
            mode: AimdMode::Latency,
            initial: 5,
            min: 2,
            max: 50,
            backoff: 0.75,
            timeout: ms(800),
            one_backoff_per_flight: false,
            noise: 3.0,
            loss_tolerance: 0.2,
            window: WindowConfig {
                min_samples: 20,
                ..WindowConfig::default()
            },
            slow_start: false,
            open_start: true,
        }),
        PolicyConfig::Aimd(AimdConfig::netflix()),
        PolicyConfig::Vegas(VegasConfig::default()),
        PolicyConfig::Vegas(VegasConfig {
            beta: 9.0,
            window: WindowConfig {
                aggregation: Aggregation::Percentile(0.99),
                min_duration: ms(100),
                ..WindowConfig::default()
            },
            ..VegasConfig::default()
        }),
        PolicyConfig::Gradient(GradientConfig::default()),
        PolicyConfig::Gradient(GradientConfig {
            tolerance: 1.5,
            long_window: 100,
            ..GradientConfig::default()
        }),
        PolicyConfig::Throttle(ThrottleConfig::default()),
        PolicyConfig::Throttle(ThrottleConfig {
            k: 1.0,
            window: Duration::from_secs(30),
            buckets: 30,
            count_rejected: true,
            ..ThrottleConfig::default()
        }),
        PolicyConfig::Breaker(BreakerConfig::recommended()),
        PolicyConfig::Breaker(BreakerConfig::classic()),
        PolicyConfig::Breaker(BreakerConfig {
            failure_rate: None,
            slow_call_rate: Some(0.5),
            slow_call_duration: Duration::from_secs(5),
            cooldown: Cooldown::Fixed(Duration::from_secs(30)),
            half_open: HalfOpen::Fraction {
                fraction: 0.05,
                period: Duration::from_secs(30),
                success_rate: 0.8,
                min_probes: 5,
            },
            window: BreakerWindow::Count { calls: 50 },
            ramp: Duration::ZERO,
            ..BreakerConfig::recommended()
        }),
        PolicyConfig::Stack {
            members: vec![
                PolicyConfig::Breaker(BreakerConfig::default()),
                PolicyConfig::Gradient(GradientConfig::default()),
                PolicyConfig::Stack {
                    members: vec![PolicyConfig::Fixed { limit: 3 }],
                },
            ],
        },
    ]
}

#[test]
fn every_policy_round_trips_through_toml_and_builds() {
    for policy in every_policy() {
        let text = toml::to_string(&policy).unwrap();
        let back = PolicyConfig::from_toml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, policy, "{text}");
        let limiter = Limiter::new(back.build().unwrap());
        assert_eq!(limiter.snapshot().policy, policy.name());
    }
}

#[test]
fn every_policy_round_trips_through_json_and_builds() {
    for policy in every_policy() {
        let text = serde_json::to_string_pretty(&policy).unwrap();
        let back = PolicyConfig::from_json(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, policy, "{text}");
        assert!(back.build().is_ok());
    }
}

#[test]
fn a_whole_file_round_trips_with_limiter_options() {
    let mut payments = LimiterConfig::new(AimdConfig::default());
    payments.queue = QueueOrder::Lifo;
    payments.max_waiters = 64;
    payments.max_wait = Some(Duration::from_millis(200));
    payments.on_drop = Outcome::Overload;
    payments.sharding = Sharding::Off;
    payments.retry = Some(rheostat::retry::RetryConfig {
        hedge: Some(rheostat::retry::Hedge {
            max: 2,
            ..rheostat::retry::Hedge::after(Duration::from_millis(40))
        }),
        ..rheostat::retry::RetryConfig::default()
    });
    let mut search = LimiterConfig::new(AimdConfig::default());
    search.timeout = Some(rheostat::Timeout::learned(Duration::from_secs(15)).into());
    search.retry = Some(rheostat::retry::RetryConfig {
        hedge: Some(rheostat::retry::Hedge::default()),
        ..rheostat::retry::RetryConfig::default()
    });
    let mut file = LimitersConfig {
        default: Some(LimiterConfig::new(PolicyConfig::Fixed { limit: 10 })),
        ..LimitersConfig::default()
    };
    file.limiters.insert("payments".into(), payments);
    file.limiters.insert("search".into(), search);
    for policy in every_policy() {
        file.limiters
            .insert(format!("dep{}", file.limiters.len()), policy.into());
    }
    let toml_text = toml::to_string(&file).unwrap();
    assert_eq!(LimitersConfig::from_toml(&toml_text).unwrap(), file);
    let json_text = serde_json::to_string(&file).unwrap();
    assert_eq!(LimitersConfig::from_json(&json_text).unwrap(), file);
    let limiter = file.build("payments").unwrap();
    assert_eq!(limiter.name(), "payments");
    assert_eq!(file.build("unlisted").unwrap().gate().limit, 10);
}

#[test]
fn sharding_is_read_by_name_and_defaults_to_on_contention() {
    let read = |text: &str| toml::from_str::<LimiterConfig>(text).map(|c| c.sharding);
    let policy = "policy = { policy = \"fixed\", limit = 8 }";
    assert_eq!(read(policy).unwrap(), Sharding::OnContention);
    for (name, sharding) in [
        ("off", Sharding::Off),
        ("on-contention", Sharding::OnContention),
        ("always", Sharding::Always),
    ] {
        assert_eq!(
            read(&format!("sharding = \"{name}\"\n{policy}")).unwrap(),
            sharding
        );
    }
    let err = read(&format!("sharding = \"sometimes\"\n{policy}")).unwrap_err();
    assert!(err.to_string().contains("sometimes"), "{err}");
}

#[test]
fn omitted_fields_take_the_policy_defaults() {
    for (name, expected) in [
        ("aimd", PolicyConfig::Aimd(AimdConfig::default())),
        ("vegas", PolicyConfig::Vegas(VegasConfig::default())),
        (
            "gradient",
            PolicyConfig::Gradient(GradientConfig::default()),
        ),
        (
            "throttle",
            PolicyConfig::Throttle(ThrottleConfig::default()),
        ),
        ("breaker", PolicyConfig::Breaker(BreakerConfig::default())),
    ] {
        let parsed = PolicyConfig::from_toml(&format!("policy = \"{name}\"")).unwrap();
        assert_eq!(parsed, expected);
    }
    let parsed = PolicyConfig::from_toml(
        r#"
        policy = "aimd"
        timeout = "800ms"
        "#,
    )
    .unwrap();
    assert_eq!(
        parsed,
        PolicyConfig::Aimd(AimdConfig {
            timeout: Duration::from_millis(800),
            ..AimdConfig::default()
        })
    );
}

#[test]
fn aimd_takes_netflix_s_rule_set_by_name() {
    let parsed = PolicyConfig::from_toml(
        r#"
        policy = "aimd"
        mode = "netflix"
        initial = 20
        min = 20
        max = 200
        one_backoff_per_flight = false
        "#,
    )
    .unwrap();
    assert_eq!(parsed, PolicyConfig::Aimd(AimdConfig::netflix()));
    let limiter = Limiter::new(parsed.build().unwrap());
    assert_eq!(limiter.gate().limit, 20);
    let default = PolicyConfig::from_toml("policy = \"aimd\"").unwrap();
    let PolicyConfig::Aimd(default) = default else {
        panic!("{default:?}");
    };
    assert_eq!((default.mode, default.min), (AimdMode::Latency, 1));
}

#[test]
fn switching_aimd_to_a_breaker_is_an_edit_to_the_file() {
    let aimd = "[limiters.payments.policy]\npolicy = \"aimd\"\n";
    let breaker = "[limiters.payments.policy]\npolicy = \"breaker\"\n";
    let a = LimitersConfig::from_toml(aimd)
        .unwrap()
        .build("payments")
        .unwrap();
    let b = LimitersConfig::from_toml(breaker)
        .unwrap()
        .build("payments")
        .unwrap();
    assert_eq!(a.snapshot().policy, "aimd");
    assert_eq!(b.snapshot().policy, "breaker");
}

/// The shipped example says its `payments` limiter switches policy by
/// changing one word; it does, for every policy that needs no field.
#[test]
fn the_shipped_example_switches_policy_with_one_word() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/policies.toml"
    ))
    .unwrap();
    let aimd = "[limiters.payments.policy]\npolicy = \"aimd\"\n";
    assert!(text.contains(aimd), "the example's payments table changed");
    for policy in ["breaker", "gradient", "vegas", "throttle", "aimd"] {
        let edited = text.replace(aimd, &aimd.replace("aimd", policy));
        let file = LimitersConfig::from_toml(&edited).unwrap_or_else(|e| panic!("{policy}: {e}"));
        assert_eq!(file.build("payments").unwrap().snapshot().policy, policy);
    }
}

/// `(file body, field, words in the reason, line)`.
const BAD_FILES: &[(&str, &str, &str, usize)] = &[
    // Unknown fields, at every level.
    ("[limiters.p]\nmax_wat = \"1s\"\n[limiters.p.policy]\npolicy = \"aimd\"", "limiters.p.max_wat", "unknown field `max_wat`", 2),
    ("[limiters.p.policy]\npolicy = \"aimd\"\nbackof = 0.9", "limiters.p.policy.backof", "unknown field `backof`", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nwindow.time = { lenght = \"30s\", buckets = 3 }", "limiters.p.policy.window.time.lenght", "unknown field `lenght`", 3),
    ("[limiters.p.policy]\npolicy = \"vegas\"\n[limiters.p.policy.window]\nmin_sample = 3", "limiters.p.policy.window.min_sample", "unknown field `min_sample`", 4),
    ("[limitters.p.policy]\npolicy = \"aimd\"", "limitters", "unknown field `limitters`", 1),
    // Unknown or missing policy names and required fields.
    ("[limiters.p.policy]\npolicy = \"aimdd\"", "limiters.p.policy.policy", "unknown policy `aimdd`", 2),
    ("[limiters.p.policy]\nbackoff = 0.5", "limiters.p.policy", "missing field `policy`", 1),
    ("[limiters.p]\nmax_wait = \"1s\"", "limiters.p", "missing field `policy`", 1),
    ("[limiters.p.policy]\npolicy = \"fixed\"", "limiters.p.policy", "missing field `limit`", 1),
    // Wrong types.
    ("[limiters.p.policy]\npolicy = \"aimd\"\nbackoff = \"fast\"", "limiters.p.policy.backoff", "found \"fast\", expected a number", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\nmin = -1", "limiters.p.policy.min", "found -1, expected a whole number in [1, 2147483647]", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\ntimeout = \"soon\"", "limiters.p.policy.timeout", "expected a duration", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\ntimeout = 5", "limiters.p.policy.timeout", "found 5, expected a duration such as \"800ms\"", 3),
    ("[limiters.p]\nqueue = \"random\"\n[limiters.p.policy]\npolicy = \"aimd\"", "limiters.p.queue", "unknown variant `random`", 2),
    // Out of range: NaN, zero and huge durations, bounds.
    ("[limiters.p.policy]\npolicy = \"aimd\"\nbackoff = nan", "limiters.p.policy.backoff", "found NaN, expected a number in (0, 1)", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\nbackoff = 1.5", "limiters.p.policy.backoff", "found 1.5", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\ntimeout = \"0s\"", "limiters.p.policy.timeout", "a duration above 0 and at most 365 days", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\ntimeout = \"400 years\"", "limiters.p.policy.timeout", "a duration above 0 and at most 365 days", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\nmin = 50\nmax = 10", "limiters.p.policy.min", "at most `max` (10)", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\nmax = 200\ninitial = 500", "limiters.p.policy.initial", "[min, max] = [1, 200]", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\nmode = \"vector\"", "limiters.p.policy.mode", "unknown variant `vector`, expected `latency` or `netflix`", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\nnoise = 11", "limiters.p.policy.noise", "a number in [0, 10]", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\nloss_tolerance = 1.0", "limiters.p.policy.loss_tolerance", "a number in [0, 1)", 3),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.policy.window]\nmin_samples = 0", "limiters.p.policy.window.min_samples", "found 0", 4),
    ("[limiters.p.policy]\npolicy = \"fixed\"\nlimit = 0", "limiters.p.policy.limit", "found 0", 3),
    ("[limiters.p.policy]\npolicy = \"vegas\"\nbeta = 2.0", "limiters.p.policy.beta", "found 2", 3),
    ("[limiters.p.policy]\npolicy = \"vegas\"\nwindow = { aggregation.percentile = nan }", "limiters.p.policy.window.aggregation.percentile", "a percentile in (0, 1]", 3),
    ("[limiters.p.policy]\npolicy = \"gradient\"\nsmoothing = 0.0", "limiters.p.policy.smoothing", "a number in (0, 1]", 3),
    ("[limiters.p.policy]\npolicy = \"gradient\"\n[limiters.p.policy.window]\nmax_duration = \"100ms\"", "limiters.p.policy.window.max_duration", "at least `window.min_duration`", 4),
    ("[limiters.p.policy]\npolicy = \"throttle\"\nk = 0.5", "limiters.p.policy.k", "a number in [1, 100]", 3),
    ("[limiters.p.policy]\npolicy = \"throttle\"\nmax_reject_probability = 1.0", "limiters.p.policy.max_reject_probability", "[0, 1)", 3),
    ("[limiters.p.policy]\npolicy = \"throttle\"\nwindow = \"0s\"", "limiters.p.policy.window", "found \"0s\"", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nfailure_rate = 1.5", "limiters.p.policy.failure_rate", "a rate in (0, 1]", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nfailure_rate = \"off\"", "limiters.p.policy.failure_rate", "when `slow_call_rate` is not set either", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nfailure_rate = \"sometimes\"", "limiters.p.policy.failure_rate", "a rate in (0, 1] or \"off\"", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\ncooldown.exponential = { base = \"90s\", factor = 2.0, cap = \"60s\" }", "limiters.p.policy.cooldown.exponential.base", "at most `cooldown.exponential.cap` (60s)", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\ncooldown.fixed = \"0ms\"", "limiters.p.policy.cooldown.fixed", "above 0", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nwindow.time = { length = \"30s\", buckets = 0 }", "limiters.p.policy.window.time.buckets", "[1, 10000]", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nwindow.count = { calls = 10 }", "limiters.p.policy.min_calls", "at most `window.count.calls` (10)", 1),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nhalf_open.probes = { probes = 3, close_after = 4 }", "limiters.p.policy.half_open.probes.close_after", "at most `half_open.probes.probes` (3)", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\ncooldown_jitter = inf", "limiters.p.policy.cooldown_jitter", "found inf", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nramp = \"2000 days\"", "limiters.p.policy.ramp", "at most 365 days", 3),
    ("[limiters.p]\nmax_wait = \"0s\"\n[limiters.p.policy]\npolicy = \"aimd\"", "limiters.p.max_wait", "above 0", 2),
    ("[limiters.p]\nmax_waiters = 99999999\n[limiters.p.policy]\npolicy = \"aimd\"", "limiters.p.max_waiters", "[0, 1048576]", 2),
    // The limiter's old `probe_timeout` is the breaker's now: refused, with
    // the way to it, whatever its value.
    ("[default]\nprobe_timeout = \"5s\"\n[default.policy]\npolicy = \"breaker\"", "default.probe_timeout", "the breaker's `policy` table", 2),
    ("[limiters.p]\nmax_wait = \"1s\"\nprobe_timeout = \"0s\"\n[limiters.p.policy]\npolicy = \"aimd\"", "limiters.p.probe_timeout", "not a limiter option any more", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nprobe_timeout = \"0s\"", "limiters.p.policy.probe_timeout", "above 0", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\ncooldown.proportional = { base = \"5s\", share = 1.5, cap = \"60s\" }", "limiters.p.policy.cooldown.proportional.share", "a rate in (0, 1]", 3),
    ("[limiters.p.policy]\npolicy = \"breaker\"\nramp_successes = 0", "limiters.p.policy.ramp_successes", "[1, 100000]", 3),
    // Stacks name the member.
    ("[limiters.p.policy]\npolicy = \"stack\"\nmembers = []", "limiters.p.policy.members", "at least one policy", 3),
    ("[limiters.p.policy]\npolicy = \"stack\"\n[[limiters.p.policy.members]]\npolicy = \"fixed\"\nlimit = 4\n[[limiters.p.policy.members]]\npolicy = \"aimd\"\nbackoff = 2", "limiters.p.policy.members[1].backoff", "found 2", 8),
    ("[limiters.p.policy]\npolicy = \"stack\"\n[[limiters.p.policy.members]]\npolicy = \"aimd\"\nbackof = 0.5", "limiters.p.policy.members[0].backof", "unknown field `backof`", 5),    // The retry block beside the policy.
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nattempts = 0", "limiters.p.retry.attempts", "found 0, expected a whole number in [1, 10]", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nbudget = { ratio = nan }", "limiters.p.retry.budget.ratio", "found NaN, expected a number in [0, 1]", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nbudget.ratio = 1.5", "limiters.p.retry.budget.ratio", "found 1.5", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\ntimeout = \"2s\"\ndeadline = \"1s\"", "limiters.p.retry.deadline", "at least one attempt's timeout", 5),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\natempts = 2", "limiters.p.retry.atempts", "unknown field `atempts`", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nbackoff = { base = \"soon\" }", "limiters.p.retry.backoff.base", "soon", 4),    // Priorities beside them.
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.priorities]\nclasses = [{ name = \"a\", share = 1.5 }]", "limiters.p.priorities.classes[0].share", "found 1.5, expected a number in [0, 1]", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.priorities]\nclasses = [{ name = \"a\" }, { name = \"a\" }]", "limiters.p.priorities.classes[1].name", "a name no other class has", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.priorities]\ndefault = \"gold\"", "limiters.p.priorities.default", "the name of a class", 4),    // The server table.
    ("[limiters.p.policy]\npolicy = \"gradient\"\n[limiters.p.server]\nstatus = 200", "limiters.p.server.status", "found 200, expected a 4xx or 5xx status", 4),
    ("[limiters.p.policy]\npolicy = \"gradient\"\n[limiters.p.server]\nstauts = 503", "limiters.p.server.stauts", "unknown field `stauts`", 4),
    // The limiter's timeout: typed, "auto" or a learned one's table.
    ("[limiters.p]\ntimeout = \"soon\"\n[limiters.p.policy]\npolicy = \"aimd\"", "limiters.p.timeout", "found \"soon\", expected a duration such as \"800ms\"", 2),
    ("[limiters.p]\ntimeout = \"automatic\"\n[limiters.p.policy]\npolicy = \"aimd\"", "limiters.p.timeout", "\"auto\", learned from the dependency's latencies", 2),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.timeout]\nquantile = 0.0", "limiters.p.timeout.quantile", "found 0.0, expected a number in (0, 1)", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.timeout]\nwindow = \"0s\"", "limiters.p.timeout.window", "found \"0s\", expected a duration above 0", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.timeout]\nflor = \"5ms\"", "limiters.p.timeout.flor", "unknown field `flor`", 4),
    // Whether calls may be cut early: a boolean, in the learned timeout's
    // table and nowhere else.
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.timeout]\ncut_early = \"no\"", "limiters.p.timeout.cut_early", "found \"no\", expected true or false", 4),
    ("[limiters.p]\ntimeout = { ceiling = \"30s\", cut_early = 0 }\n[limiters.p.policy]\npolicy = \"aimd\"", "limiters.p.timeout.cut_early", "found 0, expected true or false", 2),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.timeout]\ncut_erly = false", "limiters.p.timeout.cut_erly", "unknown field `cut_erly`, expected one of", 4),
    ("[limiters.p]\ntimeout = \"30s\"\ncut_early = false\n[limiters.p.policy]\npolicy = \"aimd\"", "limiters.p.cut_early", "a key of its learned `timeout` table", 3),
    // A retry's hedge: "auto" or a table, its delay learned only beside a
    // learned timeout.
    ("[limiters.p]\ntimeout = \"auto\"\n[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nhedge = \"always\"", "limiters.p.retry.hedge", "found \"always\", expected \"auto\", a delay learned", 6),
    ("[limiters.p]\ntimeout = \"auto\"\n[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nhedge = { quantile = 1.5 }", "limiters.p.retry.hedge.quantile", "found 1.5, expected a number in [0.5, 0.999]", 6),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nhedge = { delay = \"40ms\", max = 0 }", "limiters.p.retry.hedge.max", "found 0, expected a whole number in [1, 9]", 4),
    ("[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nhedge = { dely = \"40ms\" }", "limiters.p.retry.hedge.dely", "unknown field `dely`", 4),
    ("[limiters.p]\ntimeout = \"2s\"\n[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nhedge = \"auto\"", "limiters.p.retry.hedge", "a typed `delay`", 6),
];

#[test]
fn each_invalid_field_in_a_file_is_reported_by_name_reason_and_line() {
    for &(body, field, reason, line) in BAD_FILES {
        let err = LimitersConfig::from_toml(body).expect_err(body);
        assert_eq!(err.field(), field, "{body}\n{err}");
        assert!(err.reason().contains(reason), "{body}\n{err}");
        assert_eq!(err.line(), Some(line), "{body}\n{err}");
        let shown = err.to_string();
        assert!(
            shown.contains(field) && shown.contains(&format!("line {line}")),
            "{shown}"
        );
    }
}

#[test]
fn json_files_name_the_field_too() {
    for (body, field, reason) in [
        (
            r#"{"limiters": {"p": {"policy": {"policy": "aimd", "backof": 1}}}}"#,
            "limiters.p.policy.backof",
            "unknown field `backof`",
        ),
        (
            r#"{"limiters": {"p": {"policy": {"policy": "aimd", "backoff": 2}}}}"#,
            "limiters.p.policy.backoff",
            "found 2",
        ),
        (
            r#"{"limiters": {"p": {"policy": {"policy": "aimd", "timeout": 5}}}}"#,
            "limiters.p.policy.timeout",
            "found 5, expected a duration such as \"800ms\"",
        ),
        (
            r#"{"limiters": {"p": {"policy": {"policy": "breaker", "failure_rate": null}}}}"#,
            "limiters.p.policy.failure_rate",
            "not set either",
        ),
        (
            r#"{"limiters": {"p": {"policy": {"policy": "stack", "members": [{"policy": "fixed", "limit": 0}]}}}}"#,
            "limiters.p.policy.members[0].limit",
            "found 0",
        ),
    ] {
        let err = LimitersConfig::from_json(body).expect_err(body);
        assert_eq!(err.field(), field, "{err}");
        assert!(err.reason().contains(reason), "{err}");
    }
    let err = LimitersConfig::from_json(
        "{\n  \"limiters\": {\n    \"p\": {\"policy\": {\"policy\": \"aimd\", \"min\": \"x\"}}}}",
    )
    .unwrap_err();
    assert_eq!(err.line(), Some(3));
}

#[test]
fn a_syntax_error_gives_the_line_and_a_range_error_its_source() {
    let err = LimitersConfig::from_toml("[limiters.p.policy]\npolicy = \"aimd\"\nbackoff = = 2")
        .unwrap_err();
    assert_eq!(err.field(), "");
    assert_eq!(err.line(), Some(3));
    assert!(err.config_error().is_none());

    let err = LimitersConfig::from_toml("[limiters.p.policy]\npolicy = \"aimd\"\nbackoff = 2.0")
        .unwrap_err();
    assert_eq!(
        err.config_error().unwrap().field(),
        "limiters.p.policy.backoff"
    );
    // The message says it all: the range error is handed out typed, not
    // as a source a reporter would print a second time.
    assert!(std::error::Error::source(&err).is_none());
}

#[test]
fn a_file_is_loaded_from_disk_and_its_errors_name_it() {
    let dir = std::env::temp_dir().join(format!("rheostat-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "[limiters.p.policy]\npolicy = \"fixed\"\nlimit = 2\n",
    )
    .unwrap();
    assert_eq!(
        LimitersConfig::load(&good)
            .unwrap()
            .build("p")
            .unwrap()
            .gate()
            .limit,
        2
    );
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"limiters": {"p": {"policy": {"policy": "fixed", "limit": 0}}}}"#,
    )
    .unwrap();
    let err = LimitersConfig::load(&bad).unwrap_err();
    assert!(
        err.to_string().starts_with(&bad.display().to_string()),
        "{err}"
    );
    assert_eq!(err.field(), "limiters.p.policy.limit");
    let missing = LimitersConfig::load(dir.join("missing.toml")).unwrap_err();
    assert!(
        missing.reason().starts_with("cannot read the file"),
        "{missing}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_shipped_example_file_loads() {
    let file = LimitersConfig::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/policies.toml"
    ))
    .unwrap();
    for name in file.limiters.keys() {
        assert!(file.build(name).is_ok(), "{name}");
    }
    assert!(file.default.is_some());
}

#[test]
fn configuration_types_name_fields_as_a_file_writes_them() {
    let stack = PolicyConfig::Stack {
        members: vec![
            PolicyConfig::Fixed { limit: 3 },
            PolicyConfig::Aimd(AimdConfig {
                backoff: 2.0,
                ..AimdConfig::default()
            }),
        ],
    };
    assert_eq!(stack.validate().unwrap_err().field(), "members[1].backoff");
    let err = PolicyConfig::Aimd(AimdConfig {
        backoff: f64::NAN,
        ..AimdConfig::default()
    })
    .build()
    .err()
    .unwrap();
    assert_eq!(err.field(), "backoff");

    // The breaker names its choices' fields without the choice; a file
    // (and so every configuration type) writes the choice.
    let breaker = PolicyConfig::Breaker(BreakerConfig {
        window: BreakerWindow::Count { calls: 0 },
        ..BreakerConfig::default()
    });
    let limiter = LimiterConfig::new(breaker.clone());
    assert_eq!(
        limiter.validate().unwrap_err().field(),
        "policy.window.count.calls"
    );
    let mut file = LimitersConfig::default();
    file.limiters.insert("a".to_owned(), limiter);
    assert_eq!(
        file.build("a").unwrap_err().field(),
        "limiters.a.policy.window.count.calls"
    );
    assert_eq!(
        file.validate().unwrap_err().field(),
        "limiters.a.policy.window.count.calls"
    );
    let waits = LimiterConfig {
        max_wait: Some(Duration::ZERO),
        ..LimiterConfig::new(PolicyConfig::Fixed { limit: 1 })
    };
    assert_eq!(waits.validate().unwrap_err().field(), "max_wait");
    // The policy's own constructor names the field after the policy.
    let PolicyConfig::Breaker(config) = breaker else {
        unreachable!()
    };
    assert_eq!(
        rheostat::algorithms::breaker::Breaker::new(config)
            .unwrap_err()
            .field(),
        "breaker.window.count.calls"
    );
}

/// Each message a new user met, as the file wrote it: the path, the value,
/// what is allowed, the line.
#[test]
fn bad_values_are_reported_as_written() {
    let toml = |text: &str| PolicyConfig::from_toml(text).unwrap_err();
    let json = |text: &str| PolicyConfig::from_json(text).unwrap_err();

    let e = toml("policy=\"fixed\"\nlimit=0");
    assert_eq!((e.field(), e.line()), ("limit", Some(2)), "{e}");

    // Not written: no line of its own (inside a file's table, the table's).
    let e = toml("policy = \"aimd\"\nmax = 5");
    assert_eq!((e.field(), e.line()), ("initial", None), "{e}");
    assert!(e.reason().contains("found 10 (the default"), "{e}");

    let e = toml("policy = \"aimd\"\ntimeout = \"-5s\"");
    assert_eq!((e.field(), e.line()), ("timeout", Some(2)), "{e}");
    assert!(
        e.reason()
            .starts_with("found \"-5s\", expected a duration such as"),
        "{e}"
    );
    assert!(e.reason().contains("cannot be negative"), "{e}");

    let e = toml("policy = \"aimd\"\nmax = 99999999999999999999");
    assert_eq!(e.field(), "max");
    assert!(
        e.reason()
            .starts_with("found 99999999999999999999, too large"),
        "{e}"
    );
    assert!(
        !e.reason().contains("i128") && !e.reason().contains("any value"),
        "{e}"
    );

    let e = toml(
        "policy = \"breaker\"\nwindow = { count = { calls = 5 }, time = { length = \"30s\", buckets = 30 } }",
    );
    assert_eq!((e.field(), e.line()), ("window", Some(2)), "{e}");
    assert!(e.reason().contains("`count` and `time`"), "{e}");
    assert!(!e.reason().contains("single key"), "{e}");

    let e = toml("policy = \"vegas\"\nalpha = 10\nbeta = 2");
    assert_eq!((e.field(), e.line()), ("beta", Some(3)), "{e}");
    assert!(e.reason().contains("[alpha, 1000] = [10, 1000]"), "{e}");

    let e = json("{\"policy\": \"aimd\",\n \"max\": null}");
    assert_eq!((e.field(), e.line()), ("max", Some(2)), "{e}");
    assert!(
        e.reason()
            .starts_with("found null, expected a whole number"),
        "{e}"
    );

    let e = json("{\"policy\": \"aimd\", \"max\": 5,}");
    assert!(!e.field().contains('?'), "{e}");
    assert!(e.reason().contains("trailing comma"), "{e}");
    assert_eq!(e.line(), Some(1));

    let e = json("{\"policy\": \"aimd\",\n \"max\": 50,\n \"max\": 60}");
    assert_eq!((e.field(), e.line()), ("max", Some(3)), "{e}");
    assert!(e.reason().contains("twice"), "{e}");
    let e = LimitersConfig::from_json(
        r#"{"limiters": {"a": {"policy": {"policy": "aimd"}}, "a": {"policy": {"policy": "fixed", "limit": 1}}}}"#,
    )
    .unwrap_err();
    assert_eq!(e.field(), "limiters.a", "{e}");

    let e = json("{\"policy\": \"aimd\",\n \"backoff\": 1.5}");
    assert_eq!((e.field(), e.line()), ("backoff", Some(2)), "{e}");
    assert_eq!(e.reason(), "found 1.5, expected a number in (0, 1)");
}

/// No error both shows an inner error in its message and returns it as its
/// source: a reporter walking the chain would print it twice.
#[test]
fn no_error_repeats_its_source_in_its_message() {
    use std::error::Error;

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the request failed")
        }
    }
    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    let limiter = rheostat::Limiter::new(rheostat::algorithms::Fixed::new(1).unwrap());
    let _held = limiter.try_acquire().unwrap();
    let rejection = limiter.try_acquire().unwrap_err();
    let file =
        rheostat::config::PolicyConfig::from_toml("policy = \"aimd\"\nbackoff = 2.0").unwrap_err();
    let errors: Vec<Box<dyn Error>> = vec![
        Box::new(rheostat::CallError::Failed(Outer(std::io::Error::other(
            "reset",
        )))),
        Box::new(rheostat::CallError::<std::io::Error>::Rejected(rejection)),
        Box::new(rheostat::CallError::<std::io::Error>::TimedOut(
            std::time::Duration::from_secs(1),
        )),
        Box::new(rheostat::CallError::<std::io::Error>::NoLimiter(
            rheostat::keyed::KeyedError::Config(rheostat::ConfigError::new("x", 1, "2")),
        )),
        Box::new(file),
    ];
    for error in errors {
        let mut current: &dyn Error = &*error;
        while let Some(source) = current.source() {
            assert!(
                !current.to_string().contains(&source.to_string()),
                "{current} repeats its source {source}"
            );
            current = source;
        }
    }
}

/// A policy is checked where serde reads it: one deserialized by any serde
/// format is valid, and one out of range is refused there, named by its
/// path in the table (the breaker's choices included), with no post-check.
#[test]
fn a_policy_is_checked_where_serde_reads_it() {
    let bad: Result<PolicyConfig, _> = serde_json::from_str(r#"{"policy": "aimd", "backoff": 2}"#);
    let message = bad.expect_err("backoff 2 is out of range").to_string();
    assert!(
        message.contains("backoff") && message.contains("found 2"),
        "{message}"
    );

    let e = PolicyConfig::from_toml("policy = \"breaker\"\n[window.count]\ncalls = 0").unwrap_err();
    assert_eq!(
        (e.field(), e.line()),
        ("window.count.calls", Some(3)),
        "{e}"
    );
    assert_eq!(
        e.config_error().map(|c| (c.field(), c.found())),
        Some(("window.count.calls", "0"))
    );
    let e = PolicyConfig::from_toml(
        "policy = \"breaker\"\nhalf_open.probes = { probes = 3, close_after = 5 }",
    )
    .unwrap_err();
    assert_eq!(e.field(), "half_open.probes.close_after", "{e}");
    assert!(
        e.reason().contains("at most `half_open.probes.probes` (3)"),
        "{e}"
    );

    let good: PolicyConfig =
        serde_json::from_str(r#"{"policy": "aimd", "backoff": 0.5}"#).expect("in range");
    assert!(good.build().is_ok());
}

#[test]
fn one_block_per_dependency_holds_its_limit_its_breaker_and_its_retry() {
    let file = LimitersConfig::from_toml(
        r#"
        [limiters.payments.policy]
        policy = "stack"

        [[limiters.payments.policy.members]]
        policy = "breaker"

        [[limiters.payments.policy.members]]
        policy = "gradient"

        [limiters.payments.retry]
        attempts = 3
        timeout = "800ms"
        deadline = "2s"
        backoff = { base = "50ms", cap = "1s" }
        budget = { ratio = 0.1, min_per_second = 5, ttl = "10s" }
    "#,
    )
    .unwrap();
    let payments = file.build("payments").unwrap();
    let retry = payments.retry().expect("a retry policy");
    assert_eq!(retry.config().attempts, 3);
    assert_eq!(retry.config().timeout, Some(Duration::from_millis(800)));
    assert_eq!(retry.config().deadline, Some(Duration::from_secs(2)));
    assert_eq!(retry.config().budget.ratio, 0.1);
    assert_eq!(retry.config().budget.min_per_second, 5.0);
    // Left out, no retry; the defaults fill what a block leaves out.
    let plain = LimitersConfig::from_toml("[limiters.p.policy]\npolicy = \"aimd\"").unwrap();
    assert!(plain.build("p").unwrap().retry().is_none());
    let short = LimitersConfig::from_toml(
        "[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.retry]\nattempts = 2",
    )
    .unwrap();
    let config = short.build("p").unwrap().retry().unwrap().config().clone();
    assert_eq!(
        config,
        rheostat::retry::RetryConfig {
            attempts: 2,
            ..Default::default()
        }
    );
}

#[test]
fn a_retry_hedges_with_a_delay_learned_or_typed() {
    use rheostat::retry::Hedge;
    let file = LimitersConfig::from_toml(
        r#"
        [limiters.search]
        timeout = "auto"
        policy = { policy = "recommended" }
        retry = { hedge = "auto" }

        [limiters.catalog]
        timeout = "2s"
        policy = { policy = "recommended" }
        retry = { hedge = { delay = "40ms", max = 2 } }
    "#,
    )
    .unwrap();
    let hedge = |name| {
        let limiter = file.build(name).unwrap();
        limiter.retry().unwrap().config().hedge
    };
    assert_eq!(hedge("search"), Some(Hedge::default()));
    assert_eq!(
        hedge("catalog"),
        Some(Hedge {
            max: 2,
            ..Hedge::after(Duration::from_millis(40))
        })
    );
    let catalog = file.build("catalog").unwrap();
    assert_eq!(catalog.timeouts().hedge, Some(Duration::from_millis(40)));
}

#[test]
fn priorities_sit_in_the_same_block_as_the_policy() {
    let file = LimitersConfig::from_toml(
        r#"
        [limiters.search.policy]
        policy = "gradient"

        [limiters.search.priorities]
        classes = [{ name = "checkout", share = 0.3 }, { name = "browse" }, { name = "prefetch" }]
        default = "browse"

        [limiters.feed.policy]
        policy = "aimd"

        [limiters.feed.priorities]
    "#,
    )
    .unwrap();
    let search = file.build("search").unwrap();
    assert_eq!(
        search.classes().unwrap().get("prefetch"),
        Some(rheostat::priority::Class::new(2))
    );
    let p = search.try_acquire().unwrap();
    assert_eq!(
        search.classes().unwrap().in_flight(),
        [0, 1, 0],
        "the default class is browse"
    );
    drop(p);
    // An empty table: SRE's four.
    let feed = file.build("feed").unwrap();
    assert_eq!(feed.classes().unwrap().in_flight(), [0, 0, 0, 0]);
    assert!(file.build("search").is_ok());
}

#[test]
fn a_server_table_makes_the_queue_newest_first_and_bounded_unless_told_otherwise() {
    let file = LimitersConfig::from_toml(
        r#"
        [limiters.api.policy]
        policy = "gradient"
        [limiters.api.server]

        [limiters.batch]
        queue = "fifo"
        max_wait = "2s"
        [limiters.batch.policy]
        policy = "gradient"
        [limiters.batch.server]
        wait = false

        [limiters.client.policy]
        policy = "gradient"
    "#,
    )
    .unwrap();
    let api = &file.limiters["api"];
    assert_eq!(api.queue, QueueOrder::Lifo);
    assert_eq!(api.max_wait, Some(Duration::from_millis(100)));
    assert_eq!(api.server.as_ref().unwrap().status, 503);
    let batch = &file.limiters["batch"];
    assert_eq!(
        (batch.queue, batch.max_wait),
        (QueueOrder::Fifo, Some(Duration::from_secs(2)))
    );
    assert!(!batch.server.as_ref().unwrap().wait);
    let client = &file.limiters["client"];
    assert_eq!(
        (client.queue, client.max_wait, client.server.is_none()),
        (QueueOrder::Fifo, None, true)
    );
}

/// The README's recommended configuration in a file — the recommended
/// policy and a learned timeout, a line each — builds what
/// `Limiter::recommended` builds in code.
#[test]
fn the_recommended_limiter_in_a_file_is_the_recommended_limiter_in_code() {
    let file = LimitersConfig::from_toml(
        "[limiters.payments]\ntimeout = \"auto\"\n[limiters.payments.policy]\npolicy = \"recommended\"\n",
    )
    .unwrap();
    let from_file = file.build("payments").unwrap();
    let in_code = Limiter::recommended();
    assert_eq!(from_file.snapshot().policy, in_code.snapshot().policy);
    assert_eq!(from_file.gate(), in_code.gate());
    assert_eq!(from_file.timeouts().ceiling, Some(Duration::from_secs(15)));
    assert_eq!(from_file.timeouts().ceiling, in_code.timeouts().ceiling);
    assert_eq!(from_file.timeouts().in_force, in_code.timeouts().in_force);
}

#[test]
fn the_recommended_policy_is_one_line_and_takes_no_fields() {
    let config = PolicyConfig::from_toml("policy = \"recommended\"").unwrap();
    assert_eq!(config, PolicyConfig::Recommended);
    assert_eq!(config.name(), "recommended");
    // It round-trips, and builds the policy `Limiter::recommended` has.
    let text = toml::to_string(&config).unwrap();
    assert_eq!(PolicyConfig::from_toml(&text).unwrap(), config);
    let json = serde_json::to_string(&config).unwrap();
    assert_eq!(PolicyConfig::from_json(&json).unwrap(), config);
    let from_file = Limiter::new(config.build().unwrap());
    let in_code = Limiter::recommended();
    assert_eq!(from_file.snapshot().policy, "aimd");
    assert_eq!(from_file.gate(), in_code.gate());
    assert_eq!(
        rheostat::algorithms::Aimd::recommended().config(),
        &AimdConfig::recommended()
    );
    // The defaults but for the loss tolerance, the open start and the
    // slow-call timeout.
    assert_eq!(
        AimdConfig {
            loss_tolerance: AimdConfig::default().loss_tolerance,
            open_start: AimdConfig::default().open_start,
            timeout: AimdConfig::default().timeout,
            ..AimdConfig::recommended()
        },
        AimdConfig::default()
    );
    // A field is refused by name and line, with the way to set one, and
    // that way is the recommendation.
    let e = PolicyConfig::from_toml("policy = \"recommended\"\nmax = 100\n").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("max"), "{text}");
    assert!(text.contains("policy = \"aimd\""), "{text}");
    assert_eq!(e.line(), Some(2), "{text}");
    let advised =
        "policy = \"aimd\"\nloss_tolerance = 0.8\nopen_start = true\ntimeout = \"365d\"\n";
    assert!(
        text.contains("`loss_tolerance = 0.8`, `open_start = true` and `timeout = \"365d\"`"),
        "{text}"
    );
    assert_eq!(
        PolicyConfig::from_toml(advised).unwrap(),
        PolicyConfig::Aimd(AimdConfig::recommended())
    );
}

/// The shipped example with `checkout` switched to a breaker: its six AIMD
/// fields are all reported at once, in file order, each with its line.
#[test]
fn switching_checkout_to_a_breaker_reports_all_six_aimd_fields_in_file_order() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/policies.toml"
    ))
    .unwrap();
    let aimd = "[limiters.checkout.policy]\npolicy = \"aimd\"\n";
    assert!(text.contains(aimd), "the example's checkout table changed");
    let edited = text.replace(aimd, "[limiters.checkout.policy]\npolicy = \"breaker\"\n");
    let err = LimitersConfig::from_toml(&edited).unwrap_err();
    let checkout = text[..text.find(aimd).unwrap()].lines().count() + 3;
    let found = fields_and_lines(&err);
    let expected: Vec<(String, Option<usize>)> =
        ["mode", "initial", "min", "max", "backoff", "timeout"]
            .iter()
            .enumerate()
            .map(|(i, f)| (format!("limiters.checkout.policy.{f}"), Some(checkout + i)))
            .collect();
    assert_eq!(found, expected, "{err}");
    // The first error's accessors are the first in the file; the message
    // has one line per error.
    assert_eq!(err.field(), "limiters.checkout.policy.mode");
    assert_eq!(err.to_string().lines().count(), 6, "{err}");
    assert!(err
        .errors()
        .all(|e| e.reason().starts_with("unknown field")));
}

/// Limiters are independent: one error in each of several tables is
/// reported, in file order, however serde orders the tables.
#[test]
fn an_error_in_each_of_several_limiters_is_reported_at_once_in_file_order() {
    let text = "[limiters.zeta.policy]\npolicy = \"aimd\"\nbackoff = 1.5\n\
                [limiters.alpha]\nmax_wait = \"0s\"\n[limiters.alpha.policy]\npolicy = \"fixed\"\nlimit = 3\n\
                [limiters.mid.policy]\npolicy = \"aimdd\"\n";
    let err = LimitersConfig::from_toml(text).unwrap_err();
    let found = fields_and_lines(&err);
    assert_eq!(
        found,
        [
            ("limiters.zeta.policy.backoff".to_owned(), Some(3)),
            ("limiters.alpha.max_wait".to_owned(), Some(5)),
            ("limiters.mid.policy.policy".to_owned(), Some(10)),
        ],
        "{err}"
    );
    // The same in JSON.
    let json = r#"{"limiters": {
        "zeta": {"policy": {"policy": "aimd", "backoff": 1.5}},
        "alpha": {"max_wait": "0s", "policy": {"policy": "fixed", "limit": 3}}}}"#;
    let err = LimitersConfig::from_json(json).unwrap_err();
    let found = fields_and_lines(&err);
    assert_eq!(
        found,
        [
            ("limiters.zeta.policy.backoff".to_owned(), Some(2)),
            ("limiters.alpha.max_wait".to_owned(), Some(3)),
        ],
        "{err}"
    );
}

/// A file with more errors than an error keeps says how many more.
#[test]
fn a_file_with_more_errors_than_are_kept_says_how_many_more() {
    let mut text = String::from("[limiters.a.policy]\npolicy = \"aimd\"\n");
    for i in 0..25 {
        text.push_str(&format!("unknown{i} = 1\n"));
    }
    let err = LimitersConfig::from_toml(&text).unwrap_err();
    assert_eq!(err.errors().count(), rheostat::config::MAX_ERRORS);
    assert_eq!(err.omitted(), 5);
    assert!(err.to_string().ends_with("\nand 5 more errors"), "{err}");
    assert_eq!(err.line(), Some(3));
}

/// A number its type refuses (`min = -3` for a `u32`) is said to be out of
/// the field's own range, as `min = 0` is.
#[test]
fn a_negative_number_names_the_fields_own_range_not_its_types() {
    let negative = LimitersConfig::from_toml("[limiters.a.policy]\npolicy = \"aimd\"\nmin = -3\n")
        .unwrap_err();
    let zero =
        LimitersConfig::from_toml("[limiters.a.policy]\npolicy = \"aimd\"\nmin = 0\n").unwrap_err();
    assert_eq!(
        negative.reason(),
        "found -3, expected a whole number in [1, 2147483647]"
    );
    assert_eq!(
        negative.config_error().unwrap().allowed(),
        zero.config_error().unwrap().allowed()
    );
    // A limiter option, checked after reading, and an upper end.
    let waiters = LimitersConfig::from_json(
        r#"{"limiters": {"a": {"max_waiters": -1, "policy": {"policy": "fixed", "limit": 1}}}}"#,
    )
    .unwrap_err();
    assert_eq!(
        waiters.reason(),
        "found -1, expected a whole number in [0, 1048576]"
    );
}

/// A value is shown as the file wrote it: `"0s"`, not the `0ns` it is read
/// as.
#[test]
fn a_duration_out_of_range_is_echoed_as_written() {
    let err = LimitersConfig::from_toml(
        "[limiters.a]\nmax_wait = \"0s\"\n[limiters.a.policy]\npolicy = \"aimd\"\ntimeout = \"0s\"\n",
    )
    .unwrap_err();
    let reasons: Vec<_> = err.errors().map(|e| e.reason().to_owned()).collect();
    assert_eq!(
        reasons,
        [
            "found \"0s\", expected a duration above 0 and at most 365 days",
            "found \"0s\", expected a duration above 0 and at most 365 days",
        ],
        "{err}"
    );
    assert_eq!(err.config_error().unwrap().found(), "\"0s\"");
}

/// A listed limiter names its own policy: `[default]` is for the names a
/// file does not list, and the error says so.
#[test]
fn a_listed_limiter_without_a_policy_is_told_the_default_is_not_merged_into_it() {
    let err = LimitersConfig::from_toml(
        "[default.policy]\npolicy = \"aimd\"\n\n[limiters.a]\nmax_wait = \"200ms\"\n",
    )
    .unwrap_err();
    assert_eq!(err.field(), "limiters.a");
    assert_eq!(err.line(), Some(4));
    assert_eq!(
        err.reason(),
        "found no `policy`, expected `[limiters.a.policy]`: `[default]` is for names the file \
         does not list, and is not merged into a listed limiter"
    );
}

/// `timeout = "auto"` is a learned timeout at its defaults: each call gets
/// the 15 s ceiling until the limiter has seen enough successes.
#[test]
fn timeout_auto_builds_a_limiter_whose_attempt_timeout_is_15_s_with_nothing_learned_yet() {
    let file = LimitersConfig::from_toml(
        "[limiters.p]\ntimeout = \"auto\"\n[limiters.p.policy]\npolicy = \"aimd\"\n",
    )
    .unwrap();
    assert_eq!(
        file.limiters["p"].timeout,
        Some(Timeout::Learned(LearnedTimeout::default()))
    );
    let limiter = file.build("p").unwrap();
    assert_eq!(limiter.timeouts().ceiling, Some(Duration::from_secs(15)));
    assert_eq!(limiter.timeouts().learned, None);
    assert_eq!(limiter.timeouts().in_force, Some(Duration::from_secs(15)));
    // The shipped example shows it.
    let shipped = LimitersConfig::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/policies.toml"
    ))
    .unwrap();
    assert_eq!(
        shipped.limiters["recommendations"].timeout,
        Some(Timeout::Learned(LearnedTimeout::default()))
    );
}

/// Every key of a learned timeout's table reaches the limiter; a key left
/// out takes `LearnedTimeout::new`'s default, the ceiling 15 s.
#[test]
fn a_learned_timeout_table_s_fields_reach_the_limiter_and_left_out_keys_take_the_defaults() {
    let ms = Duration::from_millis;
    let file = LimitersConfig::from_toml(
        r#"
        [limiters.every.policy]
        policy = "aimd"

        [limiters.every.timeout]
        ceiling = "2s"
        quantile = 0.99
        margin = 3.0
        floor = "20ms"
        share = 0.05
        window = "30s"
        min_samples = 50

        [limiters.some]
        timeout = { quantile = 0.95, floor = "5ms" }
        policy = { policy = "aimd" }
        "#,
    )
    .unwrap();
    let every = LearnedTimeout::new(ms(2000))
        .quantile(0.99)
        .margin(3.0)
        .floor(ms(20))
        .share(0.05)
        .window(Duration::from_secs(30))
        .min_samples(50);
    assert_eq!(file.limiters["every"].timeout, Some(every.into()));
    let some = LearnedTimeout::default().quantile(0.95).floor(ms(5));
    assert_eq!(file.limiters["some"].timeout, Some(some.into()));
    assert_eq!(some.ceiling, Duration::from_secs(15));
    assert_eq!(some.margin, 2.0);
    assert_eq!(
        file.build("every").unwrap().timeouts().ceiling,
        Some(ms(2000))
    );
    assert_eq!(
        file.build("some").unwrap().timeouts().ceiling,
        Some(Duration::from_secs(15))
    );
    // An empty table is a learned timeout at its defaults, as "auto" is.
    let empty = LimitersConfig::from_json(
        r#"{"limiters": {"p": {"timeout": {}, "policy": {"policy": "aimd"}}}}"#,
    )
    .unwrap();
    assert_eq!(
        empty.limiters["p"].timeout,
        Some(LearnedTimeout::default().into())
    );
}

/// `cut_early = false` in a learned timeout's table gives every call
/// through the limiter (a payments route) its caller's own timeout, while
/// the timeout is still learned; it is written back as read.
#[test]
fn cut_early_false_in_a_learned_timeout_table_keeps_every_calls_timeout_and_round_trips() {
    let file = LimitersConfig::from_toml(
        r#"
        [limiters.payments]
        timeout = { ceiling = "30s", cut_early = false }
        policy = { policy = "aimd" }

        [limiters.search]
        timeout = { ceiling = "30s" }
        policy = { policy = "aimd" }
        "#,
    )
    .unwrap();
    let ceiling = Duration::from_secs(30);
    let kept = LearnedTimeout::new(ceiling).cut_early(false);
    assert_eq!(file.limiters["payments"].timeout, Some(kept.into()));
    assert_eq!(
        file.limiters["search"].timeout,
        Some(LearnedTimeout::new(ceiling).into())
    );
    let text = toml::to_string(&file).unwrap();
    assert!(text.contains("cut_early = false"), "{text}");
    assert_eq!(text.matches("cut_early").count(), 1, "{text}");
    assert_eq!(LimitersConfig::from_toml(&text).unwrap(), file);

    let clock = ManualClock::new();
    let build = |name: &str| {
        file.limiters[name]
            .builder(name.to_owned())
            .unwrap()
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let (payments, search) = (build("payments"), build("search"));
    for _ in 0..200 {
        let permits = [&payments, &search].map(|l| l.try_acquire().unwrap());
        clock.advance(Duration::from_millis(40));
        for permit in permits {
            permit.success();
        }
    }
    assert!(payments.timeouts().learned.unwrap() < Duration::from_millis(100));
    assert_eq!(payments.timeouts().in_force, Some(ceiling));
    assert!(search.timeouts().in_force.unwrap() < Duration::from_millis(100));
    for _ in 0..100 {
        let permit = payments.try_acquire().unwrap();
        assert_eq!(permit.timeout(ceiling), ceiling);
        permit.ignore();
    }
}

/// Each field of a learned timeout out of range is reported at once, in
/// file order, by its path in the file, with the value as written, its
/// range and its line.
#[test]
fn each_bad_field_of_a_learned_timeout_is_reported_with_its_range_and_line() {
    let text = "[limiters.p.policy]\npolicy = \"aimd\"\n\
                [limiters.p.timeout]\n\
                ceiling = \"0s\"\n\
                quantile = 1.0\n\
                margin = 0.5\n\
                floor = \"0ms\"\n\
                share = 0.6\n\
                window = \"400 years\"\n\
                min_samples = 0\n";
    let err = LimitersConfig::from_toml(text).unwrap_err();
    let found = fields_reasons_and_lines(&err);
    let expected = [
        (
            "ceiling",
            "found \"0s\", expected a duration above 0 and at most 365 days",
            4,
        ),
        ("quantile", "found 1.0, expected a number in (0, 1)", 5),
        ("margin", "found 0.5, expected a number in [1, 100]", 6),
        (
            "floor",
            "found \"0ms\", expected a duration above 0 and at most 365 days",
            7,
        ),
        ("share", "found 0.6, expected a number in (0, 0.5]", 8),
        (
            "window",
            "found \"400 years\", expected a duration above 0 and at most 365 days",
            9,
        ),
        (
            "min_samples",
            "found 0, expected a whole number in [1, 1000000]",
            10,
        ),
    ]
    .map(|(field, reason, line)| {
        (
            format!("limiters.p.timeout.{field}"),
            reason.to_owned(),
            Some(line),
        )
    });
    assert_eq!(found, expected, "{err}");
    assert_eq!(err.to_string().lines().count(), 7, "{err}");

    // A floor above the ceiling, whether the file writes it or not, and a
    // number its type refuses, given the field's own range.
    let err = LimitersConfig::from_toml(
        "[limiters.p]\ntimeout = { ceiling = \"5ms\" }\n[limiters.p.policy]\npolicy = \"aimd\"\n",
    )
    .unwrap_err();
    assert_eq!(
        (err.field(), err.reason(), err.line()),
        (
            "limiters.p.timeout.floor",
            "found 10ms (the default; the file does not set it), expected at most `ceiling` (5ms)",
            Some(2)
        )
    );
    let err = LimitersConfig::from_toml(
        "[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.timeout]\nceiling = \"1s\"\nfloor = \"2s\"\nmin_samples = -1\n",
    )
    .unwrap_err();
    let found = fields_reasons_and_lines(&err);
    assert_eq!(
        found,
        [
            (
                "limiters.p.timeout.floor".to_owned(),
                "found \"2s\", expected at most `ceiling` (1s)".to_owned(),
                Some(5)
            ),
            (
                "limiters.p.timeout.min_samples".to_owned(),
                "found -1, expected a whole number in [1, 1000000]".to_owned(),
                Some(6)
            ),
        ],
        "{err}"
    );

    // The same in JSON, beside another limiter's error.
    let err = LimitersConfig::from_json(
        "{\"limiters\": {\n\"p\": {\"policy\": {\"policy\": \"aimd\"},\n\"timeout\": {\"quantile\": 2}},\n\
         \"q\": {\"max_wait\": \"0s\", \"policy\": {\"policy\": \"aimd\"}}}}",
    )
    .unwrap_err();
    let found = fields_and_lines(&err);
    assert_eq!(
        found,
        [
            ("limiters.p.timeout.quantile".to_owned(), Some(3)),
            ("limiters.q.max_wait".to_owned(), Some(4)),
        ],
        "{err}"
    );
}

/// A key a learned timeout does not have is refused with its line, beside
/// the table's other errors; a string other than a duration or "auto" is
/// told what is accepted.
#[test]
fn a_typo_in_a_learned_timeout_is_refused_with_its_line_and_a_bad_string_told_what_is_accepted() {
    let err = LimitersConfig::from_toml(
        "[limiters.p.policy]\npolicy = \"aimd\"\n[limiters.p.timeout]\nqantile = 0.99\nmargin = 0.5\n",
    )
    .unwrap_err();
    let found = fields_and_lines(&err);
    assert_eq!(
        found,
        [
            ("limiters.p.timeout.qantile".to_owned(), Some(4)),
            ("limiters.p.timeout.margin".to_owned(), Some(5)),
        ],
        "{err}"
    );
    assert!(
        err.reason()
            .starts_with("unknown field `qantile`, expected one of"),
        "{err}"
    );

    for (written, found) in [
        ("\"soon\"", "found \"soon\""),
        ("5", "found 5"),
        ("true", "found true"),
    ] {
        let text =
            format!("[limiters.p]\ntimeout = {written}\n[limiters.p.policy]\npolicy = \"aimd\"\n");
        let err = LimitersConfig::from_toml(&text).unwrap_err();
        assert_eq!(
            (err.field(), err.line()),
            ("limiters.p.timeout", Some(2)),
            "{err}"
        );
        let reason = err.reason();
        assert!(
            reason.starts_with(&format!("{found}, expected a duration such as \"800ms\"")),
            "{err}"
        );
        assert!(
            reason.contains("\"auto\"") && reason.contains("a table"),
            "{err}"
        );
    }
}

/// A typed timeout reads as before: a duration, the same for every call,
/// nothing learned; zero is refused by name.
#[test]
fn a_typed_timeout_is_still_a_duration_given_to_every_call() {
    let file = LimitersConfig::from_toml(
        "[limiters.p]\ntimeout = \"800ms\"\n[limiters.p.policy]\npolicy = \"aimd\"\n",
    )
    .unwrap();
    let typed = Duration::from_millis(800);
    assert_eq!(file.limiters["p"].timeout, Some(Timeout::Typed(typed)));
    let limiter = file.build("p").unwrap();
    assert_eq!(limiter.timeouts().ceiling, Some(typed));
    assert_eq!(limiter.timeouts().in_force, Some(typed));
    assert_eq!(limiter.timeouts().learned, None);
    let err = LimitersConfig::from_toml(
        "[limiters.p]\ntimeout = \"0s\"\n[limiters.p.policy]\npolicy = \"aimd\"\n",
    )
    .unwrap_err();
    assert_eq!(
        (err.field(), err.reason(), err.line()),
        (
            "limiters.p.timeout",
            "found \"0s\", expected a duration above 0 and at most 365 days",
            Some(2)
        )
    );
}

/// Each form of timeout is written as a file would write it and reads
/// back the same, in TOML and in JSON.
#[test]
fn typed_auto_and_tuned_timeouts_round_trip_through_toml_and_json() {
    let ms = Duration::from_millis;
    let with = |timeout: Timeout| LimiterConfig {
        timeout: Some(timeout),
        ..LimiterConfig::new(AimdConfig::default())
    };
    let mut file = LimitersConfig {
        default: Some(with(LearnedTimeout::default().into())),
        ..LimitersConfig::default()
    };
    let tuned = LearnedTimeout::new(ms(2500))
        .quantile(0.99)
        .margin(1.5)
        .floor(ms(5))
        .share(0.02)
        .window(Duration::from_secs(90))
        .min_samples(200);
    for (name, timeout) in [
        ("typed", ms(800).into()),
        ("auto", LearnedTimeout::default().into()),
        ("ceiling", LearnedTimeout::new(ms(1500)).into()),
        ("tuned", tuned.into()),
        ("quantile", LearnedTimeout::default().quantile(0.95).into()),
    ] {
        file.limiters.insert(name.to_owned(), with(timeout));
    }
    let toml_text = toml::to_string(&file).unwrap();
    assert_eq!(
        LimitersConfig::from_toml(&toml_text).unwrap(),
        file,
        "{toml_text}"
    );
    let json_text = serde_json::to_string_pretty(&file).unwrap();
    assert_eq!(
        LimitersConfig::from_json(&json_text).unwrap(),
        file,
        "{json_text}"
    );
    // As a person would write them.
    assert!(toml_text.contains("timeout = \"800ms\""), "{toml_text}");
    assert!(toml_text.contains("timeout = \"auto\""), "{toml_text}");
    assert!(json_text.contains("\"timeout\": \"auto\""), "{json_text}");
    assert!(
        json_text.contains("\"ceiling\": \"1s 500ms\""),
        "{json_text}"
    );
}

/// `[default]`, and so every keyed limiter made from it, takes a learned
/// timeout as a listed limiter does, and its errors are named after it.
#[test]
fn the_default_and_keyed_limiters_take_a_learned_timeout() {
    let file = LimitersConfig::from_toml(
        r#"
        [default]
        timeout = "auto"
        policy = { policy = "aimd" }

        [limiters.search]
        timeout = { ceiling = "2s" }
        policy = { policy = "aimd" }
        "#,
    )
    .unwrap();
    assert_eq!(
        file.build("unlisted").unwrap().timeouts().ceiling,
        Some(Duration::from_secs(15))
    );
    let keyed = file.keyed().build().unwrap();
    assert_eq!(
        keyed.get("/checkout").unwrap().timeouts().ceiling,
        Some(Duration::from_secs(15))
    );
    assert_eq!(
        keyed.get("search").unwrap().timeouts().ceiling,
        Some(Duration::from_secs(2))
    );
    assert_eq!(keyed.get("search").unwrap().timeouts().learned, None);

    let err = LimitersConfig::from_toml(
        "[default]\ntimeout = { margin = 0.5 }\n[default.policy]\npolicy = \"aimd\"\n",
    )
    .unwrap_err();
    assert_eq!(
        (err.field(), err.line()),
        ("default.timeout.margin", Some(2)),
        "{err}"
    );
    let bad = LimiterConfig {
        timeout: Some(LearnedTimeout::default().share(0.0).into()),
        ..LimiterConfig::new(AimdConfig::default())
    };
    let err = KeyedConfig::<String>::new(bad.clone()).build().unwrap_err();
    assert_eq!(err.field(), "default.timeout.share");
    let err = KeyedConfig::<String>::new(LimiterConfig::new(AimdConfig::default()))
        .key("search".to_owned(), bad)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "search.timeout.share");
}
