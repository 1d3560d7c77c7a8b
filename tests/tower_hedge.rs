//! Hedged requests through the retrying tower layer
//! (`RheostatLayer::retry` under a limiter whose retry policy hedges): the
//! first answer wins, the loser teaches nothing, and a hedge is sent only
//! for a request that may be sent twice, with a free slot, while the
//! policy sees no congestion. In paused time, against in-process services
//! whose attempts answer as scripted, so the timings are exact.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rheostat::algorithms::{Algorithm, Fixed, Gate, Published, Sample};
use rheostat::retry::{Backoff, Hedge, HedgeOutcome, RetryConfig, RetryOutcome};
use rheostat::tower::{
    ClassifyFn, HttpClassifier, Idempotent, IdempotentOnly, RheostatLayer, RheostatRetry,
};
use rheostat::{clock::TokioClock, Limiter, Observer, Outcome};
use tower::{service_fn, Layer, Service, ServiceExt};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ----- the limiter ------------------------------------------------------------

/// Every hedge outcome, retry decision and outcome the policy was told.
#[derive(Default)]
struct Seen {
    hedges: Mutex<Vec<HedgeOutcome>>,
    retries: Mutex<Vec<RetryOutcome>>,
    finished: Mutex<Vec<Outcome>>,
}

impl Observer for Seen {
    fn hedge(&self, outcome: HedgeOutcome) {
        self.hedges.lock().unwrap().push(outcome);
    }
    fn retry(&self, outcome: RetryOutcome) {
        self.retries.lock().unwrap().push(outcome);
    }
    fn finished(&self, outcome: Outcome, _: Duration, _: u32) {
        self.finished.lock().unwrap().push(outcome);
    }
}

impl Seen {
    fn hedges(&self) -> Vec<HedgeOutcome> {
        std::mem::take(&mut *self.hedges.lock().unwrap())
    }
    fn retries(&self) -> Vec<RetryOutcome> {
        std::mem::take(&mut *self.retries.lock().unwrap())
    }
    fn outcomes(&self) -> Vec<Outcome> {
        std::mem::take(&mut *self.finished.lock().unwrap())
    }
}

/// A policy whose gate the test sets by hand.
struct Manual(Gate);

impl Algorithm for Manual {
    fn name(&self) -> &'static str {
        "manual"
    }
    fn publish(&self) -> Published {
        Published::new(self.0)
    }
    fn on_sample(&mut self, _: Instant, _: &Sample) {}
}

/// Three attempts, a hedge after 50 ms, a backoff of 1 ms.
fn hedged() -> RetryConfig {
    RetryConfig {
        attempts: 3,
        backoff: Backoff {
            base: ms(1),
            cap: ms(1),
        },
        hedge: Some(Hedge::after(ms(50))),
        ..RetryConfig::default()
    }
}

/// A limiter on Tokio's (paused) clock that hedges after 50 ms.
fn limiter<A: Algorithm>(policy: A) -> (Arc<Seen>, Arc<Limiter<A, TokioClock>>) {
    let seen = Arc::new(Seen::default());
    let limiter = Limiter::builder(policy)
        .clock(TokioClock)
        .retry(hedged())
        .observer(Arc::clone(&seen))
        .build()
        .unwrap();
    (seen, Arc::new(limiter))
}

// ----- the dependency ---------------------------------------------------------

/// A request that is no HTTP request, idempotent or not as it says.
#[derive(Clone, Debug)]
struct Query {
    read: bool,
}

const READ: Query = Query { read: true };
const WRITE: Query = Query { read: false };

impl Idempotent for Query {
    fn is_idempotent(&self) -> bool {
        self.read
    }
}

/// Which attempt answered (from 0), and its status.
type Answer = Result<(u32, u16), Infallible>;

type Reply = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// 5xx an overload, the rest a success.
type ByStatus = ClassifyFn<fn(&Answer, Duration) -> Outcome>;

fn by_status() -> ByStatus {
    ClassifyFn(|answer, _| match answer {
        Ok((_, status)) if *status >= 500 => Outcome::Overload,
        _ => Outcome::Success,
    })
}

/// A dependency whose `n`th attempt (from 0) answers `script[n]`: a status
/// after a latency in milliseconds (200 after 1 ms past the script); and
/// the attempts it received.
fn dependency(
    script: &[(u64, u16)],
) -> (
    Arc<AtomicU32>,
    impl Service<Query, Response = (u32, u16), Error = Infallible, Future = Reply> + Clone,
) {
    let sent = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&sent);
    let script: Arc<[(u64, u16)]> = script.into();
    let service = service_fn(move |_: Query| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let (latency, status) = script.get(n as usize).copied().unwrap_or((1, 200));
        Box::pin(async move {
            tokio::time::sleep(ms(latency)).await;
            Ok((n, status))
        }) as Reply
    });
    (sent, service)
}

/// The dependency behind the retrying layer, with a 5 s timeout.
fn through<S, A: Algorithm + 'static>(
    limiter: &Arc<Limiter<A, TokioClock>>,
    service: S,
) -> RheostatRetry<S, ByStatus, IdempotentOnly, A, TokioClock> {
    RheostatLayer::new(Arc::clone(limiter))
        .classify(by_status())
        .timeout(Duration::from_secs(5))
        .unwrap()
        .retry()
        .layer(service)
}

use HedgeOutcome::{Congested, Lost, Refused, Sent, Won};

// ----- the race -----------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_hedged_and_the_hedges_answer_is_returned_while_the_loser_teaches_nothing(
) {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    let (sent, service) = dependency(&[(2000, 200), (10, 200)]);
    let t0 = tokio::time::Instant::now();
    let answer = through(&limiter, service).oneshot(READ).await.unwrap();
    assert_eq!(answer, (1, 200), "the hedge answered first");
    assert_eq!(t0.elapsed(), ms(60));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(seen.hedges(), [Sent, Won]);
    // The hedge's success, then the first attempt cancelled: ignored.
    assert_eq!(seen.outcomes(), [Outcome::Success, Outcome::Ignore]);
    assert_eq!(seen.retries(), []);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_first_attempt_answering_first_makes_the_hedge_a_loss_recorded_as_ignored() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    let (sent, service) = dependency(&[(70, 200), (100, 200)]);
    let t0 = tokio::time::Instant::now();
    let answer = through(&limiter, service).oneshot(READ).await.unwrap();
    assert_eq!(answer, (0, 200));
    assert_eq!(t0.elapsed(), ms(70));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(seen.hedges(), [Sent, Lost]);
    assert_eq!(seen.outcomes(), [Outcome::Success, Outcome::Ignore]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_answers_within_the_delay_sends_no_hedge() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    let (sent, service) = dependency(&[(49, 200)]);
    let answer = through(&limiter, service).oneshot(READ).await.unwrap();
    assert_eq!(answer, (0, 200));
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(seen.hedges(), []);
    assert_eq!(seen.outcomes(), [Outcome::Success]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_waits_for_the_hedge_still_out_before_any_retry() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    // The first attempt fails at 80 ms; the hedge, sent at 50 ms, answers
    // at 90 ms: no retry is needed.
    let (sent, service) = dependency(&[(80, 503), (40, 200)]);
    let t0 = tokio::time::Instant::now();
    let answer = through(&limiter, service).oneshot(READ).await.unwrap();
    assert_eq!(answer, (1, 200));
    assert_eq!(t0.elapsed(), ms(90));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(seen.hedges(), [Sent, Won]);
    assert_eq!(seen.outcomes(), [Outcome::Overload, Outcome::Success]);
    assert_eq!(seen.retries(), []);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn when_the_attempt_and_its_hedge_both_fail_the_last_failure_is_retried() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    // Failed at 80 ms, the hedge (sent at 50 ms) at 110 ms; the retry, the
    // third and last attempt, is not hedged and answers.
    let (sent, service) = dependency(&[(80, 503), (60, 503), (10, 200)]);
    let answer = through(&limiter, service).oneshot(READ).await.unwrap();
    assert_eq!(answer, (2, 200));
    assert_eq!(sent.load(Ordering::SeqCst), 3);
    assert_eq!(seen.hedges(), [Sent, Lost]);
    assert_eq!(seen.retries(), [RetryOutcome::Sent]);
    assert_eq!(
        seen.outcomes(),
        [Outcome::Overload, Outcome::Overload, Outcome::Success]
    );
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_slow_retry_is_hedged_too() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    // A quick 503, then a retry that stalls: hedged, and the hedge answers.
    let (sent, service) = dependency(&[(5, 503), (2000, 200), (10, 200)]);
    let answer = through(&limiter, service).oneshot(READ).await.unwrap();
    assert_eq!(answer, (2, 200));
    assert_eq!(sent.load(Ordering::SeqCst), 3);
    assert_eq!(seen.retries(), [RetryOutcome::Sent]);
    assert_eq!(seen.hedges(), [Sent, Won]);
    assert_eq!(limiter.in_flight(), 0);
}

// ----- what may be hedged -------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_request_that_may_not_be_retried_is_never_hedged() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    let (sent, service) = dependency(&[(500, 200)]);
    let answer = through(&limiter, service).oneshot(WRITE).await.unwrap();
    assert_eq!(answer, (0, 200));
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(seen.hedges(), []);

    // Over HTTP: a slow GET is hedged, a slow POST is not.
    let methods = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&methods);
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .retry()
        .layer(service_fn(move |request: http::Request<String>| {
            log.lock().unwrap().push(request.method().to_string());
            async {
                tokio::time::sleep(ms(500)).await;
                http::Response::builder().status(200).body(())
            }
        }));
    let get = http::Request::get("http://example.com/").body(String::new());
    let response = service.clone().oneshot(get.unwrap()).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(seen.hedges(), [Sent, Lost]);
    let post = http::Request::post("http://example.com/").body("{}".to_owned());
    let response = service.oneshot(post.unwrap()).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(seen.hedges(), []);
    assert_eq!(*methods.lock().unwrap(), ["GET", "GET", "POST"]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn no_hedge_is_sent_without_a_free_slot() {
    // One slot, taken by the first attempt: the hedge is refused, not
    // queued, and the first attempt answers.
    let (seen, limiter) = limiter(Fixed::new(1).unwrap());
    let (sent, service) = dependency(&[(500, 200)]);
    let t0 = tokio::time::Instant::now();
    let answer = through(&limiter, service).oneshot(READ).await.unwrap();
    assert_eq!(answer, (0, 200));
    assert_eq!(t0.elapsed(), ms(500));
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(seen.hedges(), [Refused]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn no_hedge_is_sent_while_the_policy_sees_congestion() {
    for (gate, why) in [
        // The limit last moved down.
        (Gate::limited(5), "falling"),
        // A throttle refusing a share.
        (
            Gate {
                admit_probability: 0.999_999,
                ..Gate::limited(10)
            },
            "throttled",
        ),
    ] {
        let (seen, limiter) = limiter(Manual(Gate::limited(10)));
        limiter.update(|policy| policy.0 = gate);
        let (sent, service) = dependency(&[(500, 200)]);
        let answer = through(&limiter, service).oneshot(READ).await.unwrap();
        assert_eq!(answer, (0, 200), "{why}");
        assert_eq!(sent.load(Ordering::SeqCst), 1, "{why}");
        assert_eq!(seen.hedges(), [Congested], "{why}");
        // The limit rising again ends it.
        limiter.update(|policy| policy.0 = Gate::limited(20));
        let (sent, service) = dependency(&[(500, 200), (10, 200)]);
        let answer = through(&limiter, service).oneshot(READ).await.unwrap();
        assert_eq!(answer, (1, 200), "{why}");
        assert_eq!(sent.load(Ordering::SeqCst), 2, "{why}");
        assert_eq!(seen.hedges(), [Sent, Won], "{why}");
    }
}

/// A service whose clones are never ready: the hedge, sent by a clone,
/// waits for it.
#[derive(Debug)]
struct Original<S> {
    inner: S,
    original: bool,
}

impl<S: Clone> Clone for Original<S> {
    fn clone(&self) -> Self {
        Original {
            inner: self.inner.clone(),
            original: false,
        }
    }
}

impl<S: Service<Query>> Service<Query> for Original<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if self.original {
            self.inner.poll_ready(cx)
        } else {
            Poll::Pending
        }
    }

    fn call(&mut self, request: Query) -> S::Future {
        self.inner.call(request)
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedge_the_inner_service_is_not_ready_for_is_not_sent_and_gives_back_its_slot() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    let (sent, service) = dependency(&[(500, 200)]);
    let service = through(
        &limiter,
        Original {
            inner: service,
            original: true,
        },
    );
    let answer = service.oneshot(READ).await.unwrap();
    assert_eq!(answer, (0, 200));
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    // Its slot was taken at 50 ms, and given back unrecorded.
    assert_eq!(seen.hedges(), [Refused]);
    assert_eq!(seen.outcomes(), [Outcome::Success, Outcome::Ignore]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_layer_that_waits_for_its_slot_with_a_class_function_hedges_too() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    let (sent, service) = dependency(&[(2000, 200), (10, 200)]);
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(by_status())
        .classify_request(IdempotentOnly)
        .wait()
        .retry()
        .layer(service);
    let t0 = tokio::time::Instant::now();
    assert_eq!(service.oneshot(READ).await.unwrap(), (1, 200));
    assert_eq!(t0.elapsed(), ms(60));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(seen.hedges(), [Sent, Won]);
    assert_eq!(limiter.in_flight(), 0);
}

// ----- cancel safety --------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn dropping_the_response_future_releases_every_attempt_out() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    let (sent, service) = dependency(&[(5000, 200), (5000, 200)]);
    let call = through(&limiter, service).oneshot(READ);
    match tokio::time::timeout(ms(100), call).await {
        Err(_elapsed) => {}
        Ok(answer) => panic!("answered: {answer:?}"),
    }
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(seen.hedges(), [Sent]);
    // Both dropped: the limiter's drop outcome, an ignore by default.
    assert_eq!(seen.outcomes(), [Outcome::Ignore, Outcome::Ignore]);
    // Nothing more is sent once dropped.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(sent.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_hedge_that_times_out_is_an_overload_and_the_attempt_beside_it_still_answers() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    let layer = RheostatLayer::new(Arc::clone(&limiter))
        .classify(by_status())
        .timeout(ms(300))
        .unwrap()
        .retry();
    // The first attempt answers at 290 ms; the hedge, sent at 50 ms, is
    // given 300 ms like any attempt and hangs.
    let (_, service) = dependency(&[(290, 200), (5000, 200)]);
    let answer = layer.layer(service).oneshot(READ).await.unwrap();
    assert_eq!(answer, (0, 200));
    assert_eq!(seen.hedges(), [Sent, Lost]);

    // The first hangs and times out at 300 ms, the hedge at 350 ms: the
    // call is retried, its last attempt not hedged.
    let (sent, service) = dependency(&[(5000, 200), (5000, 200), (10, 200)]);
    let answer = layer.layer(service).oneshot(READ).await.unwrap();
    assert_eq!(answer, (2, 200));
    assert_eq!(sent.load(Ordering::SeqCst), 3);
    assert_eq!(seen.hedges(), [Sent, Lost]);
    assert_eq!(seen.retries(), [RetryOutcome::Sent]);
    assert_eq!(
        seen.outcomes(),
        [
            Outcome::Success,
            Outcome::Ignore,
            Outcome::Overload,
            Outcome::Overload,
            Outcome::Success
        ]
    );
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_limiter_without_a_hedge_sends_one_attempt_at_a_time() {
    let seen = Arc::new(Seen::default());
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(10).unwrap())
            .clock(TokioClock)
            .retry(RetryConfig {
                hedge: None,
                ..hedged()
            })
            .observer(Arc::clone(&seen))
            .build()
            .unwrap(),
    );
    let (sent, service) = dependency(&[(2000, 200)]);
    let answer = through(&limiter, service).oneshot(READ).await;
    assert!(matches!(answer, Ok((0, 200))), "{answer:?}");
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(seen.hedges(), []);
}

#[tokio::test(start_paused = true)]
async fn a_slow_request_is_hedged_only_once_a_call_sent_after_it_has_succeeded() {
    let (seen, limiter) = limiter(Fixed::new(10).unwrap());
    let (sent, service) = dependency(&[(500, 200), (10, 200)]);
    let t0 = tokio::time::Instant::now();
    let slow = tokio::spawn(through(&limiter, service).oneshot(READ));
    // A call sent 10 ms later is as slow until it succeeds at 120 ms: the
    // hedge waits at 50 and 100 ms, and is sent at 150 ms.
    tokio::time::sleep(ms(10)).await;
    let later = limiter.try_acquire().unwrap();
    tokio::time::sleep(ms(110)).await;
    later.success();
    assert_eq!(slow.await.unwrap().unwrap(), (1, 200));
    assert_eq!(t0.elapsed(), ms(160));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(
        seen.hedges(),
        [HedgeOutcome::InOrder, HedgeOutcome::InOrder, Sent, Won]
    );
}
