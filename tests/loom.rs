//! Every interleaving of the lock-free accounting, explored by loom.
//!
//! ```sh
//! RUSTFLAGS="--cfg rheostat_loom" cargo test --release --target-dir target/loom --test loom
//! ```
//!
//! Under `--cfg rheostat_loom` the atomics, the policy lock, the held
//! successes' buffers and the waiter queue's locks come from loom
//! (`src/sync.rs`), so each model below runs once per distinct interleaving
//! of them. The shards and the buffers are set up lazily under loom as
//! outside it: `std`'s `OnceLock`, whose ordering loom cannot see, is
//! modelled by one that draws the same edge on a loom flag (`src/sync.rs`).
//! A stranded waiter shows up as loom's deadlock report: every thread
//! parked and nobody left to wake it.
//!
//! Each type of the limiter's state is exercised by the models named
//! beside it in `docs/guarantees.md`.
//!
//! The waiter models, the parking models, the untimed `Fixed` model and
//! the two models of the switch to shards and buffers are explored
//! exhaustively (each in a second or so). The models with three busy
//! threads, or with the policy lock beside the shards and buffers set up
//! mid-run, take minutes each unbounded (the raised-limit model two, the
//! successes batched on parked slots five to seven); they explore every
//! interleaving with at most [`PREEMPTIONS`] preemptions.
//! `LOOM_MAX_PREEMPTIONS` overrides the bound for all of them.

#![cfg(rheostat_loom)]
#![allow(
    clippy::unwrap_used,
    reason = "a model fails loudly on the first surprise"
)]

use rheostat::Admission;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use loom::thread;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow, Cooldown, HalfOpen};
use rheostat::algorithms::{
    Algorithm, BreakerState, Deferral, Feedback, Fixed, Gate, Hints, Published, Sample, Snapshot,
    Transition,
};
use rheostat::{clock::ManualClock, limiter::Sharding, Limiter, Observer, Outcome};

/// Counts admissions and finished calls. Loom runs a model's threads one at
/// a time, so plain atomics are exact here (and add no interleavings).
#[derive(Default)]
struct Counts {
    admitted: AtomicU64,
    finished: AtomicU64,
}

impl Observer for Counts {
    fn admitted(&self, _in_flight: u32, _probe: bool) {
        self.admitted.fetch_add(1, Ordering::SeqCst);
    }
    fn finished(&self, _outcome: Outcome, _latency: Duration, _in_flight: u32) {
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

impl Counts {
    fn assert_balanced(&self) {
        let admitted = self.admitted.load(Ordering::SeqCst);
        assert_eq!(admitted, self.finished.load(Ordering::SeqCst));
    }
}

/// The preemption bound of the largest models.
const PREEMPTIONS: usize = 4;

/// Explore `model` with at most [`PREEMPTIONS`] preemptions, unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise.
fn bounded(model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(PREEMPTIONS);
    builder.check(model);
}

/// A limit of 2 with SRE's four classes.
fn classed_two() -> Arc<Limiter<Fixed, ManualClock>> {
    Arc::new(
        Limiter::builder(Fixed::new(2).unwrap())
            .clock(ManualClock::new())
            .priorities(rheostat::priority::Priorities::default())
            .build()
            .unwrap(),
    )
}

fn fixed(limit: u32, counts: &Arc<Counts>) -> Arc<Limiter<Fixed, ManualClock>> {
    Arc::new(
        Limiter::builder(Fixed::new(limit).unwrap())
            .clock(ManualClock::new())
            .observer(Arc::clone(counts))
            .build()
            .unwrap(),
    )
}

#[test]
fn acquire_and_release_against_a_lowered_limit_never_overshoot_or_leak() {
    bounded(|| {
        let counts = Arc::new(Counts::default());
        let limiter = fixed(2, &counts);
        let callers: Vec<_> = [Outcome::Success, Outcome::Overload]
            .into_iter()
            .map(|outcome| {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || {
                    if let Ok(permit) = limiter.try_acquire() {
                        // Never more than the largest limit ever published.
                        assert!(permit.in_flight_at_start() <= 2);
                        permit.record(outcome);
                    }
                })
            })
            .collect();

        limiter.update(|f| f.set_limit(1)).unwrap();
        // Once the lower limit is published, an admission respects it,
        // whatever the other callers are doing.
        if let Ok(permit) = limiter.try_acquire() {
            assert_eq!(permit.in_flight_at_start(), 1);
            drop(permit);
        }

        for caller in callers {
            caller.join().unwrap();
        }
        assert_eq!(limiter.in_flight(), 0);
        counts.assert_balanced();
        assert!(limiter.try_acquire().is_ok());
    });
}

/// Bounded to [`PREEMPTIONS`]: the shards and the held successes'
/// buffers, set up here the first time two callers meet, make it one of
/// the largest models.
#[test]
fn acquire_and_release_against_a_raised_limit_never_overshoot_or_leak() {
    bounded(|| {
        let counts = Arc::new(Counts::default());
        let limiter = fixed(1, &counts);
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || {
                    if let Ok(permit) = limiter.try_acquire() {
                        assert!(permit.in_flight_at_start() <= 2);
                        permit.success();
                    }
                })
            })
            .collect();
        limiter.update(|f| f.set_limit(2)).unwrap();
        for caller in callers {
            caller.join().unwrap();
        }
        assert_eq!(limiter.in_flight(), 0);
        counts.assert_balanced();
    });
}

/// A policy that remembers, under the policy lock, whether its breaker has
/// closed again, so a model can tell whether a call that was not a probe
/// was let through before that.
struct Watched {
    breaker: Breaker,
    closed: Arc<AtomicBool>,
}

impl Algorithm for Watched {
    fn name(&self) -> &'static str {
        self.breaker.name()
    }
    fn publish(&self) -> Published {
        let breaker = self.breaker.publish();
        Published::new(breaker.gate).with_wake_at(breaker.wake_at)
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.breaker.on_sample(now, sample);
        self.note();
    }
    fn on_admit(&mut self, now: Instant) -> bool {
        let admitted = self.breaker.on_admit(now);
        self.note();
        admitted
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.breaker.handle_timeout(now);
        self.note();
    }
    fn snapshot(&self) -> Snapshot {
        self.breaker.snapshot()
    }
    fn poll_transition(&mut self) -> Option<Transition> {
        self.breaker.poll_transition()
    }
}

impl Watched {
    fn note(&self) {
        let closed = self.breaker.state() == BreakerState::Closed;
        self.closed.store(closed, Ordering::SeqCst);
    }
}

#[test]
fn half_open_admits_no_more_probes_than_its_allowance_and_nothing_else() {
    bounded(|| {
        let clock = ManualClock::new();
        let closed = Arc::new(AtomicBool::new(true));
        let breaker = Breaker::new(BreakerConfig {
            window: BreakerWindow::Count { calls: 1 },
            min_calls: 1,
            cooldown: Cooldown::Fixed(Duration::from_secs(1)),
            cooldown_jitter: 0.0,
            // Two probes, one at a time, both needed to close.
            half_open: HalfOpen::Probes {
                probes: 2,
                close_after: 2,
            },
            probe_concurrency: 1,
            ramp: Duration::ZERO,
            ..BreakerConfig::recommended()
        })
        .unwrap();
        let counts = Arc::new(Counts::default());
        let limiter = Arc::new(
            Limiter::builder(Watched {
                breaker,
                closed: Arc::clone(&closed),
            })
            .clock(clock.clone())
            .observer(Arc::clone(&counts))
            .build()
            .unwrap(),
        );
        // One failure opens it; the cooldown is over before the callers
        // arrive, so the first of them moves it to half-open.
        limiter.try_acquire().unwrap().overload();
        assert!(!closed.load(Ordering::SeqCst));
        clock.advance(Duration::from_secs(1));

        let probes = Arc::new(AtomicU64::new(0));
        let callers: Vec<_> = [Outcome::Success, Outcome::Ignore, Outcome::Success]
            .into_iter()
            .map(|outcome| {
                let (limiter, probes, closed) = (
                    Arc::clone(&limiter),
                    Arc::clone(&probes),
                    Arc::clone(&closed),
                );
                thread::spawn(move || {
                    let Ok(permit) = limiter.try_acquire() else {
                        return;
                    };
                    if permit.is_probe() {
                        // One probe at a time.
                        assert_eq!(permit.in_flight_at_start(), 1);
                        if outcome != Outcome::Ignore {
                            probes.fetch_add(1, Ordering::SeqCst);
                        }
                    } else {
                        // Past a half-open breaker only once it has closed.
                        assert!(closed.load(Ordering::SeqCst));
                    }
                    permit.record(outcome);
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
        // An ignored probe gives its place back, so two can still succeed;
        // never more than the allowance of two are judged.
        assert!(probes.load(Ordering::SeqCst) <= 2);
        assert_eq!(limiter.in_flight(), 0);
        counts.assert_balanced();
    });
}

#[test]
fn a_waiter_enqueued_while_a_slot_frees_is_handed_it() {
    loom::model(|| {
        let counts = Arc::new(Counts::default());
        let limiter = fixed(1, &counts);
        let held = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
        let waiter = {
            let limiter = Arc::clone(&limiter);
            // A stranded waiter parks forever: loom reports the deadlock.
            thread::spawn(move || {
                loom::future::block_on(limiter.admission().acquire())
                    .unwrap()
                    .success()
            })
        };
        held.success();
        waiter.join().unwrap();
        assert_eq!(limiter.in_flight(), 0);
        counts.assert_balanced();
    });
}

#[test]
fn a_waiter_enqueued_while_the_limit_is_raised_is_handed_a_slot() {
    loom::model(|| {
        let counts = Arc::new(Counts::default());
        let limiter = fixed(1, &counts);
        let held = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
        let waiter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                loom::future::block_on(limiter.admission().acquire())
                    .unwrap()
                    .success()
            })
        };
        limiter.update(|f| f.set_limit(2)).unwrap();
        waiter.join().unwrap();
        held.success();
        assert_eq!(limiter.in_flight(), 0);
        counts.assert_balanced();
    });
}

#[test]
fn a_waiter_cancelled_while_a_slot_is_handed_to_it_gives_the_slot_back() {
    loom::model(|| {
        let counts = Arc::new(Counts::default());
        let limiter = fixed(1, &counts);
        let held = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
        let waiter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                let mut acquire = Box::pin(limiter.admission().acquire());
                let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
                // Poll once (it may queue, or find the slot already free),
                // then give up: a slot handed over meanwhile must go back.
                if let Poll::Ready(permit) = acquire.as_mut().poll(&mut cx) {
                    permit.unwrap().success();
                }
            })
        };
        held.success();
        waiter.join().unwrap();
        assert_eq!(limiter.in_flight(), 0);
        counts.assert_balanced();
        assert!(limiter.try_acquire().is_ok());
    });
}

/// Counts what it is told, one success at a time or in batches; needs no
/// latencies and lets every success be held (untimed: counted).
#[derive(Clone, Default)]
struct Tally {
    successes: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
}

impl Algorithm for Tally {
    fn name(&self) -> &'static str {
        "tally"
    }
    fn publish(&self) -> Published {
        Published::new(Gate::limited(3)).with_hints(
            Hints::default()
                .with_feedback(Feedback::Outcomes)
                .with_deferral(Some(Deferral::ALL)),
        )
    }
    fn on_sample(&mut self, _now: Instant, sample: &Sample) {
        match sample.outcome {
            Outcome::Success => self.successes.fetch_add(1, Ordering::SeqCst),
            Outcome::Overload => self.failures.fetch_add(1, Ordering::SeqCst),
            Outcome::Ignore => 0,
        };
    }
    fn on_successes(&mut self, _now: Instant, count: u64) {
        self.successes.fetch_add(count, Ordering::SeqCst);
    }
}

#[test]
fn batched_successes_and_a_failure_beside_them_are_all_handed_over_once() {
    batched_beside_a_failure(Sharding::Off);
}

#[test]
fn successes_batched_on_parked_slots_and_a_failure_beside_them_are_all_handed_over_once() {
    batched_beside_a_failure(Sharding::Always);
}

/// Bounded to [`PREEMPTIONS`]: three threads, each moving the in-flight
/// word, make it one of the largest models.
fn batched_beside_a_failure(sharding: Sharding) {
    bounded(move || {
        let tally = Tally::default();
        let limiter = Arc::new(
            Limiter::builder(tally.clone())
                .clock(ManualClock::new())
                .sharding(sharding)
                .build()
                .unwrap(),
        );
        let callers: Vec<_> = [Outcome::Success, Outcome::Overload]
            .into_iter()
            .map(|outcome| {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || {
                    let permit = limiter.try_acquire().unwrap();
                    assert!(permit.in_flight_at_start() <= 3);
                    permit.record(outcome);
                })
            })
            .collect();
        let permit = limiter.try_acquire().unwrap();
        assert!(permit.in_flight_at_start() <= 3);
        permit.success();
        for caller in callers {
            caller.join().unwrap();
        }
        assert_eq!(limiter.in_flight(), 0);
        let _ = limiter.snapshot(); // hands over what is still batched
        assert_eq!(tally.failures.load(Ordering::SeqCst), 1);
        assert_eq!(tally.successes.load(Ordering::SeqCst), 2);
    });
}

/// Counts what it is told, like [`Tally`], but times every call and lets
/// every success be held for it (a latency policy's window that cannot
/// close yet).
#[derive(Clone, Default)]
struct Patient(Tally);

impl Algorithm for Patient {
    fn name(&self) -> &'static str {
        "patient"
    }
    fn publish(&self) -> Published {
        Published::new(Gate::limited(3))
            .with_hints(Hints::default().with_deferral(Some(Deferral::ALL)))
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.0.on_sample(now, sample);
    }
}

/// Buffers set up only once the two threads meet on the policy's lock:
/// before that, each covered success is told under the lock and the policy
/// asked nothing after it; after it, a success is held.
#[test]
fn covered_successes_and_a_failure_beside_them_all_reach_the_policy_once() {
    held_beside_a_failure(Sharding::Off);
}

/// With buffers set up at once, the successes are held.
#[test]
fn successes_held_on_parked_slots_and_a_failure_beside_them_are_all_handed_over_once() {
    held_beside_a_failure(Sharding::Always);
}

/// Two successes the deferral covers, on one thread, while a failure, told
/// at once, hands over what is held on another: with buffers, the pushes
/// and the hand-over race on the buffer's mark. Bounded to
/// [`PREEMPTIONS`]: the clock reads and the buffer's lock beside the
/// policy's make it one of the largest models.
fn held_beside_a_failure(sharding: Sharding) {
    bounded(move || {
        let patient = Patient::default();
        let limiter = Arc::new(
            Limiter::builder(patient.clone())
                .clock(ManualClock::new())
                .sharding(sharding)
                .build()
                .unwrap(),
        );
        let caller = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                for _ in 0..2 {
                    let permit = limiter.try_acquire().unwrap();
                    assert!(permit.in_flight_at_start() <= 3);
                    permit.success();
                }
            })
        };
        let permit = limiter.try_acquire().unwrap();
        assert!(permit.in_flight_at_start() <= 3);
        permit.overload();
        caller.join().unwrap();
        assert_eq!(limiter.in_flight(), 0);
        let _ = limiter.snapshot(); // hands over what is still held
        assert_eq!(patient.0.failures.load(Ordering::SeqCst), 1);
        assert_eq!(patient.0.successes.load(Ordering::SeqCst), 2);
    });
}

/// Counts what it is told, as [`Tally`] does, under a limit of its own,
/// timing every call or none, and lets every success be held.
#[derive(Clone)]
struct Limited {
    tally: Tally,
    limit: u32,
    feedback: Feedback,
}

impl Algorithm for Limited {
    fn name(&self) -> &'static str {
        "limited"
    }
    fn publish(&self) -> Published {
        Published::new(Gate::limited(self.limit)).with_hints(
            Hints::default()
                .with_feedback(self.feedback)
                .with_deferral(Some(Deferral::ALL)),
        )
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.tally.on_sample(now, sample);
    }
    fn on_successes(&mut self, now: Instant, count: u64) {
        self.tally.on_successes(now, count);
    }
}

/// Whether some run of [`the_lazy_set_up_of_shards_and_buffers_mid_call`]
/// held a success in a buffer set up during the run.
static HELD_IN_A_BUFFER: AtomicBool = AtomicBool::new(false);

/// The default sharding's switch, while calls run: one thread makes two
/// calls that succeed, timed, while another makes one that fails and asks
/// for a snapshot, against a limit of one. The first time the two race for
/// the in-flight word, the shards are set up; the first time one finds the
/// policy's lock held, the buffers are, and a success after that is held
/// in one. Neither set-up lets two calls run at once, strands the slot, or
/// loses or repeats a sample; and some run does hold a success in a buffer
/// set up mid-run (so the model reaches the set-up it is about).
#[test]
fn shards_and_buffers_set_up_while_calls_run_keep_the_limit_and_lose_nothing() {
    loom::model(the_lazy_set_up_of_shards_and_buffers_mid_call);
    assert!(HELD_IN_A_BUFFER.load(Ordering::SeqCst));
}

/// A call's run, which no other call may share: counted in `running`
/// across a point at which loom may run the other threads (its plain
/// atomics are no such point).
fn run_alone(running: &AtomicU64) {
    assert_eq!(running.fetch_add(1, Ordering::SeqCst), 0);
    thread::yield_now();
    running.fetch_sub(1, Ordering::SeqCst);
}

fn the_lazy_set_up_of_shards_and_buffers_mid_call() {
    let tally = Tally::default();
    let limiter = Arc::new(
        Limiter::builder(Limited {
            tally: tally.clone(),
            limit: 1,
            feedback: Feedback::Timed,
        })
        .clock(ManualClock::new())
        .build()
        .unwrap(),
    );
    let running = Arc::new(AtomicU64::new(0));
    let caller = {
        let (limiter, running, tally) = (Arc::clone(&limiter), Arc::clone(&running), tally.clone());
        thread::spawn(move || {
            let mut admitted = 0;
            for _ in 0..2 {
                let Ok(permit) = limiter.try_acquire() else {
                    continue;
                };
                assert_eq!(permit.in_flight_at_start(), 1);
                run_alone(&running);
                let told = tally.successes.load(Ordering::SeqCst);
                permit.success();
                if tally.successes.load(Ordering::SeqCst) == told {
                    // Not told under the lock: held in a buffer.
                    HELD_IN_A_BUFFER.store(true, Ordering::SeqCst);
                }
                admitted += 1;
            }
            admitted
        })
    };
    let failed = match limiter.try_acquire() {
        Ok(permit) => {
            assert_eq!(permit.in_flight_at_start(), 1);
            run_alone(&running);
            permit.overload();
            1
        }
        Err(_) => 0,
    };
    let _ = limiter.snapshot();
    let succeeded = caller.join().unwrap();
    assert_eq!(limiter.in_flight(), 0);
    assert!(limiter.try_acquire().is_ok());
    let _ = limiter.snapshot(); // hands over what is still held
    assert_eq!(tally.failures.load(Ordering::SeqCst), failed);
    assert_eq!(tally.successes.load(Ordering::SeqCst), succeeded);
}

/// The default sharding's switch with successes counted, not timed: two
/// calls on one thread and one on another, under a limit high enough to
/// park (two shards under loom, [`rheostat::limiter::PARK_PER_SHARD`] each). Once
/// the two race for the in-flight word, the shards are set up, and a
/// success after that parks its slot and is counted in a shard's cell,
/// beside those counted in the word before: each is handed over once, and
/// every slot comes back.
#[test]
fn successes_counted_across_the_switch_to_shards_are_all_handed_over_once() {
    loom::model(|| {
        let tally = Tally::default();
        let limiter = Arc::new(
            Limiter::builder(Limited {
                tally: tally.clone(),
                limit: 2 * rheostat::limiter::PARK_PER_SHARD,
                feedback: Feedback::Outcomes,
            })
            .clock(ManualClock::new())
            .build()
            .unwrap(),
        );
        let caller = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                for _ in 0..2 {
                    limiter.try_acquire().unwrap().success();
                }
            })
        };
        limiter.try_acquire().unwrap().overload();
        caller.join().unwrap();
        assert_eq!(limiter.in_flight(), 0);
        let _ = limiter.snapshot(); // hands over what is still counted
        assert_eq!(tally.failures.load(Ordering::SeqCst), 1);
        assert_eq!(tally.successes.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn untimed_calls_to_a_fixed_limit_never_overshoot_or_leak() {
    loom::model(|| {
        // No observer: `Fixed` asks for nothing, so a finished call only
        // gives its slot back, with no lock and no clock.
        let limiter = Arc::new(
            Limiter::builder(Fixed::new(1).unwrap())
                .clock(ManualClock::new())
                .build()
                .unwrap(),
        );
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || {
                    if let Ok(permit) = limiter.try_acquire() {
                        assert_eq!(permit.in_flight_at_start(), 1);
                        permit.success();
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
        assert_eq!(limiter.in_flight(), 0);
        assert!(limiter.try_acquire().is_ok());
    });
}

fn parking(limit: u32) -> Arc<Limiter<Fixed, ManualClock>> {
    Arc::new(
        Limiter::builder(Fixed::new(limit).unwrap())
            .clock(ManualClock::new())
            .sharding(Sharding::Always)
            .build()
            .unwrap(),
    )
}

#[test]
fn slots_parked_per_core_are_taken_back_without_overshoot_or_leak() {
    loom::model(|| {
        let limiter = parking(1);
        // Parked on this thread's shard: the callers, on the other shard
        // and this one, must find it.
        limiter.try_acquire().unwrap().success();
        let running = Arc::new(AtomicU64::new(0));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (limiter, running) = (Arc::clone(&limiter), Arc::clone(&running));
                thread::spawn(move || {
                    if let Ok(permit) = limiter.try_acquire() {
                        run_alone(&running);
                        permit.success();
                        true
                    } else {
                        false
                    }
                })
            })
            .collect();
        let admitted = callers
            .into_iter()
            .map(|caller| caller.join().unwrap())
            .filter(|&admitted| admitted)
            .count();
        // One slot: the first caller always gets it, wherever it was parked.
        assert!(admitted >= 1);
        assert_eq!(limiter.in_flight(), 0);
        assert!(limiter.try_acquire().is_ok());
    });
}

#[test]
fn a_parked_slot_is_not_used_beyond_a_lowered_limit() {
    loom::model(|| {
        let limiter = parking(2);
        // One call running and one slot parked on this thread's shard.
        let held = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
        limiter.try_acquire().unwrap().success();
        let running = Arc::new(AtomicU64::new(1));
        let caller = {
            let (limiter, running) = (Arc::clone(&limiter), Arc::clone(&running));
            thread::spawn(move || {
                if let Ok(permit) = limiter.try_acquire() {
                    assert!(running.fetch_add(1, Ordering::SeqCst) < 2);
                    running.fetch_sub(1, Ordering::SeqCst);
                    permit.success();
                }
            })
        };
        limiter.update(|f| f.set_limit(1)).unwrap();
        // The limit of one is in force and one call runs: the slot parked
        // here must not be taken.
        assert!(limiter.try_acquire().is_err());
        caller.join().unwrap();
        running.fetch_sub(1, Ordering::SeqCst);
        held.success();
        assert_eq!(limiter.in_flight(), 0);
        assert!(limiter.try_acquire().is_ok());
    });
}

#[test]
fn a_waiter_enqueued_while_a_slot_is_parked_is_handed_it() {
    loom::model(|| {
        let limiter = parking(1);
        let held = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
        let waiter = {
            let limiter = Arc::clone(&limiter);
            // A stranded waiter parks forever: loom reports the deadlock.
            thread::spawn(move || {
                loom::future::block_on(limiter.admission().acquire())
                    .unwrap()
                    .success()
            })
        };
        // Parked, unless the waiter is seen.
        held.success();
        waiter.join().unwrap();
        assert_eq!(limiter.in_flight(), 0);
    });
}

/// A retry budget with room for one retry per two calls: two threads that
/// each begin a call and then ask for a retry are granted exactly one, in
/// every interleaving (the later withdrawal, under the budget's lock, sees
/// both calls; the earlier may see one, which earns half a retry).
#[test]
fn two_calls_that_earn_one_retry_between_them_are_granted_exactly_one() {
    use rheostat::retry::{Backoff, Budget, Decision, Ended, Retry, RetryConfig};
    loom::model(|| {
        let origin = Instant::now();
        let retry = Arc::new(
            Retry::new(
                RetryConfig {
                    backoff: Backoff {
                        base: Duration::ZERO,
                        cap: Duration::ZERO,
                    },
                    budget: Budget {
                        ratio: 0.5,
                        min_per_second: 0.0,
                        ttl: Duration::from_secs(10),
                    },
                    ..RetryConfig::default()
                },
                1,
                origin,
            )
            .unwrap(),
        );
        let ask = move |retry: &Retry| {
            let mut call = retry.begin(origin, Duration::from_secs(1));
            call.attempts = 1;
            matches!(
                retry.after(&call, Ended::Ran(Outcome::Overload.into()), origin, false),
                Decision::Retry { .. }
            )
        };
        let other = {
            let retry = Arc::clone(&retry);
            thread::spawn(move || ask(&retry))
        };
        let here = ask(&retry);
        let there = other.join().unwrap();
        assert_eq!(u32::from(here) + u32::from(there), 1);
    });
}

/// A critical and a sheddable call racing for two slots of a limiter with
/// classes: neither overshoots the limit, each class's count comes back to
/// zero, and in-flight to zero, in every interleaving.
#[test]
fn calls_of_two_classes_racing_keep_their_counts_exact() {
    use rheostat::priority::Priority;
    bounded(|| {
        let limiter = classed_two();
        let other = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                if let Ok(p) = limiter.admission().class(Priority::Sheddable).try_acquire() {
                    assert!(limiter.in_flight() <= 2);
                    p.success();
                }
            })
        };
        if let Ok(p) = limiter.admission().class(Priority::Critical).try_acquire() {
            assert!(limiter.in_flight() <= 2);
            p.success();
        }
        other.join().unwrap();
        assert_eq!(limiter.in_flight(), 0);
        assert_eq!(limiter.classes().unwrap().in_flight(), [0, 0, 0, 0]);
    });
}

/// A reserve that drains to nothing on one thread while it grows from
/// nothing on another still holds its slot afterwards: the bit that tells
/// a call which classes above it keep anything is set whenever the reserve
/// is more than nothing (cleared without looking at the reserve again, the
/// grown reserve lost its bit and a sheddable call took the kept slot).
#[test]
fn a_reserve_grown_while_it_drains_keeps_its_slot() {
    use rheostat::priority::{Class, Priority};
    bounded(|| {
        let limiter = classed_two();
        let (critical, sheddable) = (
            Class::from(Priority::Critical),
            Class::from(Priority::Sheddable),
        );
        // A critical call finds the limit full of sheddable ones: a slot is
        // kept for its class.
        let first = Admission::new(Arc::clone(&limiter))
            .class(sheddable)
            .try_acquire()
            .unwrap();
        let second = Admission::new(Arc::clone(&limiter))
            .class(sheddable)
            .try_acquire()
            .unwrap();
        assert!(limiter.admission().class(critical).try_acquire().is_err());
        second.success();
        // One thread: a sheddable call turned away for the kept slot while
        // no critical call holds one drains the reserve to nothing. The
        // other: a critical call takes the slot, and another finds the limit
        // full while a sheddable call holds a slot, growing the reserve
        // (from nothing, if the first thread drained it).
        let other = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                assert!(limiter.admission().class(sheddable).try_acquire().is_err());
            })
        };
        let held = Admission::new(Arc::clone(&limiter))
            .class(critical)
            .try_acquire()
            .unwrap();
        assert!(limiter.admission().class(critical).try_acquire().is_err());
        other.join().unwrap();
        held.success();
        // Whatever the order, the reserve grew last or was never drained:
        // the free slot is kept for the critical class.
        assert_eq!(limiter.in_flight(), 1);
        assert!(limiter.admission().class(sheddable).try_acquire().is_err());
        assert!(limiter.admission().class(critical).try_acquire().is_ok());
        first.success();
    });
}

#[test]
fn a_timeout_learned_while_calls_run_is_never_above_the_ceiling_and_is_shown_once_told() {
    loom::model(|| {
        // The learned timeout is stored under the policy's lock and read
        // without it, by each permit: a call admitted as another's success
        // teaches the learner gets the ceiling or the learned value, never
        // anything else, and the value is shown once the success reaches
        // the learner (at the latest when the policy is next looked at).
        let ceiling = Duration::from_secs(1);
        let floor = Duration::from_millis(1);
        let limiter = Arc::new(
            Limiter::builder(Fixed::new(2).unwrap())
                .clock(ManualClock::new())
                .timeout(
                    rheostat::Timeout::learned(ceiling)
                        .floor(floor)
                        .min_samples(1),
                )
                .build()
                .unwrap(),
        );
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || {
                    let permit = limiter.try_acquire().unwrap();
                    let given = permit.timeout(ceiling);
                    assert!(given == ceiling || given == floor, "{given:?}");
                    permit.success();
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
        let _ = limiter.snapshot();
        assert_eq!(limiter.timeouts().learned, Some(floor));
        assert_eq!(limiter.timeouts().in_force, Some(floor));
        assert_eq!(limiter.in_flight(), 0);
    });
}

#[test]
fn calls_given_a_learned_timeouts_ceiling_racing_for_the_one_slot_allowed_never_both_get_it() {
    loom::model(|| {
        // The count of calls given the ceiling is taken by compare-and-swap
        // at admission and given back at the end, without the policy's
        // lock: under a limit of 2, `share` 0.5 allows one such call at a
        // time, whichever of two racing calls is drawn, and the count is
        // given back (a later call can be given the ceiling again).
        let ceiling = Duration::from_secs(1);
        let limiter = Arc::new(
            Limiter::builder(Fixed::new(2).unwrap())
                .clock(ManualClock::new())
                .timeout(
                    rheostat::Timeout::learned(ceiling)
                        .share(0.5)
                        .min_samples(1),
                )
                // A seed whose two racing calls are both drawn for the
                // ceiling: the count, not the draw, must hold one back.
                .seed(0)
                .build()
                .unwrap(),
        );
        limiter.try_acquire().unwrap().success();
        assert!(limiter.timeouts().learned.is_some());
        // (calls given the ceiling, calls holding a permit)
        let counts = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (limiter, counts) = (Arc::clone(&limiter), Arc::clone(&counts));
                thread::spawn(move || {
                    let permit = limiter.try_acquire().unwrap();
                    if permit.timeout(ceiling) == ceiling {
                        counts.0.fetch_add(1, Ordering::SeqCst);
                    }
                    // Both permits held at once, then judged.
                    counts.1.fetch_add(1, Ordering::SeqCst);
                    while counts.1.load(Ordering::SeqCst) < 2 {
                        thread::yield_now();
                    }
                    assert!(
                        counts.0.load(Ordering::SeqCst) <= 1,
                        "two given the ceiling"
                    );
                    drop(permit);
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
        assert_eq!(limiter.in_flight(), 0);
        let again = (0..16).any(|_| {
            let permit = limiter.try_acquire().unwrap();
            permit.timeout(ceiling) == ceiling
        });
        assert!(again, "the count was not given back");
    });
}
