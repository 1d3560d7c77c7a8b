//! A stack of policies behaves as one: the meet of their gates, every event
//! to every member, and a refusal that names the member responsible.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use rheostat_algorithms::{
    Aimd, AimdConfig, Algorithm, BreakerState, Fixed, Gate, Outcome, Published, Refusal, Sample,
    Snapshot, Stack, Throttle, ThrottleConfig, Transition, MAX_LIMIT,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn overload() -> Sample {
    Sample::new(Outcome::Overload, ms(10), 1)
}

fn throttle() -> Throttle {
    Throttle::new(ThrottleConfig {
        min_requests: 0,
        ..ThrottleConfig::default()
    })
    .expect("valid config")
}

/// A policy that publishes whatever gate it is given and writes down every
/// event it sees.
struct Scripted {
    name: &'static str,
    gate: Gate,
    admits: VecDeque<bool>,
    transitions: VecDeque<Transition>,
    state: Option<BreakerState>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    fn new(name: &'static str, gate: Gate, log: &Arc<Mutex<Vec<String>>>) -> Self {
        Scripted {
            name,
            gate,
            admits: VecDeque::new(),
            transitions: VecDeque::new(),
            state: None,
            log: Arc::clone(log),
        }
    }

    fn write(&self, line: String) {
        self.log.lock().expect("log lock").push(line);
    }
}

impl Algorithm for Scripted {
    fn name(&self) -> &'static str {
        self.name
    }

    fn publish(&self) -> Published {
        Published::new(self.gate)
    }

    fn on_sample(&mut self, _now: Instant, sample: &Sample) {
        self.write(format!("{} sample {:?}", self.name, sample.outcome));
    }

    fn on_admit(&mut self, _now: Instant) -> bool {
        let yes = self.admits.pop_front().unwrap_or(true);
        self.write(format!("{} admit {yes}", self.name));
        yes
    }

    fn on_rejected(&mut self, _now: Instant, count: u64) {
        self.write(format!("{} rejected {count}", self.name));
    }

    fn handle_timeout(&mut self, _now: Instant) {
        self.write(format!("{} timeout", self.name));
    }

    fn snapshot(&self) -> Snapshot {
        let s = Snapshot::new(self.name, self.gate);
        match self.state {
            Some(state) => s.with_state(state),
            None => s,
        }
    }

    fn poll_transition(&mut self) -> Option<Transition> {
        self.transitions.pop_front()
    }
}

fn log() -> Arc<Mutex<Vec<String>>> {
    Arc::new(Mutex::new(Vec::new()))
}

fn lines(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    std::mem::take(&mut *log.lock().expect("log lock"))
}

fn probe_gate(limit: u32) -> Gate {
    Gate {
        probe: true,
        ..Gate::limited(limit)
    }
}

#[test]
fn a_fixed_10_and_a_throttle_admit_10_and_the_throttle_answers_for_its_rejections() {
    let t0 = Instant::now();
    let mut stack = Stack::builder()
        .push(Fixed::new(10).expect("valid"))
        .push(throttle())
        .build()
        .expect("valid stack");
    assert_eq!(stack.members(), ["fixed", "throttle"]);
    assert_eq!(stack.publish().gate, Gate::limited(10));

    for i in 0..50 {
        stack.on_sample(t0 + ms(i), &overload());
    }
    let throttle_gate = stack.member(1).expect("member 1").publish().gate;
    assert!(throttle_gate.admit_probability < 1.0);

    let gate = stack.publish().gate;
    assert_eq!(gate.limit, 10);
    assert_eq!(gate.admit_probability, throttle_gate.admit_probability);
    assert_eq!(gate.until, throttle_gate.until);
    assert!(!gate.probe);
    assert_eq!(stack.publish().refusers.get(Refusal::Throttle), 1);
    assert_eq!(stack.publish().refusers.get(Refusal::Limit), 0);
}

#[test]
fn an_empty_stack_is_a_config_error_naming_its_members() {
    let err = Stack::new(Vec::new()).expect_err("empty");
    assert_eq!(err.field(), "stack.members");
    let err = Stack::builder().build().expect_err("empty");
    assert_eq!(err.field(), "stack.members");
}

#[test]
fn the_gate_is_the_meet_of_the_members_gates() {
    let t0 = Instant::now();
    let log = log();
    let a = Scripted::new(
        "a",
        Gate {
            limit: 7,
            admit_probability: 0.5,
            probe: false,
            until: Some(t0 + ms(300)),
        },
        &log,
    );
    let b = Scripted::new(
        "b",
        Gate {
            limit: 3,
            admit_probability: 0.4,
            probe: true,
            until: Some(t0 + ms(100)),
        },
        &log,
    );
    let stack = Stack::builder().push(a).push(b).build().expect("valid");
    let gate = stack.publish().gate;
    assert_eq!(gate.limit, 3);
    assert!((gate.admit_probability - 0.2).abs() < 1e-12);
    assert!(gate.probe);
    assert_eq!(gate.until, Some(t0 + ms(100)));
    assert_eq!(stack.publish().wake_at, Some(t0 + ms(100)));
}

#[test]
fn samples_rejections_and_timeouts_reach_every_member_in_order() {
    let t0 = Instant::now();
    let log = log();
    let mut stack = Stack::builder()
        .push(Scripted::new("a", Gate::unlimited(), &log))
        .push(Scripted::new("b", Gate::unlimited(), &log))
        .build()
        .expect("valid");
    stack.on_sample(t0, &overload());
    stack.on_rejected(t0, 4);
    stack.handle_timeout(t0);
    assert_eq!(
        lines(&log),
        [
            "a sample Overload",
            "b sample Overload",
            "a rejected 4",
            "b rejected 4",
            "a timeout",
            "b timeout"
        ]
    );
}

#[test]
fn only_probing_members_are_asked_and_the_first_refusal_stops_the_asking() {
    let t0 = Instant::now();
    let log = log();
    let mut a = Scripted::new("a", probe_gate(5), &log);
    a.admits = VecDeque::from([true, true]);
    let plain = Scripted::new("plain", Gate::unlimited(), &log);
    let mut b = Scripted::new("b", probe_gate(5), &log);
    b.admits = VecDeque::from([false, true]);
    let mut c = Scripted::new("c", probe_gate(5), &log);
    c.admits = VecDeque::from([true]);
    let mut stack = Stack::builder()
        .push(a)
        .push(plain)
        .push(b)
        .push(c)
        .build()
        .expect("valid");

    assert!(!stack.on_admit(t0));
    assert_eq!(lines(&log), ["a admit true", "b admit false"]);
    assert_eq!(stack.publish().refusers.get(Refusal::Probe), 2);

    assert!(stack.on_admit(t0));
    assert_eq!(
        lines(&log),
        ["a admit true", "b admit true", "c admit true"]
    );
    // No refusal last time: the first probing member answers for probes.
    assert_eq!(stack.publish().refusers.get(Refusal::Probe), 0);
}

#[test]
fn a_shut_gate_is_blamed_on_the_first_shut_member() {
    let log = log();
    let stack = Stack::builder()
        .push(Scripted::new("open", Gate::limited(4), &log))
        .push(Scripted::new("shut", Gate::shut(None), &log))
        .push(Scripted::new("also shut", Gate::shut(None), &log))
        .build()
        .expect("valid");
    assert!(stack.publish().gate.is_shut());
    assert_eq!(stack.publish().refusers.get(Refusal::Shut), 1);
    assert_eq!(stack.publish().refusers.get(Refusal::Limit), 1);
}

#[test]
fn nested_stacks_flatten_and_name_their_own_members() {
    let t0 = Instant::now();
    let inner = Stack::builder()
        .push(Fixed::new(3).expect("valid"))
        .push(throttle())
        .build()
        .expect("valid");
    let mut outer = Stack::builder()
        .push(Fixed::new(5).expect("valid"))
        .push(inner)
        .push(Fixed::new(9).expect("valid"))
        .build()
        .expect("valid");
    assert_eq!(outer.members(), ["fixed", "fixed", "throttle", "fixed"]);
    assert_eq!(outer.len(), 3);
    assert_eq!(outer.publish().gate.limit, 3);
    assert_eq!(outer.publish().refusers.get(Refusal::Limit), 1);

    outer.on_sample(t0, &overload());
    assert!(outer.publish().gate.admit_probability < 1.0);
    assert_eq!(outer.publish().refusers.get(Refusal::Throttle), 2);
}

#[test]
fn transitions_are_drained_member_by_member_in_order() {
    let t0 = Instant::now();
    let log = log();
    let transition =
        |policy, to| Transition::new(t0, policy, BreakerState::Closed, to, 0.5, 0.0, 100);
    let mut a = Scripted::new("a", Gate::unlimited(), &log);
    a.transitions = VecDeque::from([
        transition("a", BreakerState::Open),
        transition("a", BreakerState::HalfOpen),
    ]);
    let mut b = Scripted::new("b", Gate::unlimited(), &log);
    b.transitions = VecDeque::from([transition("b", BreakerState::Open)]);
    let mut stack = Stack::builder().push(a).push(b).build().expect("valid");
    let drained: Vec<_> = std::iter::from_fn(|| stack.poll_transition())
        .map(|t| (t.policy, t.to))
        .collect();
    assert_eq!(
        drained,
        [
            ("a", BreakerState::Open),
            ("a", BreakerState::HalfOpen),
            ("b", BreakerState::Open)
        ]
    );
}

#[test]
fn the_snapshot_carries_a_members_state_and_the_binding_limit() {
    let log = log();
    let mut breaker = Scripted::new("breaker", Gate::unlimited(), &log);
    breaker.state = Some(BreakerState::HalfOpen);
    let stack = Stack::builder()
        .push(breaker)
        .push(
            Aimd::new(AimdConfig {
                initial: 20,
                ..AimdConfig::default()
            })
            .expect("valid"),
        )
        .push(Fixed::new(100).expect("valid"))
        .build()
        .expect("valid");
    let snapshot = stack.snapshot();
    assert_eq!(snapshot.policy, "stack");
    assert_eq!(snapshot.gate, stack.publish().gate);
    assert_eq!(snapshot.state, Some(BreakerState::HalfOpen));
    assert_eq!(snapshot.raw_limit, Some(20.0));
}

#[test]
fn a_stack_can_be_driven_through_a_box() {
    let stack: Box<dyn Algorithm> = Box::new(
        Stack::new(vec![
            Box::new(Fixed::new(2).expect("valid")),
            Box::new(throttle()),
        ])
        .expect("valid"),
    );
    assert_eq!(stack.name(), "stack");
    assert_eq!(stack.members(), ["fixed", "throttle"]);
    assert_eq!(stack.publish().gate.limit, 2);
}

// ---- property test -----------------------------------------------------

#[derive(Clone, Debug)]
enum Member {
    Fixed(u32),
    Throttle(f64, f64),
    Weird(u32, f64, bool),
    Nested(Vec<Member>),
}

fn leaf() -> impl Strategy<Value = Member> {
    prop_oneof![
        (1..=MAX_LIMIT).prop_map(Member::Fixed),
        (1.0..=3.0f64, 0.0..1.0f64).prop_map(|(k, cap)| Member::Throttle(k, cap)),
        (
            any::<u32>(),
            prop_oneof![
                Just(f64::NAN),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
                Just(-0.5),
                Just(2.0),
                0.0..=1.0f64
            ],
            any::<bool>()
        )
            .prop_map(|(l, p, probe)| Member::Weird(l, p, probe)),
    ]
}

fn member() -> impl Strategy<Value = Member> {
    leaf().prop_recursive(2, 12, 4, |inner| {
        prop::collection::vec(inner, 1..4).prop_map(Member::Nested)
    })
}

fn build(member: &Member, log: &Arc<Mutex<Vec<String>>>) -> Box<dyn Algorithm> {
    match member {
        Member::Fixed(n) => Box::new(Fixed::new(*n).expect("strategy keeps limits valid")),
        Member::Throttle(k, cap) => Box::new(
            Throttle::new(ThrottleConfig {
                k: *k,
                max_reject_probability: *cap,
                min_requests: 0,
                ..ThrottleConfig::default()
            })
            .expect("strategy keeps configs valid"),
        ),
        Member::Weird(limit, p, probe) => Box::new(Scripted::new(
            "weird",
            Gate {
                limit: *limit,
                admit_probability: *p,
                probe: *probe,
                until: None,
            },
            log,
        )),
        Member::Nested(members) => Box::new(
            Stack::new(members.iter().map(|m| build(m, log)).collect()).expect("non-empty"),
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::with_cases(256)
    })]

    #[test]
    fn no_stack_gate_is_ever_nan_and_every_refusal_names_a_member(
        members in prop::collection::vec(member(), 1..5),
        events in prop::collection::vec((any::<bool>(), 0..500u64, 0..20u64), 0..50),
    ) {
        let log = log();
        let mut stack = Stack::new(members.iter().map(|m| build(m, &log)).collect())
            .expect("non-empty");
        let names = stack.members();
        let t0 = Instant::now();
        let mut now = t0;
        for (fail, dt, rejected) in events {
            now += ms(dt);
            let outcome = if fail { Outcome::Overload } else { Outcome::Success };
            stack.on_sample(now, &Sample::new(outcome, ms(5), 1));
            stack.on_rejected(now, rejected);
            if stack.publish().gate.probe {
                let _ = stack.on_admit(now);
            }
            stack.handle_timeout(now);

            let gate = stack.publish().gate;
            prop_assert!(!gate.admit_probability.is_nan());
            prop_assert!((0.0..=1.0).contains(&gate.admit_probability));
            prop_assert!(gate.limit <= MAX_LIMIT);
            prop_assert_eq!(stack.members(), names.clone());
            for refusal in [Refusal::Shut, Refusal::Limit, Refusal::Throttle, Refusal::Probe] {
                prop_assert!(stack.publish().refusers.get(refusal) < names.len());
            }
            let snapshot = stack.snapshot();
            prop_assert!(!snapshot.gate.admit_probability.is_nan());
        }
    }
}

// ---- the stack's hints cover every member's ------------------------------

#[derive(Clone, Debug)]
enum Policy {
    Fixed(u32),
    Throttle,
    AimdNetflix(u32),
    AimdLatency,
    BreakerCount(u32),
    /// A time window of this many one-second buckets or of half-second
    /// ones (`false`).
    BreakerTime(u32, bool),
    Vegas,
    Gradient,
    Nested(Vec<Policy>),
}

fn policy() -> impl Strategy<Value = Policy> {
    let leaf = prop_oneof![
        (1..100u32).prop_map(Policy::Fixed),
        Just(Policy::Throttle),
        (20..=200u32).prop_map(Policy::AimdNetflix),
        Just(Policy::AimdLatency),
        (1..20u32).prop_map(Policy::BreakerCount),
        (1..20u32, any::<bool>()).prop_map(|(n, whole)| Policy::BreakerTime(n, whole)),
        Just(Policy::Vegas),
        Just(Policy::Gradient),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop::collection::vec(inner, 1..4).prop_map(Policy::Nested)
    })
}

fn build_policy(policy: &Policy) -> Box<dyn Algorithm> {
    use rheostat_algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow};
    use rheostat_algorithms::{Gradient, GradientConfig, Vegas, VegasConfig};
    match policy {
        Policy::Fixed(n) => Box::new(Fixed::new(*n).expect("valid")),
        Policy::Throttle => Box::new(throttle()),
        Policy::AimdNetflix(initial) => Box::new(
            Aimd::new(AimdConfig {
                initial: *initial,
                ..AimdConfig::netflix()
            })
            .expect("valid"),
        ),
        Policy::AimdLatency => Box::new(Aimd::new(AimdConfig::default()).expect("valid")),
        Policy::BreakerCount(calls) => Box::new(
            Breaker::new(BreakerConfig {
                window: BreakerWindow::Count { calls: *calls },
                min_calls: 1,
                ..BreakerConfig::default()
            })
            .expect("valid"),
        ),
        Policy::BreakerTime(buckets, whole) => Box::new(
            Breaker::new(BreakerConfig {
                window: BreakerWindow::Time {
                    length: ms(u64::from(*buckets) * if *whole { 1_000 } else { 500 }),
                    buckets: *buckets,
                },
                ..BreakerConfig::default()
            })
            .expect("valid"),
        ),
        Policy::Vegas => Box::new(Vegas::new(VegasConfig::default()).expect("valid")),
        Policy::Gradient => Box::new(Gradient::new(GradientConfig::default()).expect("valid")),
        Policy::Nested(members) => {
            Box::new(Stack::new(members.iter().map(build_policy).collect()).expect("non-empty"))
        }
    }
}

#[derive(Clone, Debug)]
enum Event {
    /// A call finished: overload or not, its latency and in-flight count
    /// (ms, calls), and whether it was a probe.
    Sample(bool, u64, u32, bool),
    /// Successes counted in a batch.
    Successes(u64),
    /// Time passes (ms), and the stack handles what is due.
    Wait(u64),
    /// A probe is admitted, if the gate probes.
    Admit,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (any::<bool>(), 0..3_000u64, 1..60u32, any::<bool>())
            .prop_map(|(fail, ms, n, probe)| Event::Sample(fail, ms, n, probe)),
        1 => (1..50u64).prop_map(Event::Successes),
        2 => (0..20_000u64).prop_map(Event::Wait),
        1 => Just(Event::Admit),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::with_cases(256)
    })]

    /// Whatever the members and whatever happens, the stack never claims
    /// less than a member needs: as much feedback, no success held for the
    /// stack that is not for every member, and a wake-up no later than any
    /// member's.
    #[test]
    fn a_stacks_hints_never_claim_less_than_a_member_needs(
        members in prop::collection::vec(policy(), 1..5),
        events in prop::collection::vec(event(), 0..80),
    ) {
        let mut stack = Stack::new(members.iter().map(build_policy).collect())
            .expect("non-empty");
        let mut now = Instant::now();
        for event in events {
            match event {
                Event::Sample(fail, latency, in_flight, probe) => {
                    let outcome = if fail { Outcome::Overload } else { Outcome::Success };
                    let sample = Sample::new(outcome, ms(latency), in_flight).with_probe(probe);
                    stack.on_sample(now, &sample);
                }
                Event::Successes(count) => {
                    // Only while the stack lets untimed successes be held, as
                    // the runtime counts them.
                    let hints = stack.publish().hints;
                    let untimed = Sample::new(Outcome::Success, Duration::ZERO, 1);
                    let allowed = hints.feedback != rheostat_algorithms::Feedback::Timed
                        && hints.deferral.is_some_and(|d| d.covers(now, &untimed));
                    if allowed {
                        stack.on_successes(now, count);
                    }
                }
                Event::Wait(dt) => {
                    now += ms(dt);
                    if stack.publish().wake_at.is_some_and(|t| t <= now) {
                        stack.handle_timeout(now);
                    }
                }
                Event::Admit => {
                    if stack.publish().gate.probe {
                        let _ = stack.on_admit(now);
                    }
                }
            }
            let published = stack.publish();
            for i in 0..stack.len() {
                let member = stack.member(i).expect("in range").publish();
                prop_assert!(
                    published.hints.covers(&member.hints),
                    "the stack's {:?} claims less than member {} needs: {:?}",
                    published.hints, i, member.hints
                );
                if let Some(due) = member.wake_at {
                    prop_assert!(published.wake_at.is_some_and(|t| t <= due));
                }
                prop_assert!(published.gate.limit <= member.gate.sanitized().limit);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::with_cases(256)
    })]

    /// A success a policy lets the runtime hold (its
    /// [`Deferral`](rheostat_algorithms::Deferral)) changes nothing the
    /// policy publishes: the runtime may hand it over later, and the
    /// limiter admits and refuses meanwhile as if it had been told at once.
    #[test]
    fn a_held_success_changes_nothing_the_policy_publishes(
        members in prop::collection::vec(policy(), 1..4),
        events in prop::collection::vec(event(), 0..120),
    ) {
        let mut stack = Stack::new(members.iter().map(build_policy).collect())
            .expect("non-empty");
        let mut now = Instant::now();
        let mut held = 0;
        for event in events {
            match event {
                Event::Sample(fail, latency, in_flight, probe) => {
                    let outcome = if fail { Outcome::Overload } else { Outcome::Success };
                    let sample = Sample::new(outcome, ms(latency), in_flight).with_probe(probe);
                    let before = stack.publish();
                    let deferred = before
                        .hints
                        .deferral
                        .is_some_and(|d| d.covers(now, &sample));
                    stack.on_sample(now, &sample);
                    if deferred {
                        held += 1;
                        prop_assert_eq!(stack.publish(), before, "after held success {}", held);
                        prop_assert!(stack.poll_transition().is_none(), "a transition");
                    }
                }
                Event::Successes(_) => {}
                Event::Wait(dt) => {
                    // Calls finish close together, mostly.
                    now += ms(dt / 100);
                    if stack.publish().wake_at.is_some_and(|t| t <= now) {
                        stack.handle_timeout(now);
                    }
                }
                Event::Admit => {
                    if stack.publish().gate.probe {
                        let _ = stack.on_admit(now);
                    }
                }
            }
        }
    }
}
