//! Compare admission policies under a brownout, in virtual time.
//!
//! A dependency with 84 workers and 700 ms calls (capacity 120 calls/s) loses
//! 40% of its workers for 22 minutes while 120 calls/s keep arriving; callers
//! give up after 15 s, but work they abandoned still occupies a worker. Every
//! policy runs the same seeded arrivals through the real `Limiter` on a
//! `ManualClock`.
//!
//! Run with `cargo run --release --example compare`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, Breaker, BreakerConfig, Fixed, Gradient, GradientConfig, Throttle,
    ThrottleConfig, Vegas, VegasConfig, MAX_LIMIT,
};
use rheostat::{Limiter, ManualClock, Permit};

const RATE: f64 = 120.0;
const SERVICE: f64 = 0.7;
const WORKERS: usize = 84;
const DEGRADED_WORKERS: usize = 50;
const TIMEOUT: f64 = 15.0;
const BROWNOUT_START: f64 = 120.0;
const BROWNOUT_END: f64 = BROWNOUT_START + 22.0 * 60.0;
const END: f64 = BROWNOUT_END + 180.0;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrival,
    Done(u64),
    GiveUp(u64),
}

struct Report {
    offered: u64,
    successes: u64,
    rejected: u64,
    timeouts: u64,
    in_flight_sum: f64,
    in_flight_max: u32,
    samples: u64,
}

/// A tiny seeded generator (splitmix64), so every policy sees the same run.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }
}

fn workers_at(t: f64) -> usize {
    if (BROWNOUT_START..BROWNOUT_END).contains(&t) {
        DEGRADED_WORKERS
    } else {
        WORKERS
    }
}

fn run<A: Algorithm>(policy: A) -> Report {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(policy)
        .clock(clock.clone())
        .seed(1)
        .build()
        .expect("valid options");
    let mut arrivals = Rng(42);
    let mut service = Rng(7);
    let mut events: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, at: f64, e: Event| {
        seq += 1;
        events.push(Reverse(((at * 1e9) as u64, seq, e)));
    };
    push(&mut events, arrivals.exp(1.0 / RATE), Event::Arrival);

    let mut permits: HashMap<u64, Permit<'_, A, ManualClock>> = HashMap::new();
    let mut queue: VecDeque<u64> = VecDeque::new();
    let mut busy = 0usize;
    let mut next_id = 0u64;
    let mut report = Report {
        offered: 0,
        successes: 0,
        rejected: 0,
        timeouts: 0,
        in_flight_sum: 0.0,
        in_flight_max: 0,
        samples: 0,
    };

    while let Some(Reverse((at, _, event))) = events.pop() {
        let now = at as f64 / 1e9;
        if now > END {
            break;
        }
        clock.set_elapsed(Duration::from_nanos(at));
        match event {
            Event::Arrival => {
                push(&mut events, now + arrivals.exp(1.0 / RATE), Event::Arrival);
                report.offered += 1;
                match limiter.try_acquire() {
                    Err(_) => report.rejected += 1,
                    Ok(permit) => {
                        let id = next_id;
                        next_id += 1;
                        permits.insert(id, permit);
                        push(&mut events, now + TIMEOUT, Event::GiveUp(id));
                        if busy < workers_at(now) {
                            busy += 1;
                            push(&mut events, now + service.exp(SERVICE), Event::Done(id));
                        } else {
                            queue.push_back(id);
                        }
                    }
                }
            }
            Event::Done(id) => {
                busy -= 1;
                if let Some(permit) = permits.remove(&id) {
                    report.successes += 1;
                    permit.success();
                }
                while busy < workers_at(now) {
                    let Some(next) = queue.pop_front() else { break };
                    busy += 1;
                    push(&mut events, now + service.exp(SERVICE), Event::Done(next));
                }
            }
            Event::GiveUp(id) => {
                // The caller stops waiting; the work, queued or running,
                // still occupies the dependency.
                if let Some(permit) = permits.remove(&id) {
                    report.timeouts += 1;
                    permit.overload();
                }
            }
        }
        let in_flight = limiter.in_flight();
        report.in_flight_sum += f64::from(in_flight);
        report.in_flight_max = report.in_flight_max.max(in_flight);
        report.samples += 1;
    }
    report
}

fn main() {
    println!(
        "brownout: {RATE} calls/s, {WORKERS} workers x {SERVICE} s; {DEGRADED_WORKERS} workers for 22 min; caller timeout {TIMEOUT} s\n"
    );
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9} {:>12} {:>12}",
        "policy", "offered", "success", "rejected", "timeouts", "in-flight μ", "in-flight max"
    );
    let aimd = AimdConfig {
        initial: 20,
        min: 5,
        max: 500,
        timeout: Duration::from_secs(2),
        ..AimdConfig::default()
    };
    let policies: Vec<(&str, Box<dyn Algorithm>)> = vec![
        (
            "none (unbounded)",
            Box::new(Fixed::new(MAX_LIMIT).expect("valid")),
        ),
        (
            "bulkhead (fixed 100)",
            Box::new(Fixed::new(100).expect("valid")),
        ),
        (
            "breaker (classic)",
            Box::new(Breaker::new(BreakerConfig::classic()).expect("valid")),
        ),
        (
            "breaker (recommended)",
            Box::new(Breaker::new(BreakerConfig::recommended()).expect("valid")),
        ),
        ("aimd", Box::new(Aimd::new(aimd).expect("valid"))),
        (
            "vegas",
            Box::new(Vegas::new(VegasConfig::default()).expect("valid")),
        ),
        (
            "gradient",
            Box::new(Gradient::new(GradientConfig::default()).expect("valid")),
        ),
        (
            "throttle",
            Box::new(Throttle::new(ThrottleConfig::default()).expect("valid")),
        ),
    ];
    for (name, policy) in policies {
        let r = run(policy);
        println!(
            "{:<22} {:>9} {:>9} {:>9} {:>9} {:>12.1} {:>12}",
            name,
            r.offered,
            r.successes,
            r.rejected,
            r.timeouts,
            r.in_flight_sum / r.samples.max(1) as f64,
            r.in_flight_max
        );
    }
}
