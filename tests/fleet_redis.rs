//! A fleet's overrides through a real Redis server (`rheostat::config::fleet`):
//! several instances, each with its own connection, follow one operator's
//! switch; Redis stopped, restarted and slowed leaves their calls alone.
//!
//! Each test starts its own `redis-server` on a free loopback port
//! (`scripts/redis.sh` installs it; `.ci/run` runs these with `--features
//! redis`).

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rheostat::config::fleet::{self, RedisOverrides, RedisProbes};
use rheostat::config::{LiveLimiters, OverrideConfig, OverrideKind};
use rheostat::overrides::Override;

#[path = "support/admin.rs"]
mod admin;
#[path = "support/fleet_server.rs"]
mod fleet_server;

use fleet_server::{file_of, http, Server};

/// A file listing `payments` as a fixed limit of 8.
fn config_file(test: &str) -> PathBuf {
    file_of(
        test,
        "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 8\n",
    )
}

/// `n` instances of one service, in `regions`, each following the fleet.
fn instances(path: &Path, url: &str, regions: &[&str]) -> Vec<Arc<LiveLimiters>> {
    instances_under(path, url, regions, "test")
}

/// [`instances`] following the document under `prefix`.
fn instances_under(
    path: &Path,
    url: &str,
    regions: &[&str],
    prefix: &str,
) -> Vec<Arc<LiveLimiters>> {
    regions
        .iter()
        .map(|region| {
            let live = Arc::new(
                LiveLimiters::options(path)
                    .label("region", *region)
                    .load()
                    .unwrap(),
            );
            let reader = RedisOverrides::new(url, prefix, Arc::clone(&live))
                .unwrap()
                .every(Duration::from_millis(100));
            tokio::spawn(reader.run());
            live
        })
        .collect()
}

fn force_open(until_secs: u64, region: Option<&str>) -> OverrideConfig {
    OverrideConfig {
        limiter: "payments".into(),
        kind: OverrideKind::ForceOpen,
        cap: None,
        until: SystemTime::now() + Duration::from_secs(until_secs),
        instances: region
            .map(|r| [("region".to_string(), r.to_string())].into())
            .unwrap_or_default(),
        reason: Some("test".into()),
    }
}

async fn operator(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Wait until `done` holds, at most `within`; how long it took.
async fn until(within: Duration, done: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < within, "not within {within:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

fn overridden(live: &LiveLimiters) -> Option<Override> {
    live.get("payments")
        .unwrap()
        .overrides()
        .in_force()
        .map(|o| o.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_open_reaches_every_instance_within_a_second_and_a_clear_too() {
    let server = Server::start();
    let path = config_file("reach");
    let fleet = instances(&path, &server.url(), &["eu", "eu", "us"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut op = operator(&server.url()).await;
    let version = fleet::publish(&mut op, "test", vec![force_open(600, None)])
        .await
        .unwrap();
    let took = until(Duration::from_secs(1), || {
        fleet
            .iter()
            .all(|l| overridden(l) == Some(Override::ForceOpen))
    })
    .await;
    for live in &fleet {
        assert!(live.get("payments").unwrap().try_acquire().is_err());
    }
    eprintln!("forced open on 3 instances in {took:?} (version {version})");
    // Scoped to a region, it reaches only that region's instances.
    fleet::publish(&mut op, "test", vec![force_open(600, Some("us"))])
        .await
        .unwrap();
    until(Duration::from_secs(1), || {
        overridden(&fleet[0]).is_none()
            && overridden(&fleet[1]).is_none()
            && overridden(&fleet[2]) == Some(Override::ForceOpen)
    })
    .await;
    fleet::publish(&mut op, "test", Vec::new()).await.unwrap();
    until(Duration::from_secs(1), || {
        fleet.iter().all(|l| overridden(l).is_none())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_slowed_and_restarted_leaves_calls_and_decisions_local() {
    let mut server = Server::start();
    let path = config_file("faults");
    let fleet = instances(&path, &server.url(), &["eu", "eu"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut op = operator(&server.url()).await;
    // A cap the fleet obeys, ending in 3 s.
    let mut cap = force_open(3, None);
    cap.kind = OverrideKind::Cap;
    cap.cap = Some(1);
    fleet::publish(&mut op, "test", vec![cap]).await.unwrap();
    until(Duration::from_secs(1), || {
        fleet
            .iter()
            .all(|l| overridden(l) == Some(Override::Cap(1)))
    })
    .await;
    // Slowed (DEBUG SLEEP blocks the server for 2 s): every call is
    // admitted or refused at once, as decided.
    let started = Instant::now();
    let slow = tokio::spawn(async move {
        let mut con = op;
        let _: redis::RedisResult<()> = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(2)
            .query_async(&mut con)
            .await;
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    for live in &fleet {
        let payments = live.get("payments").unwrap();
        let first = payments.try_acquire().unwrap();
        assert!(payments.try_acquire().is_err(), "capped at 1");
        first.success();
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a call waited for Redis"
    );
    let _ = slow.await;
    // Stopped: the cap stays until its end, then each limiter decides alone.
    server.stop();
    for live in &fleet {
        assert_eq!(overridden(live), Some(Override::Cap(1)));
    }
    until(Duration::from_secs(5), || {
        fleet.iter().all(|l| {
            let payments = l.get("payments").unwrap();
            payments.wake();
            payments.overrides().in_force().is_none()
        })
    })
    .await;
    for live in &fleet {
        let payments = live.get("payments").unwrap();
        let held: Vec<_> = (0..8).map(|_| payments.try_acquire().unwrap()).collect();
        drop(held);
    }
    // Restarted: the next override reaches the fleet again.
    server.restart();
    let mut op = operator(&server.url()).await;
    fleet::publish(&mut op, "test", vec![force_open(600, None)])
        .await
        .unwrap();
    until(Duration::from_secs(3), || {
        fleet
            .iter()
            .all(|l| overridden(l) == Some(Override::ForceOpen))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_that_does_not_read_is_refused_and_the_overrides_in_force_stay() {
    // The reads run on the runtime's threads: a recorder for the process
    // (this test binary's only one), to count the refusals.
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let server = Server::start();
    let path = config_file("refused");
    let fleet = instances_under(&path, &server.url(), &["eu"], "refused-test");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut op = operator(&server.url()).await;
    fleet::publish(&mut op, "refused-test", vec![force_open(600, None)])
        .await
        .unwrap();
    until(Duration::from_secs(1), || overridden(&fleet[0]).is_some()).await;
    // Garbage, then an override of a limiter the instance does not have.
    let _: () =
        redis::AsyncCommands::set(&mut op, fleet::overrides_key("refused-test"), "{not json")
            .await
            .unwrap();
    let mut billing = force_open(600, None);
    billing.limiter = "billing".into();
    fleet::publish(&mut op, "refused-test", vec![billing])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(overridden(&fleet[0]), Some(Override::ForceOpen));
    let refused: u64 = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            let key = key.key();
            key.name() == "rheostat_fleet_reads_total"
                && key
                    .labels()
                    .any(|l| l.key() == "result" && l.value() == "refused")
                && key
                    .labels()
                    .any(|l| l.key() == "prefix" && l.value() == "refused-test")
        })
        .map(|(.., value)| match value {
            metrics_util::debugging::DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum();
    assert!(refused >= 2, "{refused} reads refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_endpoint_lists_the_limiters_and_sets_and_clears_an_override_for_the_fleet() {
    let server = Server::start();
    let path = config_file("admin");
    let fleet = instances(&path, &server.url(), &["eu", "us"]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = admin::router(
        Arc::clone(&fleet[0]),
        redis::Client::open(server.url()).unwrap(),
        "test",
    );
    tokio::spawn(async move { axum::serve(listener, router).await });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (status, body) = http(addr, "GET", "/limiters", "").await;
    assert_eq!(status, 200, "{body}");
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listed["limiters"][0]["name"], "payments");
    assert_eq!(listed["limiters"][0]["limit"], 8);
    assert!(listed["limiters"][0]["override"].is_null());

    let until = humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(600));
    let overrides =
        format!(r#"[{{"limiter": "payments", "kind": "cap", "cap": 2, "until": "{until}"}}]"#);
    let (status, body) = http(addr, "PUT", "/overrides", &overrides).await;
    assert_eq!((status, body.trim()), (200, r#"{"version":1}"#));
    until_all(&fleet, Some(Override::Cap(2))).await;
    let (_, body) = http(addr, "GET", "/limiters", "").await;
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listed["limiters"][0]["override"]["kind"], "cap");
    assert_eq!(listed["limiters"][0]["limit"], 2);
    assert_eq!(listed["limiters"][0]["policy_limit"], 8);
    assert!(
        listed["limiters"][0]["override"]["seconds_left"]
            .as_u64()
            .unwrap()
            > 590
    );

    let (status, _) = http(addr, "PUT", "/overrides", "[{\"limiter\": 3}]").await;
    assert_eq!(status, 400);
    let (status, body) = http(addr, "DELETE", "/overrides", "").await;
    assert_eq!((status, body.trim()), (200, r#"{"version":2}"#));
    until_all(&fleet, None).await;
}

async fn until_all(fleet: &[Arc<LiveLimiters>], overriding: Option<Override>) {
    until(Duration::from_secs(1), || {
        fleet.iter().all(|l| overridden(l) == overriding)
    })
    .await;
}

/// Open every instance's `payments` breaker: ten overloads each.
fn trip(fleet: &[Arc<LiveLimiters>]) {
    for live in fleet {
        let payments = live.get("payments").unwrap();
        for _ in 0..10 {
            if let Ok(permit) = payments.try_acquire() {
                permit.overload();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_ten_sends_at_most_its_shared_allowance_of_probes_and_one_each_without_redis() {
    let mut server = Server::start();
    let path = file_of(
        "probes",
        "[limiters.payments.policy]\npolicy = \"breaker\"\ncooldown.fixed = \"1s\"\ncooldown_jitter = 0.0\n",
    );
    // Ten instances sharing 5 probes a cycle, one cycle an hour: the
    // test's cooldowns all end in one.
    let start = |path: &Path, url: &str| -> Vec<Arc<LiveLimiters>> {
        (0..10)
            .map(|_| {
                let live = Arc::new(
                    LiveLimiters::options(path)
                        .each(|b| b.shared_probes())
                        .load()
                        .unwrap(),
                );
                let mut probes = RedisProbes::new(url, "probes", Arc::clone(&live)).unwrap();
                probes.allowance.cycle = Duration::from_secs(3600);
                tokio::spawn(probes.run());
                live
            })
            .collect()
    };
    let fleet = start(&path, &server.url());
    // Open every breaker, wait out the cooldown, and try three calls each.
    let probes_sent = |fleet: &[Arc<LiveLimiters>]| -> usize {
        fleet
            .iter()
            .map(|live| {
                let payments = live.get("payments").unwrap();
                (0..3)
                    .filter_map(|_| payments.try_acquire().ok())
                    .map(drop)
                    .count()
            })
            .sum()
    };
    trip(&fleet);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let sent = probes_sent(&fleet);
    assert!((1..=5).contains(&sent), "{sent} probes from the fleet");
    eprintln!("shared allowance of 5: {sent} probes from 10 instances");
    // Redis gone: a fleet whose claims go unanswered grants itself one
    // probe an instance, as `fleet_size` scaling would.
    server.stop();
    let alone = start(&path, &server.url());
    trip(&alone);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(probes_sent(&alone), 10, "one each without Redis");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_one_instance_sees_the_dependency_recover_the_whole_fleet_may_probe() {
    let server = Server::start();
    // Breakers judging one probe each (as `fleet_size` scales them), a
    // cooldown of 1 s, cycles of 2 s.
    let path = file_of(
        "recovered",
        "[limiters.payments.policy]\npolicy = \"breaker\"\ncooldown.fixed = \"1s\"\ncooldown_jitter = 0.0\nfleet_size = 20\n",
    );
    let cycle = Duration::from_secs(2);
    let fleet: Vec<Arc<LiveLimiters>> = (0..20)
        .map(|_| {
            let live = Arc::new(
                LiveLimiters::options(&path)
                    .each(|b| b.shared_probes())
                    .load()
                    .unwrap(),
            );
            let mut probes =
                RedisProbes::new(&server.url(), "recovered", Arc::clone(&live)).unwrap();
            probes.allowance.cycle = cycle;
            tokio::spawn(probes.run());
            live
        })
        .collect();
    // Trip every breaker 100 ms into a cycle, so that every cooldown ends
    // in that cycle.
    let into_cycle = |at: SystemTime| {
        let since = at.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        Duration::from_nanos((since.as_nanos() % cycle.as_nanos()) as u64)
    };
    tokio::time::sleep(cycle + Duration::from_millis(100) - into_cycle(SystemTime::now())).await;
    trip(&fleet);
    // One call an instance once the cooldowns are over: the fleet's five
    // probes go, and answer.
    let probe_once = |fleet: &[Arc<LiveLimiters>]| -> usize {
        fleet
            .iter()
            .filter(|live| {
                let payments = live.get("payments").unwrap();
                let Ok(permit) = payments.try_acquire() else {
                    return false;
                };
                assert!(permit.is_probe());
                permit.success();
                true
            })
            .count()
    };
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(
        probe_once(&fleet),
        5,
        "the fleet's allowance in the first cycle"
    );
    // Their breakers closed; the store is told. In the next cycle every
    // other instance is granted its probe, not five of them.
    tokio::time::sleep(cycle - into_cycle(SystemTime::now()) + Duration::from_millis(300)).await;
    assert_eq!(
        probe_once(&fleet),
        15,
        "the rest of the fleet in the next cycle"
    );
    for live in &fleet {
        let gate = live.get("payments").unwrap().gate();
        assert!(!gate.is_shut() && !gate.probe, "every breaker closed");
    }
}
