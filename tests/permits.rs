//! A permit is the slot: released once whatever happens to it — recorded,
//! dropped, panicked through, moved to another thread or task, aborted —
//! and held across the attempts of one call.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat::Admission;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rheostat::algorithms::{Algorithm, Fixed, Gate, Published, Sample};
use rheostat::{clock::ManualClock, DynLimiter, Limiter, Outcome};

#[path = "support/recorder.rs"]
mod recorder;
use recorder::Recorder;

#[test]
fn a_dropped_permit_counts_as_ignore_by_default() {
    let recorder = Recorder::new(1);
    let limiter = Limiter::new(recorder.clone());
    drop(limiter.try_acquire().unwrap());
    assert_eq!(recorder.outcomes(), vec![Outcome::Ignore]);
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn the_drop_outcome_is_configurable() {
    let recorder = Recorder::new(1);
    let limiter = Limiter::builder(recorder.clone())
        .on_drop(Outcome::Overload)
        .build()
        .unwrap();
    drop(limiter.try_acquire().unwrap());
    assert_eq!(recorder.outcomes(), vec![Outcome::Overload]);
}

#[test]
fn a_panic_inside_a_call_releases_the_slot() {
    let recorder = Recorder::new(1);
    let limiter = Limiter::new(recorder.clone());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _permit = limiter.try_acquire().unwrap();
        panic!("the call blew up");
    }));
    assert!(result.is_err());
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(recorder.outcomes(), vec![Outcome::Ignore]);
    assert!(limiter.try_acquire().is_ok());
}

#[test]
fn owned_permits_move_into_threads() {
    let limiter = Arc::new(Limiter::new(Fixed::new(4).unwrap()));
    let go = Arc::new(std::sync::Barrier::new(5));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let permit = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
            let go = Arc::clone(&go);
            std::thread::spawn(move || {
                go.wait();
                permit.success();
            })
        })
        .collect();
    assert!(limiter.try_acquire().is_err());
    go.wait();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn limiters_permits_and_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let limiter = Arc::new(Limiter::new(Fixed::new(4).unwrap()));
    send_sync(&limiter);
    let dynamic: DynLimiter = Limiter::new(Box::new(Fixed::new(1).unwrap()));
    send_sync(&dynamic);
    let permit = limiter.try_acquire().unwrap();
    send_sync(&permit);
    let owned = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
    send_sync(&owned);
    send(&limiter.admission().acquire());
    send(
        &limiter
            .admission()
            .max_wait(Duration::from_secs(1))
            .acquire(),
    );
    send(&Admission::new(Arc::clone(&limiter)).acquire());
    send(
        &limiter
            .admission()
            .timeout(Duration::from_secs(1))
            .call(|_: &Result<(), ()>| Outcome::Success, || async { Ok(()) }),
    );
}

#[test]
fn each_attempt_under_one_permit_is_learnt_from_and_the_slot_is_held_until_the_end() {
    let clock = ManualClock::new();
    let recorder = Recorder::new(1);
    let limiter = Limiter::builder(recorder.clone())
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut permit = limiter.try_acquire().unwrap();
    // A deferred attempt of 100 ms: learnt now, the slot still held.
    clock.advance(Duration::from_millis(100));
    permit.record_attempt(Outcome::Overload);
    assert_eq!(limiter.in_flight(), 1);
    assert!(limiter.try_acquire().is_err());
    // A backoff of 1 s, not counted: the retry is timed from its start.
    clock.advance(Duration::from_secs(1));
    permit.start_attempt();
    clock.advance(Duration::from_millis(30));
    permit.record_attempt(Outcome::Overload);
    // Without `start_attempt`, the next attempt is timed from the last one.
    clock.advance(Duration::from_millis(50));
    permit.success();
    assert_eq!(limiter.in_flight(), 0);
    let samples = recorder.samples.lock().unwrap().clone();
    let seen: Vec<(Outcome, Duration, u32)> = samples
        .iter()
        .map(|s| (s.outcome, s.latency, s.in_flight))
        .collect();
    assert_eq!(
        seen,
        [
            (Outcome::Overload, Duration::from_millis(100), 1),
            (Outcome::Overload, Duration::from_millis(30), 1),
            (Outcome::Success, Duration::from_millis(50), 1),
        ]
    );
}

#[test]
fn a_permit_dropped_between_attempts_gives_its_slot_back() {
    let clock = ManualClock::new();
    let recorder = Recorder::new(1);
    let limiter = Limiter::builder(recorder.clone())
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut permit = limiter.try_acquire().unwrap();
    permit.record_attempt(Outcome::Overload);
    drop(permit);
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(recorder.outcomes(), [Outcome::Overload, Outcome::Ignore]);
    let _again = limiter.try_acquire().unwrap();
}

#[test]
fn a_probe_s_first_recorded_attempt_answers_for_it_and_its_retries_are_ordinary() {
    /// Admits one call at a time, every call a probe.
    #[derive(Clone, Default)]
    struct Probing(Arc<Mutex<Vec<bool>>>);
    impl Algorithm for Probing {
        fn name(&self) -> &'static str {
            "probing"
        }
        fn publish(&self) -> Published {
            Published::new(Gate {
                probe: true,
                ..Gate::limited(1)
            })
        }
        fn on_sample(&mut self, _now: Instant, sample: &Sample) {
            self.0.lock().unwrap().push(sample.probe);
        }
    }
    let probing = Probing::default();
    let limiter = Limiter::new(probing.clone());
    let mut permit = limiter.try_acquire().unwrap();
    assert!(permit.is_probe());
    permit.record_attempt(Outcome::Overload);
    assert!(!permit.is_probe());
    permit.start_attempt();
    permit.success();
    assert_eq!(*probing.0.lock().unwrap(), [true, false]);
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn a_permit_moved_to_another_thread_is_released_there() {
    let limiter = Arc::new(Limiter::new(Fixed::new(3).unwrap()));
    let owned = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
    std::thread::spawn(move || drop(owned)).join().unwrap();
    assert_eq!(limiter.in_flight(), 0);

    let recorded = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
    std::thread::spawn(move || recorded.overload())
        .join()
        .unwrap();
    assert_eq!(limiter.in_flight(), 0);

    // A borrowed permit moves to a scoped thread just as well.
    let borrowed = limiter.try_acquire().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || borrowed.success());
    });
    assert_eq!(limiter.in_flight(), 0);

    // And a thread that panics while holding one still gives it back.
    let doomed = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
    let panicked = std::thread::spawn(move || {
        let _held = doomed;
        panic!("the call blew up");
    })
    .join();
    assert!(panicked.is_err());
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_moved_to_another_task_is_released_there_even_if_aborted() {
    let limiter = Arc::new(Limiter::new(Fixed::new(2).unwrap()));
    let permit = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
    tokio::spawn(async move { permit.success() }).await.unwrap();
    assert_eq!(limiter.in_flight(), 0);

    let permit = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
    let task = tokio::spawn(async move {
        let _held = permit;
        std::future::pending::<()>().await;
    });
    tokio::task::yield_now().await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(limiter.in_flight(), 0);

    let queued = {
        let limiter = Arc::clone(&limiter);
        let _a = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
        let _b = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
        let waiter = tokio::spawn(Admission::new(Arc::clone(&limiter)).acquire());
        tokio::task::yield_now().await;
        waiter
    };
    // The two holders dropped: the waiter got a slot in its own task.
    let permit = queued.await.unwrap().unwrap();
    assert_eq!(limiter.in_flight(), 1);
    std::thread::spawn(move || drop(permit)).join().unwrap();
    assert_eq!(limiter.in_flight(), 0);
}
