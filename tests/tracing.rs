//! The tracing observer: a warning when a breaker opens, info when it closes,
//! with the transition's fields.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
use rheostat::{clock::ManualClock, Limiter};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn lines(&self) -> Vec<String> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// The lines logged at `INFO` and above while `run` runs.
fn logged(run: impl FnOnce()) -> Vec<String> {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::with_default(subscriber, run);
    buffer.lines()
}

#[test]
fn a_breaker_opening_warns_and_closing_informs_with_the_transition_fields() {
    let lines = logged(|| {
        let clock = ManualClock::new();
        let config = BreakerConfig {
            cooldown: Cooldown::Fixed(Duration::from_secs(10)),
            cooldown_jitter: 0.0,
            ramp: Duration::ZERO,
            ..BreakerConfig::recommended()
        };
        let limiter = Limiter::builder(Breaker::new(config).unwrap())
            .name("payments")
            .clock(clock.clone())
            .tracing()
            .build()
            .unwrap();
        // Ten failures in a row: the run opens it.
        for _ in 0..10 {
            limiter.try_acquire().unwrap().overload();
        }
        clock.advance(Duration::from_secs(10));
        let probes: Vec<_> = (0..5).map(|_| limiter.try_acquire().unwrap()).collect();
        for p in probes {
            p.success();
        }
    });
    // Half-open is logged at debug, below this subscriber's level.
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let opened = &lines[0];
    assert!(
        opened.contains("WARN") && opened.contains("circuit opened"),
        "{opened}"
    );
    for field in [
        "limiter=\"payments\"",
        "policy=\"breaker\"",
        "from=\"closed\"",
        "to=\"open\"",
        "failure_rate=1",
        "slow_call_rate=0",
        "calls=10",
    ] {
        assert!(opened.contains(field), "{field} in {opened}");
    }
    let closed = &lines[1];
    assert!(
        closed.contains("INFO") && closed.contains("circuit closed"),
        "{closed}"
    );
    assert!(
        closed.contains("from=\"half_open\"") && closed.contains("to=\"closed\""),
        "{closed}"
    );
}

/// The log lines of a limiter whose retry budget holds one retry per 10 s
/// (no ratio, 0.1 a second), after `rounds` of `calls` failing calls, each
/// round followed by `pause` of virtual time.
fn budget_log(rounds: usize, calls: usize, pause: Duration) -> Vec<String> {
    use rheostat::algorithms::Fixed;
    use rheostat::retry::{Backoff, Budget, RetryConfig};
    use rheostat::{clock::TokioClock, Outcome};

    let lines = logged(|| {
        let limiter = Limiter::builder(Fixed::new(4).unwrap())
            .name("payments")
            .clock(TokioClock)
            .retry(RetryConfig {
                backoff: Backoff {
                    base: Duration::ZERO,
                    cap: Duration::ZERO,
                },
                budget: Budget {
                    ratio: 0.0,
                    min_per_second: 0.1,
                    ttl: Duration::from_secs(10),
                },
                ..RetryConfig::default()
            })
            .tracing()
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..rounds {
                for _ in 0..calls {
                    let _ = limiter
                        .admission()
                        .timeout(Duration::from_secs(1))
                        .call(|_: &Result<(), ()>| Outcome::Overload, || async { Err(()) })
                        .await;
                }
                tokio::time::sleep(pause).await;
            }
        });
    });
    lines
}

#[test]
fn a_retry_budget_running_dry_warns_once() {
    // One retry in the reserve: the first call spends it, the next three
    // are refused theirs.
    let lines = budget_log(1, 4, Duration::ZERO);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("WARN")
            && lines[0].contains("retry budget exhausted")
            && lines[0].contains("payments"),
        "{}",
        lines[0]
    );
}

#[test]
fn a_retry_budget_at_its_edge_warns_at_most_once_a_minute() {
    // Eight times over, in virtual time: the budget refills, one retry
    // spends it, and the next call finds it dry. In real time all of it
    // takes well under a minute.
    let lines = budget_log(8, 2, Duration::from_secs(30));
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("retry budget exhausted"), "{}", lines[0]);
}

#[test]
fn an_override_applied_warns_and_its_end_informs_with_its_kind() {
    use rheostat::algorithms::Fixed;
    use rheostat::overrides::Override;

    let lines = logged(|| {
        let clock = ManualClock::new();
        let limiter = Limiter::builder(Fixed::new(8).unwrap())
            .name("payments")
            .clock(clock.clone())
            .tracing()
            .build()
            .unwrap();
        limiter
            .overrides()
            .set(Override::Cap(3), Duration::from_secs(90))
            .unwrap();
        limiter.overrides().clear();
        limiter
            .overrides()
            .set(Override::ForceOpen, Duration::from_secs(60))
            .unwrap();
        clock.advance(Duration::from_secs(60));
        limiter.wake();
    });
    assert_eq!(lines.len(), 4, "{lines:#?}");
    let expect = [
        (
            "WARN",
            "override applied limiter=\"payments\" kind=\"cap\" cap=3 seconds=90",
        ),
        ("INFO", "override cleared limiter=\"payments\" kind=\"cap\""),
        (
            "WARN",
            "override applied limiter=\"payments\" kind=\"force_open\" seconds=60",
        ),
        (
            "INFO",
            "override expired limiter=\"payments\" kind=\"force_open\"",
        ),
    ];
    for (line, (level, text)) in lines.iter().zip(expect) {
        assert!(line.contains(level), "{line}");
        let message_then_fields = line.split_once(": ").map_or("", |(_, rest)| rest);
        assert!(
            message_then_fields.contains(text.split(' ').next().unwrap()),
            "{line}"
        );
        for field in text.split(' ').skip(2) {
            assert!(line.contains(field), "{line} lacks {field}");
        }
    }
}

#[test]
fn a_ceiling_that_cuts_every_call_warns_once_naming_the_limiter_and_the_ceiling_and_its_end_informs_once(
) {
    use rheostat::algorithms::Fixed;
    use rheostat::{Outcome, Timeout};

    let lines = logged(|| {
        let clock = ManualClock::new();
        let limiter = Limiter::builder(Fixed::new(8).unwrap())
            .name("reports")
            .clock(clock.clone())
            .timeout(Timeout::learned(Duration::from_secs(15)))
            .tracing()
            .build()
            .unwrap();
        let call = |latency: Duration, outcome: Outcome| {
            let permit = limiter.try_acquire().unwrap();
            clock.advance(latency);
            permit.record(outcome);
        };
        // Every call cut at the ceiling for four minutes, then answers
        // within it for as long.
        for _ in 0..16 {
            call(Duration::from_secs(15), Outcome::Overload);
        }
        for _ in 0..240 {
            call(Duration::from_secs(1), Outcome::Success);
        }
    });
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let (warned, informed) = (&lines[0], &lines[1]);
    assert!(
        warned.contains("WARN") && warned.contains("no call answers within the timeout's ceiling"),
        "{warned}"
    );
    assert!(
        informed.contains("INFO")
            && informed.contains("calls answer within the timeout's ceiling again"),
        "{informed}"
    );
    for line in [warned, informed] {
        assert!(
            line.contains("limiter=\"reports\"") && line.contains("ceiling_seconds=15"),
            "{line}"
        );
    }
}

#[test]
fn hedges_standing_down_and_resuming_are_logged_once_each_way() {
    use rheostat::algorithms::Fixed;
    use rheostat::retry::{Hedge, RetryConfig};
    use rheostat::{clock::TokioClock, Outcome};

    let lines = logged(|| {
        let limiter = Limiter::builder(Fixed::new(8).unwrap())
            .name("search")
            .clock(TokioClock)
            .retry(RetryConfig {
                hedge: Some(Hedge::after(Duration::from_millis(10))),
                ..RetryConfig::default()
            })
            .tracing()
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let slow = || async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok::<(), ()>(())
            };
            let call = || async {
                let _ = limiter
                    .admission()
                    .timeout(Duration::from_secs(1))
                    .call(|_: &Result<(), ()>| Outcome::Success, slow)
                    .await;
            };
            call().await; // hedged
                          // The limit cut: two calls find hedges standing down.
            limiter.update(|fixed| fixed.set_limit(4)).unwrap();
            call().await;
            call().await;
            // The limit back up: hedges resume.
            limiter.update(|fixed| fixed.set_limit(8)).unwrap();
            call().await;
        });
    });
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].contains("INFO")
            && lines[0].contains("hedges stand down")
            && lines[0].contains("search"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("hedges resume"), "{}", lines[1]);
}
