//! Keyed limiters against a map full of limiters that must be kept (open
//! breakers) and a flood of new keys: a lookup of a key held never waits
//! behind a new key's eviction scan, and a refused new key costs a constant
//! amount on average, counted in limiters judged.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rheostat::algorithms::breaker::{BreakerConfig, Cooldown};
use rheostat::algorithms::{
    Algorithm, Breaker, BreakerState, Fixed, Published, Sample, Snapshot, Transition,
};
use rheostat::keyed::{KeyedError, KeyedLimiters};
use rheostat::{
    clock::{Clock, ManualClock},
    Limiter,
};

/// What the test sees of the policies: how many times one was judged (its
/// snapshot read), and a scan made to stop inside one judgement.
#[derive(Default)]
struct Hook {
    judged: AtomicUsize,
    phase: Mutex<Phase>,
    changed: Condvar,
}

#[derive(Default)]
struct Phase {
    /// The next judgement stops until released.
    armed: bool,
    /// A judgement is stopped.
    stopped: bool,
}

impl Hook {
    fn judge(&self) {
        self.judged.fetch_add(1, Ordering::Relaxed);
        let mut phase = self.phase.lock().unwrap();
        if phase.armed {
            phase.armed = false;
            phase.stopped = true;
            self.changed.notify_all();
            while phase.stopped {
                phase = self.changed.wait(phase).unwrap();
            }
        }
    }

    fn wait_until_stopped(&self) {
        let phase = self.phase.lock().unwrap();
        let (phase, _) = self
            .changed
            .wait_timeout_while(phase, Duration::from_secs(30), |p| !p.stopped)
            .unwrap();
        assert!(phase.stopped, "the scan never judged a limiter");
    }

    fn release(&self) {
        self.phase.lock().unwrap().stopped = false;
        self.changed.notify_all();
    }
}

/// A policy whose snapshot, which judging a limiter for eviction reads, is
/// told to the hook.
struct Watched {
    inner: Box<dyn Algorithm>,
    hook: Arc<Hook>,
}

impl Algorithm for Watched {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn publish(&self) -> Published {
        self.inner.publish()
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.inner.on_sample(now, sample);
    }
    fn on_successes(&mut self, now: Instant, count: u64) {
        self.inner.on_successes(now, count);
    }
    fn on_admit(&mut self, now: Instant) -> bool {
        self.inner.on_admit(now)
    }
    fn on_rejected(&mut self, now: Instant, count: u64) {
        self.inner.on_rejected(now, count);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
    }
    fn poll_transition(&mut self) -> Option<Transition> {
        self.inner.poll_transition()
    }
    fn probe_timeout(&self) -> Option<Duration> {
        self.inner.probe_timeout()
    }
    fn hold_closed(&mut self, now: Instant, hold: bool) -> bool {
        self.inner.hold_closed(now, hold)
    }
    fn snapshot(&self) -> Snapshot {
        self.hook.judge();
        self.inner.snapshot()
    }
    fn members(&self) -> Vec<&'static str> {
        self.inner.members()
    }
}

/// Keyed limiters on `clock` whose keys starting `free` get a fixed limit
/// and every other a breaker with an hour's cooldown, each watched by
/// `hook`.
fn keyed<C: Clock + Clone>(
    max_keys: usize,
    clock: C,
    hook: &Arc<Hook>,
) -> Arc<KeyedLimiters<String, C>> {
    let hook = Arc::clone(hook);
    let keyed = KeyedLimiters::builder(move |key: &String| {
        let inner: Box<dyn Algorithm> = if key.starts_with("free") {
            Box::new(Fixed::new(2)?)
        } else {
            Box::new(Breaker::new(BreakerConfig {
                cooldown: Cooldown::Fixed(Duration::from_secs(3600)),
                ..BreakerConfig::recommended()
            })?)
        };
        let policy: Box<dyn Algorithm> = Box::new(Watched {
            inner,
            hook: Arc::clone(&hook),
        });
        Ok(Limiter::builder(policy).name(key.clone()))
    })
    .max_keys(max_keys)
    .idle_timeout(Duration::from_secs(60))
    .clock(clock)
    .build()
    .unwrap();
    Arc::new(keyed)
}

/// Fill the map with `n` keys, `kept-0`…, each breaker tripped open.
fn fill_with_open_breakers<C: Clock + Clone>(keyed: &KeyedLimiters<String, C>, n: usize) {
    for i in 0..n {
        let limiter = keyed.get(&format!("kept-{i}")).unwrap();
        for _ in 0..1_000 {
            match limiter.try_acquire() {
                Ok(permit) => permit.overload(),
                Err(_) => break,
            }
        }
        assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
    }
}

/// Releases a stopped scan however the test ends.
struct Release(Arc<Hook>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.release();
    }
}

#[test]
fn a_lookup_of_a_key_held_never_waits_behind_a_new_keys_eviction_scan() {
    let hook = Arc::new(Hook::default());
    let keyed = keyed(64, ManualClock::new(), &hook);
    fill_with_open_breakers(&keyed, 64);
    let _release = Release(Arc::clone(&hook));
    hook.phase.lock().unwrap().armed = true;
    // A new key finds the map full and scans it; the scan stops inside its
    // first judgement, holding whatever it holds.
    let scanning = {
        let keyed = Arc::clone(&keyed);
        thread::spawn(move || keyed.get("new").map(|_| ()))
    };
    hook.wait_until_stopped();
    // Meanwhile a key held is looked up from another thread.
    let (sent, received) = mpsc::channel();
    let looking = {
        let keyed = Arc::clone(&keyed);
        thread::spawn(move || {
            let limiter = keyed.get("kept-5").map(|l| l.name().to_owned());
            let _ = sent.send(limiter);
        })
    };
    let looked_up = received.recv_timeout(Duration::from_secs(10));
    hook.release();
    assert_eq!(
        looked_up
            .expect("the lookup waited behind the scan")
            .unwrap(),
        "kept-5"
    );
    looking.join().unwrap();
    assert_eq!(
        scanning.join().unwrap(),
        Err(KeyedError::Full { max_keys: 64 })
    );
}

#[test]
fn a_full_map_of_kept_limiters_refuses_a_new_key_at_a_constant_cost_on_average() {
    const KEYS: usize = 1_600;
    let hook = Arc::new(Hook::default());
    let clock = ManualClock::new();
    let keyed = keyed(KEYS, clock.clone(), &hook);
    fill_with_open_breakers(&keyed, KEYS - 2);
    // Two limiters held by callers: not kept, but not free either.
    let free_a = keyed.get("free-a").unwrap();
    let free_b = keyed.get("free-b").unwrap();
    hook.judged.store(0, Ordering::Relaxed);
    for i in 0..KEYS {
        assert_eq!(
            keyed.get(&format!("new-{i}")).unwrap_err(),
            KeyedError::Full { max_keys: KEYS }
        );
        // Keys held are served throughout.
        assert!(keyed.get(&format!("kept-{i}")).is_ok() || i >= KEYS - 2);
    }
    let judged = hook.judged.load(Ordering::Relaxed);
    println!(
        "{KEYS} new keys refused by a map of {KEYS} kept limiters: {judged} judged, {:.1} per refusal (a scan each time: {KEYS})",
        judged as f64 / KEYS as f64
    );
    assert!(
        judged <= KEYS * 32,
        "{judged} limiters judged for {KEYS} refusals: a scan each"
    );
    // Room made, which nothing announces, is found within a sixteenth of
    // the map's refusals, with no time passing...
    drop(free_a);
    let admitted = (0..=KEYS / 16 + 1).find_map(|i| keyed.get(&format!("later-{i}")).ok());
    assert!(admitted.is_some(), "a freed limiter never made room");
    assert!(!keyed.contains("free-a"));
    // ...and within a second, however few new keys come.
    assert!(keyed.get("refused").is_err());
    drop(free_b);
    clock.advance(Duration::from_secs(1));
    assert!(keyed.get("once-a-second-is-enough").is_ok());
    assert!(!keyed.contains("free-b"));
    drop(admitted);
}

/// The figures with 10,000 kept limiters on the system clock: lookups of
/// keys held per second alone and under a flood of new keys, the worst
/// lookup's wait, and a refused new key's cost. Debug build:
/// `cargo test -p rheostat --test hostile_keyed -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints figures, asserts nothing of time"]
fn ten_thousand_kept_limiters_measured() {
    const KEYS: usize = 10_000;
    const RUN: Duration = Duration::from_secs(2);
    let hook = Arc::new(Hook::default());
    let keyed = keyed(KEYS, rheostat::clock::DefaultClock::default(), &hook);
    fill_with_open_breakers(&keyed, KEYS);

    let lookups = |keyed: &KeyedLimiters<String, _>| {
        let (mut n, mut worst) = (0_usize, Duration::ZERO);
        let start = Instant::now();
        while start.elapsed() < RUN {
            let t = Instant::now();
            keyed.get(&format!("kept-{}", n % KEYS)).unwrap();
            worst = worst.max(t.elapsed());
            n += 1;
        }
        (n as f64 / RUN.as_secs_f64(), worst)
    };
    let (alone, worst_alone) = lookups(&keyed);
    println!("lookups of keys held, alone: {alone:.0}/s, worst {worst_alone:?}");

    hook.judged.store(0, Ordering::Relaxed);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let (keyed, stop) = (Arc::clone(&keyed), Arc::clone(&stop));
        thread::spawn(move || {
            let (mut refused, start) = (0_usize, Instant::now());
            while !stop.load(Ordering::Relaxed) {
                assert!(keyed.get(&format!("new-{refused}")).is_err());
                refused += 1;
            }
            (refused, start.elapsed())
        })
    };
    let (flooded, worst_flooded) = lookups(&keyed);
    stop.store(true, Ordering::Relaxed);
    let (refused, took) = flood.join().unwrap();
    let judged = hook.judged.load(Ordering::Relaxed);
    println!("lookups of keys held, under the flood: {flooded:.0}/s, worst {worst_flooded:?}");
    println!(
        "new keys refused: {refused} in {took:?}, {:.1} µs each, {:.1} limiters judged each",
        took.as_secs_f64() * 1e6 / refused as f64,
        judged as f64 / refused as f64
    );
}
