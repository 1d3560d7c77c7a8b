//! A fleet's store in hostile hands (`rheostat::config::fleet`): whoever
//! can write to Redis, flood its channel or race the operator, and an
//! operator's list every instance would refuse. Each holds with a real
//! `redis-server` (each test starts its own; `scripts/redis.sh` installs
//! it; `.ci/run` runs these with `--features redis`), but the bound on
//! overrides, which needs none.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redis::AsyncCommands as _;
use rheostat::config::fleet::{self, RedisOverrides, RedisProbes};
use rheostat::config::{LiveLimiters, OverrideConfig, OverrideKind, MAX_OVERRIDES};
use rheostat::overrides::Override;

#[path = "support/admin.rs"]
mod admin;
#[path = "support/fleet_server.rs"]
mod fleet_server;

use fleet_server::{file_of, http, Server};

/// The process's recorder (the tasks count on the runtime's threads),
/// installed by the first test to ask; each test reads its own prefix.
fn recorder() -> &'static Snapshotter {
    static RECORDER: OnceLock<Snapshotter> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().unwrap();
        snapshotter
    })
}

/// The total so far of counter `name` for `prefix` with `label` (`None`:
/// every value of it). A snapshot empties the recorder's counters, so
/// every test's are added up here.
fn counted(name: &str, prefix: &str, label: Option<(&str, &str)>) -> u64 {
    type Labels = Vec<(String, String)>;
    static TOTALS: Mutex<BTreeMap<(String, Labels), u64>> = Mutex::new(BTreeMap::new());
    let mut totals = TOTALS.lock().unwrap();
    for (key, _, _, value) in recorder().snapshot().into_vec() {
        if let DebugValue::Counter(n) = value {
            let key = key.key();
            let labels = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            *totals.entry((key.name().to_owned(), labels)).or_default() += n;
        }
    }
    totals
        .iter()
        .filter(|((n, labels), _)| {
            let has = |k: &str, v: &str| labels.iter().any(|(a, b)| a == k && b == v);
            n == name && has("prefix", prefix) && label.is_none_or(|(k, v)| has(k, v))
        })
        .map(|(_, n)| n)
        .sum()
}

/// `payments`, a fixed limit of 8; `orders`, a breaker.
fn config_file(test: &str) -> PathBuf {
    file_of(
        test,
        "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 8\n\n\
         [limiters.orders.policy]\npolicy = \"breaker\"\n",
    )
}

/// One instance following the document under `prefix`, read every
/// `every` besides the messages.
fn instance(path: &Path, url: &str, prefix: &str, every: Duration) -> Arc<LiveLimiters> {
    let live = Arc::new(LiveLimiters::load(path).unwrap());
    let reader = RedisOverrides::new(url, prefix, Arc::clone(&live))
        .unwrap()
        .every(every);
    tokio::spawn(reader.run());
    live
}

fn cap(limiter: &str, cap: u32) -> OverrideConfig {
    OverrideConfig {
        limiter: limiter.into(),
        kind: OverrideKind::Cap,
        cap: Some(cap),
        until: SystemTime::now() + Duration::from_secs(600),
        instances: BTreeMap::new(),
        reason: None,
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

fn overridden(live: &LiveLimiters, name: &str) -> Option<Override> {
    live.get(name).unwrap().overrides().in_force().map(|o| o.0)
}

/// Reads of the document under `prefix`, whatever their result.
fn reads(prefix: &str) -> u64 {
    counted("rheostat_fleet_reads_total", prefix, None)
}

/// This process's resident memory, in MiB.
fn rss_mib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096 / (1 << 20)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_counter_beyond_what_the_allowance_could_reach_is_taken_as_absent_and_counted() {
    recorder();
    let server = Server::start();
    let path = file_of(
        "poisoned",
        "[limiters.payments.policy]\npolicy = \"breaker\"\ncooldown.fixed = \"1s\"\ncooldown_jitter = 0.0\n",
    );
    // Whoever can write to Redis sets this hour's and the next hours'
    // counters far beyond the fleet's 5 probes a cycle.
    let cycle = Duration::from_secs(3600);
    let mut op = operator(&server.url()).await;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / cycle.as_secs();
    for c in now..now + 3 {
        let _: () = op
            .set(
                format!("poisoned:probes:payments:{c}"),
                1_000_000_000_000_u64,
            )
            .await
            .unwrap();
    }
    let fleet: Vec<Arc<LiveLimiters>> = (0..4)
        .map(|_| {
            let live = Arc::new(
                LiveLimiters::options(&path)
                    .each(|b| b.shared_probes())
                    .load()
                    .unwrap(),
            );
            let mut probes =
                RedisProbes::new(&server.url(), "poisoned", Arc::clone(&live)).unwrap();
            probes.allowance.cycle = cycle;
            tokio::spawn(probes.run());
            live
        })
        .collect();
    for live in &fleet {
        let payments = live.get("payments").unwrap();
        for _ in 0..10 {
            if let Ok(permit) = payments.try_acquire() {
                permit.overload();
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(1300)).await;
    // Each instance grants itself its fallback, as without Redis.
    let sent: usize = fleet
        .iter()
        .map(|live| {
            let payments = live.get("payments").unwrap();
            (0..3)
                .filter_map(|_| payments.try_acquire().ok())
                .map(drop)
                .count()
        })
        .sum();
    assert_eq!(sent, 4, "one probe each, as without Redis");
    let implausible = counted(
        "rheostat_fleet_probe_claims_total",
        "poisoned",
        Some(("result", "implausible")),
    );
    assert_eq!(implausible, 4, "each claim counted");
    // The counter was left as it was found.
    let left: u64 = op
        .get(format!("poisoned:probes:payments:{now}"))
        .await
        .unwrap();
    assert_eq!(left, 1_000_000_000_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_messages_costs_a_few_reads_and_leaves_no_backlog() {
    recorder();
    let server = Server::start();
    let path = config_file("flood");
    // Read every 5 s besides the messages: the reads counted are the
    // messages'.
    let live = instance(&path, &server.url(), "flood", Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut op = operator(&server.url()).await;
    // A document of about 250 kB: 500 overrides with long reasons.
    let mut overrides: Vec<OverrideConfig> = (0..500)
        .map(|i| {
            let mut o = cap("payments", 4);
            o.reason = Some(format!("{i}: {}", "x".repeat(480)));
            o
        })
        .collect();
    fleet::publish(&mut op, "flood", overrides.clone())
        .await
        .unwrap();
    until(Duration::from_secs(2), || {
        overridden(&live, "payments") == Some(Override::Cap(4))
    })
    .await;
    let before = reads("flood");
    let rss_before = rss_mib();
    // 20,000 messages, pipelined by the thousand.
    let messages = 20_000;
    let flood_start = Instant::now();
    for _ in 0..messages / 1000 {
        let mut pipe = redis::pipe();
        for i in 0..1000 {
            pipe.publish(fleet::changed_channel("flood"), i).ignore();
        }
        let () = pipe.query_async(&mut op).await.unwrap();
    }
    let flooded = flood_start.elapsed();
    // A real change after the flood reaches the instance at once: nothing
    // queued before it.
    overrides[499].cap = Some(3);
    fleet::publish(&mut op, "flood", overrides).await.unwrap();
    let took = until(Duration::from_secs(2), || {
        overridden(&live, "payments") == Some(Override::Cap(3))
    })
    .await;
    // Whatever the flood left queued would be read meanwhile.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let read = reads("flood") - before;
    eprintln!(
        "{messages} messages in {flooded:?}: {read} reads of a 250 kB document; \
         the next change applied {took:?} after it was published; RSS {rss_before} MiB before, {} MiB after",
        rss_mib()
    );
    // Reads are READ_GAP apart at least: ten a second.
    assert!(read <= 50, "{read} reads for {messages} messages");
    // Bodies of 1 MiB each: dropped unread, memory stays flat.
    let body = vec![b'x'; 1 << 20];
    let rss_before = rss_mib();
    for _ in 0..200 {
        let _: () = op
            .publish(fleet::changed_channel("flood"), &body)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after = rss_mib();
    eprintln!("200 messages of 1 MiB: RSS {rss_before} MiB before, {rss_after} MiB after");
    assert!(
        rss_after < rss_before + 100,
        "{rss_before} MiB before 200 MiB of messages, {rss_after} MiB after"
    );
}

/// The bytes the Redis server has sent to its clients so far.
async fn bytes_sent(op: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(op)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_net_output_bytes:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_over_a_mebibyte_is_refused_before_it_is_fetched() {
    recorder();
    let server = Server::start();
    let path = config_file("large");
    let live = instance(&path, &server.url(), "large", Duration::from_millis(50));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut op = operator(&server.url()).await;
    fleet::publish(&mut op, "large", vec![cap("payments", 2)])
        .await
        .unwrap();
    until(Duration::from_secs(1), || {
        overridden(&live, "payments") == Some(Override::Cap(2))
    })
    .await;
    // 4 MiB of JSON, read every 50 ms.
    let mut big = String::from("{\"version\": 99, \"overrides\": [], \"pad\": \"");
    big.push_str(&"x".repeat(4 << 20));
    big.push_str("\"}");
    let _: () = op.set(fleet::overrides_key("large"), &big).await.unwrap();
    let before = bytes_sent(&mut op).await;
    let refused_before = counted(
        "rheostat_fleet_reads_total",
        "large",
        Some(("result", "too_large")),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = bytes_sent(&mut op).await;
    let refused = counted(
        "rheostat_fleet_reads_total",
        "large",
        Some(("result", "too_large")),
    ) - refused_before;
    eprintln!(
        "a 4 MiB document refused {refused} times in 1 s: {} bytes sent by Redis",
        after - before
    );
    assert!(refused >= 1, "refused and counted");
    assert!(
        after - before < 1 << 20,
        "{} bytes sent: the document was fetched",
        after - before
    );
    assert_eq!(overridden(&live, "payments"), Some(Override::Cap(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_publishers_leave_the_latest_version_and_an_older_document_never_applies() {
    recorder();
    let server = Server::start();
    let path = config_file("race");
    let live = instance(&path, &server.url(), "race", Duration::from_millis(50));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (mut a, mut b) = (operator(&server.url()).await, operator(&server.url()).await);
    let mut op = operator(&server.url()).await;
    // Two publishers, each on its own connection, 200 times at once: the
    // document in the store is always the later version's.
    for round in 0..200_u32 {
        let (va, vb) = tokio::join!(
            fleet::publish(&mut a, "race", vec![cap("payments", 2 * round + 1)]),
            fleet::publish(&mut b, "race", vec![cap("payments", 2 * round + 2)]),
        );
        let latest = va.unwrap().max(vb.unwrap());
        let text: String = op.get(fleet::overrides_key("race")).await.unwrap();
        let stored: fleet::FleetOverrides = serde_json::from_str(&text).unwrap();
        assert_eq!(
            stored.version, latest,
            "round {round}: an older document in the store"
        );
    }
    let text: String = op.get(fleet::overrides_key("race")).await.unwrap();
    let latest: fleet::FleetOverrides = serde_json::from_str(&text).unwrap();
    let want = Some(Override::Cap(latest.overrides[0].cap.unwrap()));
    until(Duration::from_secs(2), || {
        overridden(&live, "payments") == want
    })
    .await;
    // An older document written over it (a publisher from before the
    // script, a lagging writer) is refused, counted, and never applied.
    let older = fleet::FleetOverrides {
        version: latest.version - 1,
        overrides: vec![cap("payments", 7)],
    };
    let _: () = op
        .set(
            fleet::overrides_key("race"),
            serde_json::to_string(&older).unwrap(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        overridden(&live, "payments"),
        want,
        "an older document applied"
    );
    assert!(
        counted(
            "rheostat_fleet_reads_total",
            "race",
            Some(("result", "stale"))
        ) > 0
    );
    // The store loses everything (a restart without persistence, a flush):
    // its version counts from 1 again, and is followed.
    let _: () = redis::cmd("FLUSHALL").query_async(&mut op).await.unwrap();
    let version = fleet::publish(&mut op, "race", vec![cap("payments", 5)])
        .await
        .unwrap();
    assert_eq!(version, 1);
    until(Duration::from_secs(2), || {
        overridden(&live, "payments") == Some(Override::Cap(5))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_redis_error_is_counted_by_kind_and_the_reader_keeps_reading() {
    recorder();
    let server = Server::start();
    let path = config_file("errors");
    let live = instance(&path, &server.url(), "errors", Duration::from_millis(50));
    let mut op = operator(&server.url()).await;
    // The document's key holds a hash, not a string.
    let _: () = op
        .hset(fleet::overrides_key("errors"), "version", 1)
        .await
        .unwrap();
    until(Duration::from_secs(2), || {
        counted(
            "rheostat_fleet_errors_total",
            "errors",
            Some(("kind", "wrong_type")),
        ) >= 2
    })
    .await;
    // The session went on: the next document applies.
    let _: () = op.del(fleet::overrides_key("errors")).await.unwrap();
    fleet::publish(&mut op, "errors", vec![cap("payments", 3)])
        .await
        .unwrap();
    until(Duration::from_secs(2), || {
        overridden(&live, "payments") == Some(Override::Cap(3))
    })
    .await;
    // A probe counter of the wrong type: counted, and the fallback granted.
    let probes_file = file_of(
        "errors-probes",
        "[limiters.payments.policy]\npolicy = \"breaker\"\ncooldown.fixed = \"1s\"\ncooldown_jitter = 0.0\n",
    );
    let breaker = Arc::new(
        LiveLimiters::options(&probes_file)
            .each(|b| b.shared_probes())
            .load()
            .unwrap(),
    );
    let cycle = Duration::from_secs(3600);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / cycle.as_secs();
    for c in now..now + 3 {
        let _: () = op
            .lpush(format!("errors:probes:payments:{c}"), 1)
            .await
            .unwrap();
    }
    let mut probes = RedisProbes::new(&server.url(), "errors", Arc::clone(&breaker)).unwrap();
    probes.allowance.cycle = cycle;
    tokio::spawn(probes.run());
    let payments = breaker.get("payments").unwrap();
    for _ in 0..10 {
        if let Ok(permit) = payments.try_acquire() {
            permit.overload();
        }
    }
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(payments.try_acquire().is_ok(), "the fallback's probe");
    let errors = counted("rheostat_fleet_errors_total", "errors", None);
    let wrong_type = counted(
        "rheostat_fleet_errors_total",
        "errors",
        Some(("kind", "wrong_type")),
    );
    eprintln!("{errors} errors counted, {wrong_type} of the wrong type");
    assert!(wrong_type >= 3, "{wrong_type}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_endpoint_answers_400_with_the_field_to_a_list_every_instance_would_refuse() {
    let server = Server::start();
    let path = config_file("admin");
    let live = instance(&path, &server.url(), "admin", Duration::from_millis(100));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = admin::router(
        Arc::clone(&live),
        redis::Client::open(server.url()).unwrap(),
        "admin",
    );
    tokio::spawn(async move { axum::serve(listener, router).await });
    let until = |secs: u64| {
        humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(secs))
    };
    let one = |o: &str| format!("[{o}]");
    let cases = [
        (
            one(&format!(
                r#"{{"limiter": "billing", "kind": "force_open", "until": "{}"}}"#,
                until(600)
            )),
            "overrides[0].limiter",
        ),
        (
            one(&format!(
                r#"{{"limiter": "payments", "kind": "cap", "cap": 0, "until": "{}"}}"#,
                until(600)
            )),
            "overrides[0].cap",
        ),
        (
            one(&format!(
                r#"{{"limiter": "payments", "kind": "force_closed", "until": "{}"}}"#,
                until(600)
            )),
            "overrides[0].kind",
        ),
        (
            one(&format!(
                r#"{{"limiter": "orders", "kind": "force_open", "until": "{}"}}"#,
                until(30 * 24 * 3600)
            )),
            "overrides[0].until",
        ),
        (
            format!(
                "[{}]",
                vec![
                    format!(
                        r#"{{"limiter": "orders", "kind": "force_open", "until": "{}"}}"#,
                        until(600)
                    );
                    MAX_OVERRIDES + 1
                ]
                .join(",")
            ),
            "overrides",
        ),
    ];
    for (body, field) in cases {
        let (status, answer) = http(addr, "PUT", "/overrides", &body).await;
        assert_eq!(status, 400, "{field}: {answer}");
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["field"], field, "{answer}");
        assert!(
            answer["reason"].as_str().unwrap().contains("expected"),
            "{answer}"
        );
    }
    // Nothing was published.
    let mut op = operator(&server.url()).await;
    let version: Option<u64> = op.get("admin:version").await.unwrap();
    assert_eq!(version, None);
    // And a list every instance takes is.
    let (status, answer) = http(
        addr,
        "PUT",
        "/overrides",
        &one(&format!(
            r#"{{"limiter": "orders", "kind": "force_closed", "until": "{}"}}"#,
            until(600)
        )),
    )
    .await;
    assert_eq!((status, answer.trim()), (200, r#"{"version":1}"#));
    until_applied(&live).await;
}

async fn until_applied(live: &LiveLimiters) {
    until(Duration::from_secs(2), || {
        overridden(live, "orders") == Some(Override::ForceClosed)
    })
    .await;
}

#[test]
fn a_fleet_document_beyond_the_bound_is_refused_by_name_and_the_overrides_in_force_stay() {
    let path = config_file("bound");
    let live = LiveLimiters::load(&path).unwrap();
    let now = SystemTime::now();
    live.set_fleet_overrides(vec![cap("payments", 2)], now)
        .unwrap();
    let e = live
        .set_fleet_overrides(vec![cap("payments", 3); MAX_OVERRIDES + 1], now)
        .unwrap_err();
    assert_eq!(e.field(), "overrides");
    assert_eq!(e.found(), "1001 overrides");
    assert!(e.allowed().starts_with("at most 1000 overrides"), "{e}");
    assert_eq!(overridden(&live, "payments"), Some(Override::Cap(2)));
    // At the bound, taken.
    live.set_fleet_overrides(vec![cap("payments", 3); MAX_OVERRIDES], now)
        .unwrap();
    assert_eq!(overridden(&live, "payments"), Some(Override::Cap(3)));
    // A file's `[[overrides]]` are bounded alike, with the line.
    let until = humantime::format_rfc3339_seconds(now + Duration::from_secs(600));
    let one = format!(
        "[[overrides]]\nlimiter = \"payments\"\nkind = \"force_open\"\nuntil = \"{until}\"\n"
    );
    let text = format!(
        "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 8\n\n{}",
        one.repeat(MAX_OVERRIDES + 1)
    );
    let e = LiveLimiters::load(file_of("bound-file", &text)).unwrap_err();
    assert_eq!((e.field(), e.line()), ("overrides", Some(5)), "{e}");
    assert!(e.reason().contains("at most 1000 overrides"), "{e}");
}

#[test]
fn a_document_at_the_bound_with_one_override_changed_costs_little_and_the_lock_is_held_briefly() {
    // A breaker whose window is a thousand buckets: a policy that costs
    // something to build.
    let path = file_of(
        "proportion",
        "[limiters.orders.policy]\npolicy = \"breaker\"\nwindow.time = { length = \"60s\", buckets = 1000 }\n",
    );
    let live = Arc::new(LiveLimiters::load(&path).unwrap());
    let now = SystemTime::now();
    // A thousand holds of the breaker closed: each is checked against a
    // policy that has a breaker, built once to find out.
    let document = |end: u64| -> Vec<OverrideConfig> {
        (0..MAX_OVERRIDES)
            .map(|i| OverrideConfig {
                limiter: "orders".into(),
                kind: OverrideKind::ForceClosed,
                cap: None,
                until: now + Duration::from_secs(600 + end),
                instances: BTreeMap::new(),
                reason: Some(format!("{i}")),
            })
            .collect()
    };
    // The best of several runs: the machine's load adds, never takes away.
    let best = |f: &dyn Fn()| -> Duration {
        (0..7)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .min()
            .unwrap()
    };
    let whole = best(&|| {
        live.set_fleet_overrides(document(1), now).unwrap();
        live.set_fleet_overrides(document(0), now).unwrap();
    }) / 2;
    let one_changed = best(&|| {
        let mut next = document(0);
        next[MAX_OVERRIDES - 1].until += Duration::from_secs(1);
        live.set_fleet_overrides(next, now).unwrap();
        live.set_fleet_overrides(document(0), now).unwrap();
    }) / 2;
    // While documents at the bound are checked, the limiters are looked up
    // without waiting long.
    let reader = {
        let live = Arc::clone(&live);
        std::thread::spawn(move || {
            let mut worst = Duration::ZERO;
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(200) {
                let asked = Instant::now();
                let _ = live.get("orders");
                worst = worst.max(asked.elapsed());
            }
            worst
        })
    };
    for end in 0..20 {
        live.set_fleet_overrides(document(end), now).unwrap();
    }
    let worst = reader.join().unwrap();
    eprintln!(
        "a document of {MAX_OVERRIDES} forced-closed overrides: {whole:?} a set with every one changed, \
         {one_changed:?} with one changed; a lookup waited at most {worst:?} meanwhile"
    );
    assert!(
        whole < Duration::from_millis(10),
        "a set with every override changed cost {whole:?}"
    );
    assert!(
        one_changed < Duration::from_millis(5),
        "a set with one override changed cost {one_changed:?}"
    );
    assert_eq!(overridden(&live, "orders"), Some(Override::ForceClosed));
}
