//! Keyed limiters: created by their factory on first use, capped, idle
//! ones evicted, busy or open ones kept. Built from a factory closure, with
//! no feature; from configuration (`KeyedConfig`) with `config`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat::Admission;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rheostat::algorithms::breaker::{BreakerConfig, Cooldown};
use rheostat::algorithms::{Algorithm, Breaker, BreakerState, Fixed};
use rheostat::keyed::{KeyedError, KeyedLimiters};
use rheostat::{clock::ManualClock, Limiter};

const IDLE: Duration = Duration::from_secs(60);

/// A breaker with an hour's cooldown for `ledger`, a fixed limit of 2 for
/// every other key, each named after its key.
fn limiters(max_keys: usize, clock: &ManualClock) -> KeyedLimiters<String, ManualClock> {
    KeyedLimiters::builder(|key: &String| {
        let policy: Box<dyn Algorithm> = if key == "ledger" {
            Box::new(Breaker::new(BreakerConfig {
                cooldown: Cooldown::Fixed(Duration::from_secs(3600)),
                ..BreakerConfig::recommended()
            })?)
        } else {
            Box::new(Fixed::new(2)?)
        };
        Ok(Limiter::builder(policy).name(key.clone()))
    })
    .max_keys(max_keys)
    .idle_timeout(IDLE)
    .clock(clock.clone())
    .build()
    .unwrap()
}

#[test]
fn a_key_gets_the_same_limiter_each_time_built_from_its_own_config_or_the_default() {
    let clock = ManualClock::new();
    let keyed = limiters(10, &clock);
    let a = keyed.get("search").unwrap();
    let b = keyed.get("search").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.name(), "search");
    assert_eq!(a.gate().limit, 2);
    assert_eq!(keyed.get("ledger").unwrap().snapshot().policy, "breaker");
    assert_eq!(keyed.len(), 2);
}

#[test]
fn the_key_cap_holds_while_every_limiter_is_in_use() {
    let clock = ManualClock::new();
    let keyed = limiters(3, &clock);
    let held: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|k| keyed.get(*k).unwrap())
        .collect();
    clock.advance(IDLE * 10);
    assert_eq!(
        keyed.get("d").unwrap_err(),
        KeyedError::Full { max_keys: 3 }
    );
    assert_eq!(keyed.len(), 3);
    // Known keys are still served.
    assert!(keyed.get("a").is_ok());
    drop(held);
}

#[test]
fn idle_limiters_are_evicted_to_make_room_and_on_request() {
    let clock = ManualClock::new();
    let keyed = limiters(2, &clock);
    drop(keyed.get("a").unwrap());
    clock.advance(IDLE / 2);
    drop(keyed.get("b").unwrap());
    // Not idle long enough for `evict_idle`...
    assert_eq!(keyed.evict_idle(), 0);
    // ...but a new key finds room: the least recently used goes.
    drop(keyed.get("c").unwrap());
    assert!(!keyed.contains("a") && keyed.contains("b") && keyed.contains("c"));
    clock.advance(IDLE);
    // Asking for `b` again makes it recent; `c`, idle, goes for `d`.
    drop(keyed.get("b").unwrap());
    drop(keyed.get("d").unwrap());
    assert!(!keyed.contains("c") && keyed.contains("b") && keyed.contains("d"));
    clock.advance(IDLE);
    assert_eq!(keyed.evict_idle(), 2);
    assert!(keyed.is_empty());
}

#[test]
fn a_flood_of_junk_keys_kept_recent_cannot_lock_out_a_new_key() {
    // The defaults' shape at a tenth of the size: the map full of junk keys
    // a hostile client re-touches every few seconds, far inside the idle
    // timeout. A legitimate new key once waited out the whole timeout.
    let clock = ManualClock::new();
    let keyed = limiters(1_000, &clock);
    let junk = |i: usize| format!("junk-{i}");
    for i in 0..1_000 {
        drop(keyed.get(&junk(i)).unwrap());
        clock.advance(Duration::from_millis(1));
    }
    // A held limiter and an open breaker are never what makes room.
    let held = keyed.get("junk-0").unwrap();
    for round in 0..50 {
        for i in 0..1_000 {
            drop(keyed.get(&junk(i)));
        }
        clock.advance(Duration::from_secs(2));
        let legit = format!("tenant-{round}");
        let limiter = keyed.get(&legit).expect("a new key always finds room");
        assert_eq!(limiter.name(), legit);
        assert!(keyed.len() <= 1_000);
    }
    assert!(keyed.contains("junk-0"), "held: never evicted");
    drop(held);
    // Every limiter in use or kept: then, and only then, refused.
    let keyed = limiters(2, &clock);
    let a = keyed.get("a").unwrap();
    let b = keyed.get("b").unwrap();
    assert_eq!(
        keyed.get("c").unwrap_err(),
        KeyedError::Full { max_keys: 2 }
    );
    drop((a, b));
    assert!(keyed.get("c").is_ok());
}

#[test]
fn a_full_map_evicts_the_least_recently_used_eighth_at_once() {
    let clock = ManualClock::new();
    let keyed = limiters(80, &clock);
    for i in 0..80 {
        drop(keyed.get(&format!("k{i}")).unwrap());
        clock.advance(Duration::from_millis(1));
    }
    drop(keyed.get("new").unwrap());
    // Ten went (an eighth of 80), the oldest ten: one scan buys room for
    // the next nine new keys.
    assert_eq!(keyed.len(), 71);
    assert!((0..10).all(|i| !keyed.contains(format!("k{i}").as_str())));
    assert!((10..80).all(|i| keyed.contains(format!("k{i}").as_str())));
}

#[test]
fn eviction_never_removes_a_limiter_with_a_call_in_flight_or_held_by_a_caller() {
    let clock = ManualClock::new();
    let keyed = limiters(2, &clock);
    let busy = keyed.get("busy").unwrap();
    let permit = Admission::new(busy.clone()).try_acquire().unwrap();
    drop(busy);
    let held = keyed.get("held").unwrap();
    clock.advance(IDLE * 2);
    assert_eq!(keyed.evict_idle(), 0);
    assert!(keyed.contains("busy") && keyed.contains("held"));
    assert_eq!(permit.limiter().in_flight(), 1);
    permit.success();
    drop(held);
    assert_eq!(keyed.evict_idle(), 2);
}

#[test]
fn eviction_never_removes_an_open_breaker() {
    let clock = ManualClock::new();
    let keyed = limiters(2, &clock);
    let ledger = keyed.get("ledger").unwrap();
    for _ in 0..10 {
        ledger.try_acquire().unwrap().overload();
    }
    assert_eq!(ledger.snapshot().state, Some(BreakerState::Open));
    drop(ledger);
    drop(keyed.get("other").unwrap());
    clock.advance(IDLE * 2);
    assert_eq!(keyed.evict_idle(), 1);
    assert!(keyed.contains("ledger"));
    assert!(!keyed.contains("other"));
    // Still the same open breaker: the outage is not forgotten.
    assert_eq!(
        keyed.get("ledger").unwrap().snapshot().state,
        Some(BreakerState::Open)
    );
    // Nor when a new key needs room before anything is idle: the other
    // goes, however recent, and the open breaker stays.
    drop(keyed.get("other").unwrap());
    drop(keyed.get("new").unwrap());
    assert!(keyed.contains("ledger") && keyed.contains("new"));
    assert!(!keyed.contains("other"));
}

/// What the factory refuses, and a builder it makes that cannot build, end
/// in `KeyedError::Config` and take no room.
#[test]
fn a_key_the_factory_cannot_make_a_limiter_for_is_a_config_error_and_takes_no_room() {
    let keyed = KeyedLimiters::builder(|tenant: &String| {
        // A limit of 0 and a wait of 0 are both out of range.
        let limit = if tenant == "no-limit" { 0 } else { 4 };
        let wait = if tenant == "no-wait" { 0 } else { 50 };
        let policy: Box<dyn Algorithm> = Box::new(Fixed::new(limit)?);
        Ok(Limiter::builder(policy).max_wait(Duration::from_millis(wait)))
    })
    .build()
    .unwrap();
    match keyed.get("no-limit").unwrap_err() {
        KeyedError::Config(e) => assert_eq!(e.field(), "fixed.limit"),
        other => panic!("{other:?}"),
    }
    match keyed.get("no-wait").unwrap_err() {
        KeyedError::Config(e) => assert_eq!(e.field(), "limiter.max_wait"),
        other => panic!("{other:?}"),
    }
    assert!(keyed.is_empty());
    assert_eq!(keyed.get("alice").unwrap().gate().limit, 4);
    assert_eq!(keyed.len(), 1);
}

#[cfg(feature = "config")]
#[test]
fn bad_configuration_is_refused_when_built_naming_the_key() {
    use rheostat::algorithms::AimdConfig;
    use rheostat::config::{KeyedConfig, LimiterConfig};

    let err = KeyedConfig::<String>::new(LimiterConfig::new(AimdConfig::default()))
        .key(
            "payments".to_owned(),
            LimiterConfig::new(AimdConfig {
                backoff: 2.0,
                ..AimdConfig::default()
            }),
        )
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "payments.policy.backoff");
    let err = KeyedConfig::<String>::new(LimiterConfig::new(AimdConfig::default()))
        .builder()
        .unwrap()
        .max_keys(0)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "keyed.max_keys");
}

#[test]
fn many_threads_asking_for_the_same_keys_share_one_limiter_each() {
    let clock = ManualClock::new();
    let keyed = Arc::new(limiters(64, &clock));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let keyed = Arc::clone(&keyed);
            thread::spawn(move || {
                (0..200)
                    .map(|i| Arc::as_ptr(&keyed.get(&format!("k{}", i % 16)).unwrap()) as usize)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let seen: Vec<Vec<usize>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(keyed.len(), 16);
    for run in &seen[1..] {
        assert_eq!(run, &seen[0]);
    }
}

/// Keyed limiters read the keyed clock: with a manual one, a key's breaker
/// cools down in virtual time, and its retry-after is counted on it.
#[test]
fn keyed_limiters_run_in_the_keyed_clock_s_time() {
    let clock = ManualClock::new();
    let keyed = limiters(2, &clock);
    let ledger = keyed.get("ledger").unwrap();
    for _ in 0..10 {
        ledger.try_acquire().unwrap().overload();
    }
    clock.advance(Duration::from_secs(600));
    // A cooldown of an hour (with its jitter), 10 minutes of it gone.
    let after = ledger.try_acquire().unwrap_err().retry_after().unwrap();
    assert!(
        after <= Duration::from_secs(3000) && after > Duration::from_secs(2000),
        "{after:?}"
    );
    clock.advance(after);
    let probe = ledger.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(ledger.snapshot().state, Some(BreakerState::HalfOpen));
}
