//! Request classes in scenarios (`[traffic] classes`), the rows whose
//! limiters have priorities, and callers that wait in the limiter's queue
//! (`[traffic] wait`).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat::limiter::QueueOrder;
use rheostat_sim::{compare, rows, ClassReport, Row, Scenario, ScenarioReport, Wait};

fn scenario(text: &str) -> Scenario {
    Scenario::from_toml("test", text).unwrap()
}

fn run(sc: Scenario, kinds: &[Row]) -> ScenarioReport {
    let (mut report, _) = compare(&[sc], kinds, 1, |_| {}).unwrap();
    report.scenarios.remove(0)
}

fn classes<'a>(s: &'a ScenarioReport, kind: &Row) -> &'a [ClassReport] {
    s.policy(kind.name()).unwrap().classes.as_deref().unwrap()
}

/// A dependency with room for all: 40 workers of 50 ms serve 800 calls/s.
const ROOMY: &str = r#"
    name = "roomy"
    duration = "2m"
    [dependency]
    workers = 40
    service = { median = "50ms", p99 = "100ms" }
    [traffic]
    rate = 200
    timeout = "1s"
    deadline = "1s"
    classes = [
        { priority = "critical_plus", share = 0.1 },
        { priority = "critical", share = 0.3 },
        { priority = "sheddable", share = 0.6 },
    ]
"#;

#[test]
fn each_arrival_draws_its_class_by_the_shares() {
    let s = run(scenario(ROOMY), &[rows::none()]);
    let none = s.policy("none").unwrap();
    let c = classes(&s, &rows::none());
    assert_eq!(c.len(), 3);
    assert_eq!(c.iter().map(|c| c.offered).sum::<u64>(), none.offered);
    // About 24 000 arrivals: each share within a point of its own.
    for (class, share) in c.iter().zip([0.1, 0.3, 0.6]) {
        let drawn = class.offered as f64 / none.offered as f64;
        assert!((drawn - share).abs() < 0.01, "{} {drawn}", class.priority);
        assert_eq!(class.share, share);
    }
    assert_eq!(
        c.iter().map(|c| c.priority.as_str()).collect::<Vec<_>>(),
        ["critical_plus", "critical", "sheddable"]
    );
    // Room for all: nothing refused, every class served but the calls
    // still in flight when the run ends.
    let s = run(scenario(ROOMY), &[rows::gradient_priorities()]);
    for class in classes(&s, &rows::gradient_priorities()) {
        assert!(class.served.unwrap() >= 0.998, "{}", s.table());
        assert_eq!(class.rejected, 0);
    }
}

#[test]
fn classes_leave_every_other_draw_of_a_run_alone() {
    // The same scenario without classes runs the same arrivals and the
    // same service times: the class draw has a stream of its own.
    let with = run(scenario(ROOMY), &[rows::aimd()]);
    let text = ROOMY.split("    classes").next().unwrap();
    let without = run(scenario(text), &[rows::aimd()]);
    let (a, b) = (
        with.policy("aimd").unwrap(),
        without.policy("aimd").unwrap(),
    );
    assert_eq!(a.offered, b.offered);
    assert_eq!(a.successes, b.successes);
    assert_eq!(a.latency_ms.unwrap().p99, b.latency_ms.unwrap().p99);
    assert!(b.classes.is_none());
    // The rows with priorities run only where the traffic has classes.
    let s = run(scenario(text), &[rows::aimd(), rows::aimd_priorities()]);
    assert_eq!(s.policies.len(), 1);
}

#[test]
fn a_class_list_must_have_shares_summing_to_one_and_each_priority_once() {
    let base = "name = \"x\"\nduration = \"1m\"\n[dependency]\nworkers = 4\nservice = { median = \"10ms\", p99 = \"20ms\" }\n[traffic]\nrate = 1\ntimeout = \"1s\"\ndeadline = \"1s\"\n";
    let e = Scenario::from_toml(
        "bad.toml",
        &format!("{base}classes = [{{ priority = \"critical\", share = 0.3 }}, {{ priority = \"sheddable\", share = 0.6 }}]\n"),
    )
    .unwrap_err();
    assert_eq!(e.field(), "traffic.classes", "{e}");
    assert!(e.reason().contains("summing to"), "{e}");
    let e = Scenario::from_toml(
        "bad.toml",
        &format!("{base}classes = [{{ priority = \"critical\", share = 0.5 }}, {{ priority = \"critical\", share = 0.5 }}]\n"),
    )
    .unwrap_err();
    assert_eq!(e.field(), "traffic.classes[1].priority", "{e}");
    let e = Scenario::from_toml(
        "bad.toml",
        &format!("{base}classes = [{{ priority = \"urgent\", share = 1.0 }}]\n"),
    )
    .unwrap_err();
    assert!(e.field().starts_with("traffic.classes"), "{e}");
    let e = Scenario::from_toml(
        "bad.toml",
        &format!("{base}wait = {{ order = \"lifo\", max_wait = \"0s\" }}\n"),
    )
    .unwrap_err();
    assert_eq!(e.field(), "traffic.wait.max_wait", "{e}");
}

/// A short brownout, 30% critical and 70% sheddable: 18 workers of 500 ms
/// serve 36 calls/s of the 50 offered.
const MIXED: &str = r#"
    name = "mixed"
    duration = "4m"
    measure = { from = "1m", to = "4m" }
    [dependency]
    workers = 30
    service = { median = "500ms", p99 = "1s" }
    queue = 200
    [[dependency.phase]]
    at = "1m"
    workers = 18
    [traffic]
    rate = 50
    timeout = "3s"
    deadline = "6s"
    attempts = 2
    backoff = "100ms"
    retry_budget = 1.0
    classes = [
        { priority = "critical", share = 0.3 },
        { priority = "sheddable", share = 0.7 },
    ]
"#;

#[test]
fn with_priorities_the_critical_class_keeps_more_of_its_load() {
    let kinds = [
        rows::aimd(),
        rows::gradient(),
        rows::aimd_priorities(),
        rows::gradient_priorities(),
    ];
    let s = run(scenario(MIXED), &kinds);
    let served = |kind: Row| {
        let c = classes(&s, &kind);
        (c[0].served.unwrap(), c[1].served.unwrap())
    };
    for (without, with) in [
        (rows::aimd(), rows::aimd_priorities()),
        (rows::gradient(), rows::gradient_priorities()),
    ] {
        let (critical, sheddable) = served(without);
        // Without priorities, both lose alike.
        assert!((critical - sheddable).abs() < 0.05, "{}", s.table());
        let (critical_with, sheddable_with) = served(with);
        assert!(critical_with >= critical, "{}", s.table());
        assert!(critical_with > sheddable_with, "{}", s.table());
    }
}

#[test]
fn the_shipped_mixed_scenario_gives_the_critical_class_more_with_priorities() {
    let mixed = Scenario::builtin()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "mixed-criticality")
        .unwrap();
    let s = run(mixed, &[rows::gradient(), rows::gradient_priorities()]);
    let critical = |kind: Row| classes(&s, &kind)[0].served.unwrap();
    assert!(
        critical(rows::gradient_priorities()) >= critical(rows::gradient()),
        "{}",
        s.table()
    );
}

/// Overload on a fixed limit of 10: 10 workers of 100 ms serve 100 calls/s
/// of the 150 offered.
const QUEUED: &str = r#"
    name = "queued"
    duration = "2m"
    measure = { from = "30s", to = "2m" }
    [dependency]
    workers = 10
    service = { median = "100ms", p99 = "101ms" }
    [traffic]
    rate = 150
    timeout = "2s"
    deadline = "2s"
    pool = 100000
    healthy = { rate = 0 }
    [policies.bulkhead]
    policy = "fixed"
    limit = 10
"#;

#[test]
fn callers_wait_in_the_limiters_queue_and_lifo_keeps_the_median_low() {
    let with = |order: Option<QueueOrder>| {
        let mut sc = scenario(QUEUED);
        sc.traffic.as_mut().unwrap().wait = order.map(|order| Wait {
            order,
            max_waiters: 1024,
            max_wait: None,
        });
        let s = run(sc, &[rows::bulkhead()]);
        s.policy("bulkhead").unwrap().clone()
    };
    let fail_fast = with(None);
    let fifo = with(Some(QueueOrder::Fifo));
    let lifo = with(Some(QueueOrder::Lifo));
    // Failing fast, a slot stays idle from its release to the next
    // arrival; a waiter takes it at once.
    assert!(fifo.goodput > fail_fast.goodput, "{fifo:?}\n{fail_fast:?}");
    assert!(lifo.goodput >= 0.97 * 100.0, "{lifo:?}");
    // Under sustained overload a FIFO queue serves the oldest waiter, near
    // its deadline; LIFO serves the newest, and the oldest give up.
    let (fifo_p50, lifo_p50) = (fifo.latency_ms.unwrap().p50, lifo.latency_ms.unwrap().p50);
    assert!(fifo_p50 > 1000.0, "{fifo_p50}");
    assert!(lifo_p50 < 250.0, "{lifo_p50}");
    // Giving up in the queue is a refusal.
    assert!(
        lifo.rejected > 0 && lifo.rejected == lifo.failed,
        "{lifo:?}"
    );
}

#[test]
fn a_reference_span_gives_each_row_its_median_against_the_healthy_one() {
    let text = r#"
        name = "halved"
        duration = "3m"
        measure = { from = "1m", to = "3m" }
        latency_reference = { from = "0s", to = "1m" }
        [dependency]
        workers = 20
        service = { median = "100ms", p99 = "300ms" }
        queue = 1000
        [[dependency.phase]]
        at = "1m"
        workers = 10
        [traffic]
        rate = 120
        timeout = "2s"
        deadline = "2s"
        pool = 100000
        healthy = { rate = 0 }
    "#;
    let s = run(scenario(text), &[rows::none(), rows::gradient()]);
    let none = s.policy("none").unwrap();
    let reference = none.latency_reference.unwrap();
    // Healthy, the median is the service's.
    assert!(
        (reference.p50_ms.unwrap() - 100.0).abs() < 10.0,
        "{reference:?}"
    );
    // Halved and unprotected, the queue grows to the clients' patience.
    assert!(reference.p50_ratio.unwrap() > 5.0, "{}", s.table());
    let gradient = s.policy("gradient").unwrap();
    assert!(
        gradient.latency_reference.unwrap().p50_ratio.unwrap() < 2.0,
        "{}",
        s.table()
    );
    assert!(s.table().contains("healthy reference span"));
}
