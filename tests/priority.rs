//! Classes of calls: reserves under a limit, the admit fraction spent from
//! the top, the queue's order, and the accounting.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat::Admission;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;

#[path = "support/recorder.rs"]
mod recorder;
use recorder::Recorder;
use rheostat::algorithms::{Algorithm, Fixed, Gate, Published, Sample};
use rheostat::priority::{Class, Priorities, Priority};
use rheostat::{Limiter, RejectReason};

const CRITICAL: Class = Class::new(1);

/// A call of `class` taken now, failing fast.
fn take<A: Algorithm>(
    limiter: &Limiter<A>,
    class: impl Into<Option<Class>>,
) -> Result<rheostat::Permit<&Limiter<A>>, rheostat::Rejection> {
    limiter.admission().class(class).try_acquire()
}

fn classed(limit: u32, priorities: Priorities) -> Limiter<Fixed> {
    Limiter::builder(Fixed::new(limit).unwrap())
        .priorities(priorities)
        .build()
        .unwrap()
}

#[test]
fn a_class_that_finds_the_limit_full_gets_room_kept_for_it() {
    let limiter = classed(10, Priorities::default());
    let shed: Vec<_> = (0..10)
        .map(|_| take(&limiter, Priority::Sheddable).unwrap())
        .collect();
    // Full: a critical call is refused, and a slot is kept for it from now on.
    assert_eq!(
        take(&limiter, CRITICAL).unwrap_err().reason(),
        RejectReason::LimitReached
    );
    let mut shed = shed.into_iter();
    shed.next().unwrap().success();
    assert_eq!(
        take(&limiter, Priority::Sheddable).unwrap_err().reason(),
        RejectReason::LimitReached,
        "the freed slot is kept for the critical class"
    );
    let critical = take(&limiter, CRITICAL).unwrap();
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 1, 0, 9]);
    drop((critical, shed));
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 0, 0, 0]);
}

#[test]
fn room_a_class_does_not_use_is_lent_back_to_the_classes_below() {
    let limiter = classed(4, Priorities::default());
    let shed: Vec<_> = (0..4)
        .map(|_| take(&limiter, Priority::Sheddable).unwrap())
        .collect();
    for _ in 0..3 {
        // Three critical refusals keep up to three slots for it.
        assert!(take(&limiter, CRITICAL).is_err());
    }
    drop(shed);
    // Nothing critical in flight: each sheddable call turned away for its
    // sake gives one kept slot back, until sheddable calls fit again.
    let mut admitted = Vec::new();
    for _ in 0..20 {
        if let Ok(p) = take(&limiter, Priority::Sheddable) {
            admitted.push(p);
        }
    }
    assert_eq!(admitted.len(), 4, "every slot is lent back");
}

#[test]
fn a_configured_share_is_kept_from_the_start() {
    let limiter = classed(
        10,
        Priorities::default()
            .share(Priority::Critical, 0.3)
            .unwrap(),
    );
    let shed: Vec<_> = (0..7)
        .map(|_| take(&limiter, Priority::Sheddable).unwrap())
        .collect();
    assert!(take(&limiter, Priority::Sheddable).is_err());
    // The critical class may also take what is not kept for anyone else.
    let critical: Vec<_> = (0..3).map(|_| take(&limiter, CRITICAL).unwrap()).collect();
    assert!(take(&limiter, CRITICAL).is_err(), "the limit holds");
    drop((shed, critical));
}

#[test]
fn a_call_without_a_class_is_of_the_default_class_and_a_limiter_without_classes_ignores_them() {
    let limiter = classed(2, Priorities::default());
    let p = limiter.try_acquire().unwrap();
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 1, 0, 0]);
    drop(p);
    let plain = Limiter::new(Fixed::new(1).unwrap());
    let p = plain
        .admission()
        .class(Priority::Sheddable)
        .try_acquire()
        .unwrap();
    assert!(plain.classes().is_none());
    assert!(plain.admission().class(CRITICAL).try_acquire().is_err());
    drop(p);
}

#[test]
fn named_partitions_are_found_by_name_and_bad_ones_are_refused_by_field() {
    let limiter = classed(
        10,
        Priorities::partitions([("checkout", 0.5), ("search", 0.2), ("prefetch", 0.0)]).unwrap(),
    );
    assert_eq!(
        limiter.classes().unwrap().get("search"),
        Some(Class::new(1))
    );
    assert_eq!(limiter.classes().unwrap().get("nope"), None);
    let prefetch = limiter.classes().unwrap().get("prefetch").unwrap();
    let held: Vec<_> = (0..3).map(|_| take(&limiter, prefetch).unwrap()).collect();
    assert!(take(&limiter, prefetch).is_err(), "7 of 10 kept above it");
    drop(held);
    for (bad, field) in [
        (vec![], "priorities.classes"),
        (vec![("a", 0.5), ("a", 0.1)], "priorities.classes[1].name"),
        (vec![("a", 1.5)], "priorities.classes[0].share"),
        (vec![("a", f64::NAN)], "priorities.classes[0].share"),
        (vec![("a", 0.7), ("b", 0.4)], "priorities.classes[1].share"),
    ] {
        let err = Priorities::partitions(bad.clone()).unwrap_err();
        assert_eq!(err.field(), field, "{bad:?}");
    }
}

/// Admits a fixed fraction of calls, with no concurrency limit.
struct Half;

impl Algorithm for Half {
    fn name(&self) -> &'static str {
        "half"
    }
    fn publish(&self) -> Published {
        Published::new(Gate {
            admit_probability: 0.5,
            ..Gate::unlimited()
        })
    }
    fn on_sample(&mut self, _now: Instant, _sample: &Sample) {}
}

#[test]
fn an_admit_fraction_is_spent_on_the_most_critical_class_first() {
    let limiter = Limiter::builder(Half)
        .priorities(Priorities::default())
        .seed(7)
        .build()
        .unwrap();
    let (mut critical, mut sheddable) = (0u32, 0u32);
    for i in 0..20_000 {
        // 30% critical, 70% sheddable; the gate admits half of all calls.
        let class = if i % 10 < 3 {
            CRITICAL
        } else {
            Priority::Sheddable.into()
        };
        if let Ok(p) = take(&limiter, class) {
            if class == CRITICAL {
                critical += 1;
            } else {
                sheddable += 1;
            }
            p.success();
        }
    }
    // Critical: all of its 6,000; sheddable: what is left of the half.
    assert!(critical >= 5_990, "{critical}");
    let expected = 10_000 - 6_000;
    assert!(
        (f64::from(sheddable) - f64::from(expected)).abs() < 0.05 * f64::from(expected),
        "{sheddable}"
    );
}

#[tokio::test]
async fn the_queue_serves_the_most_critical_waiter_first() {
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .priorities(Priorities::default())
            .build()
            .unwrap(),
    );
    let held = take(&limiter, CRITICAL).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (name, class) in [
        ("sheddable", Priority::Sheddable),
        ("critical", Priority::Critical),
        ("sheddable-plus", Priority::SheddablePlus),
    ] {
        let (limiter, order) = (Arc::clone(&limiter), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let permit = limiter.admission().class(class).acquire().await.unwrap();
            order.lock().unwrap().push(name);
            tokio::time::sleep(Duration::from_millis(5)).await;
            permit.success();
        }));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    held.success();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        ["critical", "sheddable-plus", "sheddable"]
    );
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 0, 0, 0]);
}

/// One step: acquire a call of a class, or finish the call held longest.
#[derive(Clone, Debug)]
enum Op {
    Acquire(u8),
    Release(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..4).prop_map(Op::Acquire),
        2 => (0usize..64).prop_map(Op::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// In every state reached by random acquisitions and releases: a class
    /// is admitted whenever a less critical one would be, calls in flight
    /// never pass the limit, and each class's count is the calls of it held.
    #[test]
    fn a_higher_class_is_never_refused_where_a_lower_one_is_admitted(
        limit in 1u32..12,
        shares in proptest::collection::vec(0.0f64..0.25, 4),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let mut priorities = Priorities::default();
        for (class, share) in priorities.classes.iter_mut().zip(&shares) {
            class.share = *share;
        }
        let limiter = classed(limit, priorities);
        let mut held = Vec::new();
        for op in ops {
            // Probe the state: if a class is admitted, every class above it is.
            for low in (1u8..4).rev() {
                if let Ok(p) = take(&limiter, Class::new(low)) {
                    drop(p);
                    for high in 0..low {
                        let admitted = take(&limiter, Class::new(high));
                        prop_assert!(admitted.is_ok(), "class {high} refused where {low} was admitted: {:?}", limiter.classes().unwrap().in_flight());
                        drop(admitted);
                    }
                    break;
                }
            }
            match op {
                Op::Acquire(c) => {
                    if let Ok(p) = take(&limiter, Class::new(c)) {
                        held.push((c, p));
                    }
                }
                Op::Release(i) if !held.is_empty() => {
                    let at = i % held.len();
                    held.remove(at).1.success();
                }
                Op::Release(_) => {}
            }
            prop_assert!(limiter.in_flight() <= limit);
            let mut by_class = [0u32; 4];
            for (c, _) in &held {
                by_class[usize::from(*c)] += 1;
            }
            prop_assert_eq!(limiter.classes().unwrap().in_flight(), by_class.to_vec());
        }
        drop(held);
        prop_assert_eq!(limiter.in_flight(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiter_of_a_lower_class_is_served_once_the_class_above_it_has_its_room() {
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(2).unwrap())
            .priorities(Priorities::default())
            .max_wait(Duration::from_secs(2))
            .build()
            .unwrap(),
    );
    let held: Vec<_> = (0..2).map(|_| limiter.try_acquire().unwrap()).collect();
    let sheddable = tokio::spawn(
        Admission::new(Arc::clone(&limiter))
            .class(Priority::Sheddable)
            .acquire(),
    );
    tokio::task::yield_now().await;
    let critical = tokio::spawn(
        Admission::new(Arc::clone(&limiter))
            .class(Priority::CriticalPlus)
            .acquire(),
    );
    tokio::task::yield_now().await;
    drop(held);
    // The critical call's one refusal keeps one slot for it, which it then
    // takes: the other slot is the sheddable waiter's.
    let critical = critical.await.unwrap().unwrap();
    let sheddable = sheddable.await.unwrap().expect("served, not timed out");
    assert_eq!(limiter.classes().unwrap().in_flight(), [1, 0, 0, 1]);
    drop((critical, sheddable));
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_in_the_queue_names_the_class_of_the_call_refused() {
    let limiter = Limiter::builder(Fixed::new(1).unwrap())
        .priorities(Priorities::default())
        .queue(rheostat::limiter::QueueOrder::Fifo, 1)
        .max_wait(Duration::from_millis(10))
        .build()
        .unwrap();
    let _held = limiter.try_acquire().unwrap();
    let waiting = limiter.admission().class(Priority::Sheddable).acquire();
    let full = async {
        tokio::task::yield_now().await;
        limiter
            .admission()
            .class(Priority::SheddablePlus)
            .acquire()
            .await
    };
    let (waited, full) = tokio::join!(waiting, full);
    let (waited, full) = (waited.unwrap_err(), full.unwrap_err());
    assert_eq!(
        (waited.reason(), waited.class()),
        (RejectReason::TimedOut, Some(Priority::Sheddable.into()))
    );
    assert_eq!(
        (full.reason(), full.class()),
        (
            RejectReason::QueueFull,
            Some(Priority::SheddablePlus.into())
        )
    );
}

#[test]
fn a_call_held_back_by_a_reserve_tells_the_policy_the_limit_was_full() {
    let policy = Recorder::new(4);
    let limiter = Limiter::builder(policy.clone())
        .priorities(Priorities::default())
        .build()
        .unwrap();
    let shed: Vec<_> = (0..4)
        .map(|_| take(&limiter, Priority::Sheddable).unwrap())
        .collect();
    // A critical call finds the limit full: one slot is kept for it.
    assert!(take(&limiter, CRITICAL).is_err());
    drop(shed);
    let p = take(&limiter, Priority::Sheddable).unwrap();
    p.success();
    let p = take(&limiter, CRITICAL).unwrap();
    p.success();
    let samples = policy.samples.lock().unwrap().clone();
    let met: Vec<u32> = samples.iter().rev().take(2).map(|s| s.in_flight).collect();
    // The sheddable call met itself and the slot kept for the critical
    // class; the critical call met only itself.
    assert_eq!(met, [1, 2]);
}

/// A call that keeps its slot across attempts (`record_attempt`) stays of
/// its class: its end gives its class's count back (once the ticket lost
/// its class after an attempt, and the count leaked).
#[test]
fn a_call_that_keeps_its_slot_across_attempts_keeps_its_class() {
    use rheostat::algorithms::{Aimd, AimdConfig};
    use rheostat::Outcome;
    let limiter = Limiter::builder(Aimd::new(AimdConfig::default()).unwrap())
        .priorities(Priorities::default())
        .build()
        .unwrap();
    let mut permit = take(&limiter, CRITICAL).unwrap();
    permit.record_attempt(Outcome::Overload);
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 1, 0, 0]);
    permit.success();
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_class_is_not_starved_beside_free_slots_no_class_above_uses() {
    // The shape of a trial that starved sheddable calls for 8 s: a reserve
    // grown for the critical class while the limit was full (a dip of an
    // adaptive limit), then the limit with room to spare, the critical
    // class using a few slots, and sheddable callers waiting 50 ms each.
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(11).unwrap())
            .priorities(Priorities::default())
            .max_wait(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    let shed: Vec<_> = (0..11)
        .map(|_| take(&limiter, Priority::Sheddable).unwrap())
        .collect();
    for _ in 0..11 {
        assert!(take(&limiter, CRITICAL).is_err(), "full");
    }
    drop(shed);
    let critical: Vec<_> = (0..3).map(|_| take(&limiter, CRITICAL).unwrap()).collect();
    // Eight slots free, no critical call waiting: sheddable waiters get
    // in within a few of them, not after seconds of timeouts.
    let mut served = 0;
    for _ in 0..20 {
        if let Ok(p) = limiter
            .admission()
            .class(Priority::Sheddable)
            .acquire()
            .await
        {
            served += 1;
            p.success();
        }
    }
    assert!(served >= 15, "sheddable waiters served {served} of 20");
    drop(critical);
    assert_eq!(limiter.in_flight(), 0);
}

/// One step of a history with waits: a call of a class that fails fast, a
/// call of a class that waits its 50 ms, or the end of a call held.
#[derive(Clone, Debug)]
enum Step {
    Try(u8),
    Wait(u8),
    Release(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u8..4).prop_map(Step::Try),
        2 => (0u8..4).prop_map(Step::Wait),
        2 => (0usize..64).prop_map(Step::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// In every state reached by random calls that fail fast, wait or end,
    /// a class with free slots beside it, more than the configured shares
    /// above it keep unused, is not starved: a caller of that class that
    /// waits, alone in the queue, again and again while nothing else
    /// changes, is served within as many waits as the limit has slots (each
    /// wait that times out beside free slots gives back a slot of every
    /// reserve above it that its class does not use). Once, reserves grown
    /// while the limit was full were kept for seconds, and every such
    /// waiter timed out.
    #[test]
    fn a_waiting_class_beside_free_slots_is_served_within_as_many_waits_as_the_limit(
        limit in 1u32..12,
        shares in proptest::collection::vec(0.0f64..0.25, 4),
        steps in proptest::collection::vec(step(), 1..80),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut priorities = Priorities::default();
            for (class, share) in priorities.classes.iter_mut().zip(&shares) {
                class.share = *share;
            }
            let limiter = Limiter::builder(Fixed::new(limit).unwrap())
                .priorities(priorities)
                .max_wait(Duration::from_millis(50))
                .build()
                .unwrap();
            let mut held = Vec::new();
            // The slots the configured shares above class `c` keep unused
            // (each rounded up, as the limiter does): never the waiter's.
            let shares_kept = |c: u8| -> u32 {
                let by_class = limiter.classes().unwrap().in_flight();
                (0..usize::from(c))
                    .map(|h| {
                        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a share of at most 12 slots")]
                        let kept = (shares[h] * f64::from(limit)).ceil() as u32;
                        kept.saturating_sub(by_class[h])
                    })
                    .sum()
            };
            for step in steps {
                match step {
                    Step::Try(c) => {
                        if let Ok(p) = take(&limiter, Class::new(c)) {
                            held.push(p);
                        }
                    }
                    Step::Wait(c) if limiter.in_flight() + shares_kept(c) < limit => {
                        let mut waits = 0;
                        let permit = loop {
                            waits += 1;
                            match limiter.admission().class(Class::new(c)).acquire().await {
                                Ok(p) => break p,
                                Err(r) => {
                                    prop_assert_eq!(r.reason(), RejectReason::TimedOut);
                                    prop_assert!(
                                        waits <= limit,
                                        "class {} waited {} times beside {} free slots: {:?}",
                                        c,
                                        waits,
                                        limit - limiter.in_flight(),
                                        limiter.classes().unwrap().in_flight()
                                    );
                                }
                            }
                        };
                        held.push(permit);
                    }
                    Step::Wait(_) => {}
                    Step::Release(i) if !held.is_empty() => {
                        let at = i % held.len();
                        held.remove(at).success();
                    }
                    Step::Release(_) => {}
                }
                prop_assert!(limiter.in_flight() <= limit);
            }
            drop(held);
            prop_assert_eq!(limiter.in_flight(), 0);
            Ok(())
        })?;
    }
}
