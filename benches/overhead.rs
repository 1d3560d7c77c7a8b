//! Per-call overhead of a limiter, uncontended: acquire, record, release.
//!
//! The baseline is the least any latency-measuring limiter must do: take and
//! release a `tokio::sync::Semaphore` permit and read the clock twice (once at
//! admission, once at completion). Run with `cargo bench --bench overhead`:
//! criterion's report for each, then one table of this run's medians with
//! its date and the machine's load.

mod common;

use std::cell::RefCell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use rheostat::algorithms::Algorithm;
use rheostat::algorithms::{
    Aimd, AimdConfig, Breaker, BreakerConfig, Fixed, Gradient, GradientConfig, Stack, Throttle,
    ThrottleConfig, Vegas, VegasConfig,
};
use rheostat::priority::{Priorities, Priority};
use rheostat::retry::{Hedge, RetryConfig};
use rheostat::{Limiter, Outcome};

/// One sample's nanoseconds per call, without classes and with them.
type Pair = (f64, f64);

/// Samples per case, and the nanoseconds per call each gave, by case.
const SAMPLES: usize = 100;
thread_local! {
    static TIMES: RefCell<Vec<(&'static str, &'static str, Vec<f64>)>> = const { RefCell::new(Vec::new()) };
    /// Per case of [`priorities`], each sample's nanoseconds per call
    /// without classes and with them.
    static PAIRS: RefCell<Vec<(&'static str, Vec<Pair>)>> = const { RefCell::new(Vec::new()) };
}

/// Time `call` as criterion's case `id` of `group`, and keep each sample's
/// nanoseconds per call for the summary.
fn timed(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &'static str,
    id: &'static str,
    mut call: impl FnMut(),
) {
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let elapsed = common::repeat(iters, &mut call);
            #[allow(clippy::cast_precision_loss, reason = "a mean of nanoseconds")]
            let per_call = elapsed.as_secs_f64() * 1e9 / iters.max(1) as f64;
            TIMES.with_borrow_mut(|times| {
                match times.iter_mut().find(|(g, i, _)| *g == name && *i == id) {
                    Some((_, _, samples)) => samples.push(per_call),
                    None => times.push((name, id, vec![per_call])),
                }
            });
            elapsed
        });
    });
}

fn overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("overhead");
    group.sample_size(SAMPLES);
    let g = &mut group;

    let semaphore = tokio::sync::Semaphore::new(1_000);
    timed(g, OVERHEAD, BASELINE, || {
        let start = Instant::now();
        let permit = semaphore.try_acquire();
        let elapsed = Instant::now().duration_since(start);
        drop(black_box(permit));
        black_box(elapsed);
    });

    let fixed = Limiter::new(Fixed::new(1_000).expect("valid"));
    timed(g, OVERHEAD, "rheostat fixed", || one_call(&fixed));

    let aimd = Limiter::new(
        Aimd::new(AimdConfig {
            initial: 1_000,
            min: 1,
            max: 1_000,
            ..AimdConfig::default()
        })
        .expect("valid"),
    );
    timed(g, OVERHEAD, "rheostat aimd", || one_call(&aimd));

    let vegas = Limiter::new(
        Vegas::new(VegasConfig {
            initial: 1_000,
            max: 2_000,
            ..VegasConfig::default()
        })
        .expect("valid"),
    );
    timed(g, OVERHEAD, "rheostat vegas", || one_call(&vegas));

    let gradient = Limiter::new(
        Gradient::new(GradientConfig {
            initial: 1_000,
            max: 2_000,
            ..GradientConfig::default()
        })
        .expect("valid"),
    );
    timed(g, OVERHEAD, "rheostat gradient", || one_call(&gradient));

    let breaker = Limiter::new(Breaker::new(BreakerConfig::default()).expect("valid"));
    timed(g, OVERHEAD, "rheostat breaker (closed)", || {
        one_call(&breaker)
    });

    let open = common::open_breaker();
    timed(g, OVERHEAD, "rheostat breaker (open, rejecting)", || {
        black_box(black_box(open.try_acquire()).is_err());
    });

    let throttle = Limiter::new(Throttle::new(ThrottleConfig::default()).expect("valid"));
    timed(g, OVERHEAD, "rheostat throttle", || one_call(&throttle));

    let stack = Limiter::new(
        Stack::builder()
            .push(Fixed::new(1_000).expect("valid"))
            .push(Throttle::new(ThrottleConfig::default()).expect("valid"))
            .build()
            .expect("valid"),
    );
    timed(g, OVERHEAD, "rheostat stack (fixed + throttle)", || {
        one_call(&stack);
    });

    let full = Limiter::new(Fixed::new(1).expect("valid"));
    let _held = full.try_acquire();
    timed(g, OVERHEAD, "rheostat fixed, rejected", || {
        black_box(black_box(full.try_acquire()).is_err());
    });

    group.finish();
}

/// `Limiter::call` on the recommended policy (`Aimd` at its defaults), a
/// call that succeeds at once, with and without a retry policy: what the
/// feature costs a call that needs no retry. Each sample times the limiter
/// without a retry for as many calls just before the one with it, and the
/// ratio is the median of the per-sample ratios.
fn retry(c: &mut Criterion) {
    let mut group = c.benchmark_group("retry");
    group.sample_size(SAMPLES);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let aimd = || Aimd::new(AimdConfig::default()).expect("valid");
    let plain = Limiter::new(aimd());
    let retrying = Limiter::builder(aimd())
        .retry(RetryConfig::default())
        .build()
        .expect("valid");
    // Hedging configured, a call answering before the delay: no hedge.
    let hedging = Limiter::builder(aimd())
        .retry(RetryConfig {
            hedge: Some(Hedge::after(Duration::from_millis(50))),
            ..RetryConfig::default()
        })
        .build()
        .expect("valid");
    let calls = |limiter: &Limiter<Aimd>, iters: u64| {
        rt.block_on(async {
            let start = Instant::now();
            for _ in 0..iters {
                let answer = limiter
                    .admission()
                    .timeout(Duration::from_secs(1))
                    .call(|_: &Result<(), ()>| Outcome::Success, || async { Ok(()) })
                    .await;
                black_box(answer.is_ok());
            }
            start.elapsed()
        })
    };
    let record = |id: &'static str, elapsed: Duration, iters: u64| {
        #[allow(clippy::cast_precision_loss, reason = "a mean of nanoseconds")]
        let per_call = elapsed.as_secs_f64() * 1e9 / iters.max(1) as f64;
        TIMES.with_borrow_mut(|times| {
            match times.iter_mut().find(|(g, i, _)| *g == RETRY && *i == id) {
                Some((_, _, samples)) => samples.push(per_call),
                None => times.push((RETRY, id, vec![per_call])),
            }
        });
    };
    group.bench_function(RETRY_ON, |b| {
        b.iter_custom(|iters| {
            let without = calls(&plain, iters);
            let with = calls(&retrying, iters);
            let hedged = calls(&hedging, iters);
            record(RETRY_OFF, without, iters);
            record(RETRY_ON, with, iters);
            record(HEDGE_ON, hedged, iters);
            with
        });
    });
    group.finish();
}

/// What classes cost a call: the same policy with and without SRE's four
/// classes ([`Priorities::default`]), a call of the default class
/// (critical) and one of the least critical (sheddable). Each sample times
/// the limiter without classes for as many calls just before the one with
/// them, and the ratio is the median of the per-sample ratios.
fn priorities(c: &mut Criterion) {
    let mut group = c.benchmark_group("priorities");
    group.sample_size(SAMPLES);
    let aimd = || {
        Aimd::new(AimdConfig {
            initial: 1_000,
            min: 1,
            max: 1_000,
            ..AimdConfig::default()
        })
        .expect("valid")
    };
    let aimd = with_and_without_classes(aimd);
    let fixed = with_and_without_classes(|| Fixed::new(1_000).expect("valid"));
    let classes = [Priority::Critical, Priority::Sheddable];
    for (id, class) in PRIORITY_CASES[..2].iter().zip(classes) {
        pair(&mut group, id, class, &aimd);
    }
    for (id, class) in PRIORITY_CASES[2..].iter().zip(classes) {
        pair(&mut group, id, class, &fixed);
    }
    group.finish();
}

/// Two limiters of the policy `make` makes: without classes, and with
/// SRE's four.
fn with_and_without_classes<A: Algorithm>(make: impl Fn() -> A) -> (Limiter<A>, Limiter<A>) {
    let classed = Limiter::builder(make())
        .priorities(Priorities::default())
        .build()
        .expect("valid");
    (Limiter::new(make()), classed)
}

/// Time `iters` calls on the limiter without classes, then as many of
/// class `class` on the one with them, each sample; keep both for the
/// summary under `id`.
fn pair<A: Algorithm>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &'static str,
    class: Priority,
    (plain, classed): &(Limiter<A>, Limiter<A>),
) {
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let without = common::repeat(iters, || one_call(plain));
            let with = common::repeat(iters, || {
                if let Ok(p) = black_box(classed.admission().class(class).try_acquire()) {
                    p.success();
                }
            });
            #[allow(clippy::cast_precision_loss, reason = "a mean of nanoseconds")]
            let per_call = |d: Duration| d.as_secs_f64() * 1e9 / iters.max(1) as f64;
            PAIRS.with_borrow_mut(|pairs| match pairs.iter_mut().find(|(i, _)| *i == id) {
                Some((_, samples)) => samples.push((per_call(without), per_call(with))),
                None => pairs.push((id, vec![(per_call(without), per_call(with))])),
            });
            with
        });
    });
}

/// What one clock read costs, each way the limiter could read the time.
fn clocks(c: &mut Criterion) {
    use rheostat::clock::{Clock, QuantaClock, SystemClock};
    let mut group = c.benchmark_group("clock");
    group.sample_size(SAMPLES);
    let g = &mut group;
    timed(g, CLOCK, "Instant::now", || {
        black_box(Instant::now());
    });
    timed(g, CLOCK, "SystemClock", || {
        black_box(SystemClock.now());
    });
    let quanta_clock = QuantaClock::new();
    timed(g, CLOCK, "QuantaClock (an Instant from the TSC)", || {
        black_box(quanta_clock.now());
    });
    let raw = quanta::Clock::new();
    timed(g, CLOCK, "quanta::Clock::now", || {
        black_box(raw.now());
    });
    timed(g, CLOCK, "quanta::Clock::raw", || {
        black_box(raw.raw());
    });
    let upkeep = quanta::Upkeep::new(Duration::from_millis(1)).start();
    timed(
        g,
        CLOCK,
        "quanta::Clock::recent (1 ms upkeep thread)",
        || {
            black_box(raw.recent());
        },
    );
    drop(upkeep);
    group.finish();
}

const OVERHEAD: &str = "overhead";
const CLOCK: &str = "clock";
const RETRY: &str = "retry";
const RETRY_OFF: &str = "`Limiter::call`, `Aimd`, no retry policy";
const RETRY_ON: &str = "`Limiter::call`, `Aimd`, the default retry policy";
const HEDGE_ON: &str = "`Limiter::call`, `Aimd`, the default retry policy hedging after 50 ms";
const PRIORITY_CASES: [&str; 4] = [
    "rheostat aimd, a call of the default class (critical)",
    "rheostat aimd, a call of the least critical class (sheddable)",
    "rheostat fixed, a call of the default class (critical)",
    "rheostat fixed, a call of the least critical class (sheddable)",
];
const BASELINE: &str = "baseline: semaphore + 2 clock reads";

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// This run's medians, one table per group, with the run's date and load.
fn summary(load_before: &str) {
    println!("\n## overhead: one run (medians over {SAMPLES} criterion samples)\n");
    println!(
        "Ended {}; load average before and after: {load_before} / {}\n",
        common::utc_now(),
        common::load_average()
    );
    TIMES.with_borrow(|times| {
        let baseline = times
            .iter()
            .find(|(g, id, _)| *g == OVERHEAD && *id == BASELINE)
            .map(|(_, _, s)| median(s));
        println!("| one call, uncontended | median | × baseline |");
        println!("| --- | ---: | ---: |");
        for (_, id, samples) in times.iter().filter(|(g, _, _)| *g == OVERHEAD) {
            let m = median(samples);
            let ratio = baseline.map_or(String::from("–"), |b| format!("{:.2}", m / b));
            println!("| {id} | {m:.1} ns | {ratio} |");
        }
        let pairs: Vec<_> = times.iter().filter(|(g, _, _)| *g == RETRY).collect();
        if let [(_, off, without), (_, on, with), (_, hedge, hedged)] = pairs[..] {
            let ratio = |a: &[f64], b: &[f64]| -> f64 {
                median(&a.iter().zip(b).map(|(a, b)| a / b).collect::<Vec<_>>())
            };
            println!(
                "\n| one call through `Limiter::call`, succeeding at once | median | × without | × the retry policy alone |"
            );
            println!("| --- | ---: | ---: | ---: |");
            println!("| {off} | {:.1} ns | 1.00 | – |", median(without));
            println!("| {on} | {:.1} ns | {:.3} | 1.00 |", median(with), ratio(with, without));
            println!(
                "| {hedge} | {:.1} ns | {:.3} | {:.3} |",
                median(hedged),
                ratio(hedged, without),
                ratio(hedged, with)
            );
        }
        PAIRS.with_borrow(|pairs| {
            println!("\n| one call with classes | without | with | × without |");
            println!("| --- | ---: | ---: | ---: |");
            for (id, samples) in pairs {
                let without: Vec<f64> = samples.iter().map(|s| s.0).collect();
                let with: Vec<f64> = samples.iter().map(|s| s.1).collect();
                let ratios: Vec<f64> = samples.iter().map(|s| s.1 / s.0).collect();
                println!(
                    "| {id} | {:.1} ns | {:.1} ns | {:.3} |",
                    median(&without),
                    median(&with),
                    median(&ratios)
                );
            }
        });
        println!("\n| one clock read | median |");
        println!("| --- | ---: |");
        for (_, id, samples) in times.iter().filter(|(g, _, _)| *g == CLOCK) {
            println!("| {id} | {:.1} ns |", median(samples));
        }
    });
}

fn main() {
    let load_before = common::load_average();
    let mut c = Criterion::default().configure_from_args();
    overhead(&mut c);
    retry(&mut c);
    priorities(&mut c);
    clocks(&mut c);
    c.final_summary();
    summary(&load_before);
}

/// One uncontended call: acquire, record a success, release.
fn one_call<A: Algorithm>(limiter: &Limiter<A>) {
    if let Ok(p) = black_box(limiter.try_acquire()) {
        p.success();
    }
}
