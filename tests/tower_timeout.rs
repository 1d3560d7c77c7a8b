//! A learned attempt timeout through the tower layers: the plain layer and
//! the retrying one, given no timeout of their own, take the limiter's, and
//! once it has learned from the dependency's answers each attempt of a
//! request that hangs is cut at the learned timeout, not at the ceiling,
//! but for the share of calls given the ceiling. In paused time, so the
//! timings are exact.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rheostat::algorithms::Aimd;
use rheostat::retry::RetryConfig;
use rheostat::tower::{HttpClassifier, IdempotentOnly, NotIdempotent, RheostatLayer};
use rheostat::{clock::TokioClock, CallError, Limiter, Timeout};
use tokio::time::Instant;
use tower::{service_fn, Layer, Service, ServiceExt};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const CEILING: Duration = Duration::from_secs(15);

/// The recommended policy, its timeout learned under a 15 s ceiling, on
/// Tokio's (paused) clock; retrying at the defaults if `retry`.
fn learning(seed: u64, retry: bool) -> Arc<Limiter<Aimd, TokioClock>> {
    let builder = Limiter::builder(Aimd::recommended())
        .clock(TokioClock)
        .timeout(Timeout::learned(CEILING))
        .seed(seed);
    let builder = if retry {
        builder.retry(RetryConfig::default())
    } else {
        builder
    };
    Arc::new(builder.build().unwrap())
}

/// How long each attempt that hung ran before it was cut (its future
/// dropped).
#[derive(Clone, Default)]
struct Cut(Arc<Mutex<Vec<Duration>>>);

impl Cut {
    fn take(&self) -> Vec<Duration> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Pushes how long it lived when dropped.
struct Hung {
    since: Instant,
    cut: Cut,
}

impl Drop for Hung {
    fn drop(&mut self) {
        self.cut.0.lock().unwrap().push(self.since.elapsed());
    }
}

type Answer = Pin<Box<dyn Future<Output = Result<http::Response<()>, std::io::Error>> + Send>>;

/// A dependency that answers `GET /` with a 200 after 50 ms and never
/// answers `GET /hang`, noting in `cut` how long each hung attempt ran.
fn dependency(
    cut: &Cut,
) -> impl Service<
    http::Request<()>,
    Response = http::Response<()>,
    Error = std::io::Error,
    Future = Answer,
> + Clone {
    let cut = cut.clone();
    service_fn(move |request: http::Request<()>| -> Answer {
        if request.uri().path() == "/hang" {
            let hung = Hung {
                since: Instant::now(),
                cut: cut.clone(),
            };
            return Box::pin(async move {
                let _hung = hung;
                std::future::pending().await
            });
        }
        Box::pin(async {
            tokio::time::sleep(ms(50)).await;
            Ok(http::Response::new(()))
        })
    })
}

fn get(path: &str) -> http::Request<()> {
    http::Request::get(path).body(()).unwrap()
}

/// Whether `ran` is `given`, within the millisecond Tokio's timer rounds up
/// to.
fn ran_for(ran: Duration, given: Duration) -> bool {
    ran >= given && ran <= given + ms(1)
}

/// The timeout learned from 200 answers of 50 ms: about twice the p99.9,
/// within the histogram's sixteenth (and the timer's millisecond).
fn assert_learned_about_100_ms<C: rheostat::clock::Clock>(limiter: &Limiter<Aimd, C>) -> Duration {
    let learned = limiter.timeouts().learned.unwrap();
    assert!(learned >= ms(100) && learned <= ms(110), "{learned:?}");
    assert_eq!(limiter.timeouts().in_force, Some(learned));
    learned
}

#[tokio::test(start_paused = true)]
async fn the_layer_cuts_a_hung_request_at_the_timeout_learned_from_its_answers_not_the_ceiling() {
    let limiter = learning(3, false);
    let cut = Cut::default();
    // No timeout of the layer's own: it takes the limiter's.
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .layer(dependency(&cut));
    assert_eq!(limiter.timeouts().in_force, Some(CEILING));
    for _ in 0..200 {
        let response = service.clone().oneshot(get("/")).await.unwrap();
        assert_eq!(response.status(), 200);
    }
    let learned = assert_learned_about_100_ms(&limiter);

    let mut at_learned = 0;
    for _ in 0..50 {
        let started = Instant::now();
        match service.clone().oneshot(get("/hang")).await {
            Err(CallError::TimedOut(given)) => {
                assert!(given == learned || given == CEILING, "{given:?}");
                let took = started.elapsed();
                assert!(ran_for(took, given), "given {given:?}, took {took:?}");
                at_learned += u32::from(given == learned);
            }
            other => panic!("a hung request ended {other:?}"),
        }
    }
    // All but the ~1% given the ceiling.
    assert!(
        at_learned >= 45,
        "{at_learned} of 50 cut at the learned timeout"
    );
    let cut = cut.take();
    assert_eq!(cut.len(), 50);
    assert_eq!(
        cut.iter().filter(|&&ran| ran_for(ran, learned)).count(),
        at_learned as usize
    );
    // What timed out taught the learner nothing.
    assert_eq!(limiter.timeouts().learned, Some(learned));
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_retrying_layer_cuts_each_attempt_of_a_hung_request_at_the_learned_timeout() {
    let limiter = learning(1, true);
    let cut = Cut::default();
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .retry()
        .layer(dependency(&cut));
    for _ in 0..200 {
        let response = service.clone().oneshot(get("/")).await.unwrap();
        assert_eq!(response.status(), 200);
    }
    // Answers with no retry: the learner saw each once.
    assert!(cut.take().is_empty());
    let learned = assert_learned_about_100_ms(&limiter);

    let (mut attempts, mut at_learned, mut calls_cut_short) = (0, 0, 0);
    for _ in 0..50 {
        let started = Instant::now();
        match service.clone().oneshot(get("/hang")).await {
            Err(CallError::TimedOut(given)) => {
                assert!(given == learned || given == CEILING, "{given:?}")
            }
            other => panic!("a hung request ended {other:?}"),
        }
        let took = started.elapsed();
        let ran = cut.take();
        // At most the three attempts the retry allows, each cut at the
        // learned timeout or, for the share, the ceiling.
        assert!((1..=3).contains(&ran.len()), "{ran:?}");
        for &each in &ran {
            assert!(
                ran_for(each, learned) || ran_for(each, CEILING),
                "an attempt ran {each:?}"
            );
        }
        let learned_only = ran.iter().all(|&each| ran_for(each, learned));
        attempts += ran.len();
        at_learned += ran.iter().filter(|&&each| ran_for(each, learned)).count();
        // A request whose attempts were all cut at the learned timeout is
        // over within their timeouts and the backoffs between them (at
        // most 50 and 100 ms), not after 15 s.
        if learned_only {
            assert!(took <= (learned + ms(1)) * 3 + ms(150), "{took:?}");
            calls_cut_short += 1;
        }
    }
    assert!(attempts > 50, "retries were sent: {attempts} attempts");
    assert!(
        at_learned * 10 >= attempts * 9,
        "{at_learned} of {attempts} attempts cut at the learned timeout"
    );
    assert!(calls_cut_short >= 40, "{calls_cut_short} of 50");
    assert_eq!(limiter.timeouts().learned, Some(learned));
    assert_eq!(limiter.in_flight(), 0);
}

/// A request marked `NotIdempotent`.
fn not_idempotent(mut request: http::Request<()>) -> http::Request<()> {
    request.extensions_mut().insert(NotIdempotent);
    request
}

#[tokio::test(start_paused = true)]
async fn a_request_that_is_not_idempotent_keeps_the_layers_timeout_through_a_layer_classing_by_idempotence(
) {
    // Failing fast, admitted in `call`; waiting, in the response future.
    for wait in [false, true] {
        let limiter = learning(3, false);
        let cut = Cut::default();
        let layer = RheostatLayer::new(Arc::clone(&limiter))
            .classify(HttpClassifier::new())
            .classify_request(IdempotentOnly);
        let layer = if wait { layer.wait() } else { layer };
        let service = layer.layer(dependency(&cut));
        for _ in 0..200 {
            service.clone().oneshot(get("/")).await.unwrap();
        }
        let learned = assert_learned_about_100_ms(&limiter);
        // Marked, or a POST: never cut early, every one given the 15 s.
        for request in [
            || not_idempotent(get("/hang")),
            || http::Request::post("/hang").body(()).unwrap(),
        ] {
            for _ in 0..20 {
                let started = Instant::now();
                match service.clone().oneshot(request()).await {
                    Err(CallError::TimedOut(given)) => assert_eq!(given, CEILING, "wait {wait}"),
                    other => panic!("a hung request ended {other:?}"),
                }
                assert!(ran_for(started.elapsed(), CEILING));
            }
        }
        // The GETs beside them are cut at the learned timeout, but the
        // share.
        let mut at_learned = 0;
        for _ in 0..50 {
            match service.clone().oneshot(get("/hang")).await {
                Err(CallError::TimedOut(given)) => at_learned += u32::from(given == learned),
                other => panic!("a hung request ended {other:?}"),
            }
        }
        assert!(at_learned >= 45, "{at_learned} of 50, wait {wait}");
        assert_eq!(cut.take().len(), 90);
        assert_eq!(limiter.in_flight(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn the_retrying_layer_sends_a_request_marked_not_idempotent_once_given_the_layers_timeout() {
    let limiter = learning(1, true);
    let cut = Cut::default();
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .retry()
        .classify_request(IdempotentOnly)
        .layer(dependency(&cut));
    for _ in 0..200 {
        service.clone().oneshot(get("/")).await.unwrap();
    }
    assert_learned_about_100_ms(&limiter);
    for _ in 0..10 {
        // A PUT is idempotent by its method; marked, it is neither retried
        // nor cut early.
        let put = not_idempotent(http::Request::put("/hang").body(()).unwrap());
        match service.clone().oneshot(put).await {
            Err(CallError::TimedOut(given)) => assert_eq!(given, CEILING),
            other => panic!("a hung request ended {other:?}"),
        }
        let ran = cut.take();
        assert_eq!(ran.len(), 1, "{ran:?}");
        assert!(ran_for(ran[0], CEILING), "{ran:?}");
    }
    // Unmarked, it is retried.
    for _ in 0..5 {
        let put = http::Request::put("/hang").body(()).unwrap();
        assert!(service.clone().oneshot(put).await.is_err());
    }
    let attempts = cut.take().len();
    assert!(attempts > 5, "{attempts} attempts for 5 requests");
    assert_eq!(limiter.in_flight(), 0);
}
