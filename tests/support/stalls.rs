//! A real HTTP dependency on loopback that stalls a share of its requests,
//! and an open-loop load calling it through the retrying tower layer, with
//! hedging and without: each call's latency, the requests the dependency
//! received for it, and what became of the hedges. Shared by
//! `tests/http_hedge.rs` and `examples/hedge.rs`.

use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rheostat::algorithms::{Aimd, Algorithm, ConfigError, Fixed};
use rheostat::retry::{Hedge, HedgeOutcome, RetryConfig};
use rheostat::tower::{HttpClassifier, IdempotentOnly, RheostatLayer, RheostatRetry};
use rheostat::{CallError, Limiter, Observer, Timeout};
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tower::{Layer, ServiceExt};

#[path = "server_thread.rs"]
mod server_thread;
use server_thread::{draw, Runtime, ServerThread};

/// What is run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup {
    /// Calls measured, after the warm-up.
    pub(crate) calls: u32,
    /// Calls a second, sent at a steady pace whatever is in flight.
    pub(crate) rate: u32,
    /// The share of requests the dependency stalls.
    pub(crate) stall: f64,
    /// How long a stalled request takes.
    pub(crate) stall_for: Duration,
    /// The rest are answered after a time spread evenly over this range.
    pub(crate) answer: (Duration, Duration),
    /// The limiter's policy.
    pub(crate) policy: Policy,
    /// The limiter's attempt timeout.
    pub(crate) timeout: Timeout,
    /// The hedged run's hedge.
    pub(crate) hedge: Hedge,
    /// Which requests stall and how long the others take; the limiters'
    /// draws.
    pub(crate) seed: u64,
}

impl Default for Setup {
    /// 5,000 calls at 500 a second; 2% of requests stall 1 s, the rest are
    /// answered in 1–5 ms; the timeout learned under a 15 s ceiling, and
    /// the hedge delay with it (`Hedge::default()`: the p95 of recent
    /// successes); the recommended policy.
    fn default() -> Self {
        Setup {
            calls: 5_000,
            rate: 500,
            stall: 0.02,
            stall_for: Duration::from_secs(1),
            answer: (Duration::from_millis(1), Duration::from_millis(5)),
            policy: Policy::Recommended,
            timeout: Timeout::learned(Duration::from_secs(15)).into(),
            hedge: Hedge::default(),
            seed: 7,
        }
    }
}

/// The limiter's policy.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Policy {
    /// `Aimd::recommended()`.
    Recommended,
    /// `Fixed::new(n)`: a limit that never moves, so never sees congestion.
    Fixed(u32),
}

impl Policy {
    fn build(self) -> Result<Box<dyn Algorithm>, ConfigError> {
        Ok(match self {
            Policy::Recommended => Box::new(Aimd::recommended()),
            Policy::Fixed(limit) => Box::new(Fixed::new(limit)?),
        })
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Recommended => f.write_str("Aimd::recommended()"),
            Policy::Fixed(limit) => write!(f, "Fixed::new({limit})"),
        }
    }
}

// ----- the dependency -------------------------------------------------------

/// A hyper server on 127.0.0.1, on a thread and runtime of its own, that
/// stalls `setup.stall` of its requests and counts those to `/measured`.
/// Stops when dropped.
pub(crate) struct Server {
    thread: ServerThread,
    measured: Arc<AtomicU64>,
}

impl Server {
    pub(crate) fn start(setup: Setup) -> std::io::Result<Server> {
        let measured = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&measured);
        let thread = ServerThread::start(Runtime::CurrentThread, move |listener, stopped| {
            serve(listener, setup, counter, stopped)
        })?;
        Ok(Server { thread, measured })
    }

    fn uri(&self, path: &str) -> Result<hyper::Uri, hyper::http::uri::InvalidUri> {
        format!("http://{}{path}", self.thread.addr()).parse()
    }
}

async fn serve(
    listener: std::net::TcpListener,
    setup: Setup,
    measured: Arc<AtomicU64>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    let numbered = Arc::new(AtomicU64::new(0));
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let (numbered, measured) = (Arc::clone(&numbered), Arc::clone(&measured));
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<_>| {
                let n = numbered.fetch_add(1, Ordering::Relaxed);
                if request.uri().path() == "/measured" {
                    measured.fetch_add(1, Ordering::Relaxed);
                }
                let delay = if draw(setup.seed, 2 * n) < setup.stall {
                    setup.stall_for
                } else {
                    let (lo, hi) = setup.answer;
                    lo + hi.saturating_sub(lo).mul_f64(draw(setup.seed, 2 * n + 1))
                };
                async move {
                    tokio::time::sleep(delay).await;
                    Ok::<_, std::io::Error>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                }
            });
            // A request the client gives up on (a hedge's loser) closes
            // its connection.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

// ----- the callers ----------------------------------------------------------

/// An observer counting every hedge outcome.
#[derive(Debug, Default)]
pub(crate) struct HedgeCounts([AtomicU64; HedgeOutcome::ALL.len()]);

impl Observer for HedgeCounts {
    fn hedge(&self, outcome: HedgeOutcome) {
        if let Some(i) = HedgeOutcome::ALL.iter().position(|o| *o == outcome) {
            self.0[i].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What one run measured.
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    /// `no hedge` or `hedged`.
    pub(crate) name: &'static str,
    /// Each measured call's latency, to its response (or error), sorted.
    pub(crate) latencies: Vec<Duration>,
    /// Measured calls refused by the limiter.
    pub(crate) rejected: u32,
    /// Measured calls not answered 200 otherwise (timed out, failed).
    pub(crate) failed: u32,
    /// Calls sent before those measured, while the limiter learned.
    pub(crate) warmup: u32,
    /// Requests the dependency received for the calls measured.
    pub(crate) requests: u64,
    /// Every hedge outcome of the run, warm-up included, in the order of
    /// `HedgeOutcome::ALL`.
    pub(crate) hedges: [u64; HedgeOutcome::ALL.len()],
    /// The hedge delay at the end (`Timeouts::hedge`).
    pub(crate) delay: Option<Duration>,
    /// The attempt timeout in force at the end.
    pub(crate) timeout: Option<Duration>,
    /// The limiter's least limit while the calls measured were sent.
    pub(crate) least_limit: u32,
}

impl Summary {
    /// The `q` quantile of the latencies.
    pub(crate) fn percentile(&self, q: f64) -> Duration {
        let n = self.latencies.len();
        let rank = ((n as f64) * q).ceil() as usize;
        self.latencies
            .get(rank.clamp(1, n.max(1)) - 1)
            .copied()
            .unwrap_or_default()
    }

    /// Requests the dependency received for each call measured.
    pub(crate) fn per_call(&self) -> f64 {
        self.requests as f64 / self.latencies.len().max(1) as f64
    }

    /// Hedge outcomes of this kind.
    pub(crate) fn hedges(&self, outcome: HedgeOutcome) -> u64 {
        HedgeOutcome::ALL
            .iter()
            .position(|o| *o == outcome)
            .map_or(0, |i| self.hedges[i])
    }
}

/// A hyper client whose requests (`Full` bodies) can be cloned, through the
/// retrying layer over a limiter with policy `A`.
pub(crate) type Guarded<A> =
    RheostatRetry<Client<HttpConnector, Full<Bytes>>, HttpClassifier, IdempotentOnly, A>;

/// One run against a server of its own: calls at `setup.rate` through the
/// retrying layer over a hyper client, under `setup.policy` and
/// `setup.timeout`, the default retry policy and `hedge` if any.
pub(crate) async fn run(
    name: &'static str,
    setup: Setup,
    hedge: Option<Hedge>,
) -> Result<Summary, Box<dyn Error>> {
    let server = Server::start(setup)?;
    let hedges = Arc::new(HedgeCounts::default());
    let limiter = Arc::new(
        Limiter::builder(setup.policy.build()?)
            .name(name)
            .timeout(setup.timeout)
            .retry(RetryConfig {
                hedge,
                ..RetryConfig::default()
            })
            .observer(Arc::clone(&hedges))
            .seed(setup.seed)
            .build()?,
    );
    let client = Client::builder(TokioExecutor::new()).build_http();
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .retry()
        .layer(client);
    measure(name, setup, &server, &limiter, &hedges, service).await
}

/// Call `server` through `service` (over `limiter`, whose timeout is
/// `setup.timeout` and whose observer is `hedges`) at `setup.rate`: an
/// open loop, each call on a task of its own, sent when due whatever is in
/// flight. The first calls are not measured: they warm the limiter up,
/// until it knows its hedge delay (if it hedges) and its learned timeout
/// (if it learns one); then `setup.calls` are. Waits for every call to
/// end.
pub(crate) async fn measure<A>(
    name: &'static str,
    setup: Setup,
    server: &Server,
    limiter: &Limiter<A>,
    hedges: &HedgeCounts,
    service: Guarded<A>,
) -> Result<Summary, Box<dyn Error>>
where
    A: Algorithm + Send + 'static,
{
    let hedges_learned = limiter
        .retry()
        .and_then(|retry| retry.config().hedge)
        .is_some_and(|hedge| hedge.delay.is_none());
    let learns = matches!(setup.timeout, Timeout::Learned(_));
    let warmed = || {
        let timeouts = limiter.timeouts();
        (!hedges_learned || timeouts.hedge.is_some()) && (!learns || timeouts.learned.is_some())
    };
    let (warmup, measured) = (server.uri("/warmup")?, server.uri("/measured")?);
    let mut calls = JoinSet::new();
    let mut latencies = Vec::new();
    let mut ends = [0u32; 3];
    let (mut sent, mut warmup_calls, mut least_limit) = (0u32, None, u32::MAX);
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while warmup_calls.is_none_or(|w| sent < w + setup.calls) {
        tick.tick().await;
        if warmup_calls.is_some() {
            least_limit = least_limit.min(limiter.gate().limit);
        }
        let due = start.elapsed().as_secs_f64() * f64::from(setup.rate);
        while f64::from(sent) <= due && warmup_calls.is_none_or(|w| sent < w + setup.calls) {
            if warmup_calls.is_none() && warmed() {
                warmup_calls = Some(sent);
            }
            if warmup_calls.is_none() && start.elapsed() > Duration::from_secs(60) {
                return Err(format!("{name}: nothing learned in a minute").into());
            }
            let uri = if warmup_calls.is_some() {
                &measured
            } else {
                &warmup
            };
            let request = Request::get(uri.clone()).body(Full::default())?;
            let (service, counted) = (service.clone(), warmup_calls.is_some());
            calls.spawn(async move {
                let t0 = Instant::now();
                let end = match service.oneshot(request).await {
                    Ok(response) => {
                        let end = if response.status() == 200 {
                            End::Ok
                        } else {
                            End::Failed
                        };
                        let latency = t0.elapsed();
                        let _ = response.into_body().collect().await;
                        return (counted, latency, end);
                    }
                    Err(CallError::Rejected(_)) => End::Rejected,
                    Err(_) => End::Failed,
                };
                (counted, t0.elapsed(), end)
            });
            sent += 1;
        }
        while let Some(done) = calls.try_join_next() {
            record(done?, &mut latencies, &mut ends);
        }
    }
    while let Some(done) = calls.join_next().await {
        record(done?, &mut latencies, &mut ends);
    }
    latencies.sort();
    let timeouts = limiter.timeouts();
    Ok(Summary {
        name,
        latencies,
        rejected: ends[End::Rejected as usize],
        failed: ends[End::Failed as usize],
        warmup: warmup_calls.unwrap_or_default(),
        requests: server.measured.load(Ordering::Relaxed),
        hedges: std::array::from_fn(|i| hedges.0[i].load(Ordering::Relaxed)),
        delay: timeouts.hedge,
        timeout: timeouts.in_force,
        least_limit,
    })
}

/// How a call ended.
#[derive(Clone, Copy, Debug)]
enum End {
    /// Answered 200.
    Ok,
    /// Refused by the limiter.
    Rejected,
    /// Timed out, failed, or answered otherwise.
    Failed,
}

/// Keep a call's latency and count how it ended, if it was measured.
fn record(
    (counted, latency, end): (bool, Duration, End),
    latencies: &mut Vec<Duration>,
    ends: &mut [u32; 3],
) {
    if counted {
        latencies.push(latency);
        ends[end as usize] += 1;
    }
}

/// A run without hedging, then one with `setup.hedge`, each against a
/// server of its own, both printed.
pub(crate) async fn compare(setup: Setup) -> Result<[Summary; 2], Box<dyn Error>> {
    let plain = run("no hedge", setup, None).await?;
    let hedged = run("hedged", setup, Some(setup.hedge)).await?;
    print(&setup, &[&plain, &hedged]);
    Ok([plain, hedged])
}

/// The runs' figures, a row each, and the goals they are held to.
pub(crate) fn print(setup: &Setup, runs: &[&Summary]) {
    let delay = match setup.hedge.delay {
        Some(delay) => format!("after {delay:?}"),
        None => format!("learned, p{}", setup.hedge.quantile * 100.0),
    };
    let timeout = match setup.timeout {
        Timeout::Typed(timeout) => format!("{timeout:?}"),
        Timeout::Learned(learned) => format!("learned under {:?}", learned.ceiling),
    };
    println!(
        "{} calls at {}/s after a warm-up; {}% of requests stall {:?}, the rest are answered in \
         {:?}–{:?}; {}, timeout {timeout}, the default retry policy; hedge {delay}",
        setup.calls,
        setup.rate,
        setup.stall * 100.0,
        setup.stall_for,
        setup.answer.0,
        setup.answer.1,
        setup.policy,
    );
    println!(
        "{:<9} {:>6} {:>9} {:>9} {:>9} {:>9} {:>8} {:>6} {:>13}  {:>5} {:>5} {:>5} {:>7} {:>9} {:>8} {:>6} {:>9} {:>9} {:>11}",
        "run",
        "warmup",
        "p50",
        "p99",
        "p99.9",
        "max",
        "rejected",
        "failed",
        "requests/call",
        "sent",
        "won",
        "lost",
        "refused",
        "congested",
        "in order",
        "budget",
        "delay",
        "timeout",
        "least limit",
    );
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    let or_none = |d: Option<Duration>| d.map_or("none".to_owned(), ms);
    for run in runs {
        println!(
            "{:<9} {:>6} {:>9} {:>9} {:>9} {:>9} {:>8} {:>6} {:>13.4}  {:>5} {:>5} {:>5} {:>7} {:>9} {:>8} {:>6} {:>9} {:>9} {:>11}",
            run.name,
            run.warmup,
            ms(run.percentile(0.5)),
            ms(run.percentile(0.99)),
            ms(run.percentile(0.999)),
            ms(run.latencies.last().copied().unwrap_or_default()),
            run.rejected,
            run.failed,
            run.per_call(),
            run.hedges(HedgeOutcome::Sent),
            run.hedges(HedgeOutcome::Won),
            run.hedges(HedgeOutcome::Lost),
            run.hedges(HedgeOutcome::Refused),
            run.hedges(HedgeOutcome::Congested),
            run.hedges(HedgeOutcome::InOrder),
            run.hedges(HedgeOutcome::BudgetExhausted),
            or_none(run.delay),
            or_none(run.timeout),
            run.least_limit,
        );
    }
    println!(
        "(hedges counted over the whole run, warm-up included; the rest over the calls measured)"
    );
    if let Some(hedged) = runs.iter().find(|run| run.hedges(HedgeOutcome::Sent) > 0) {
        let (p999, extra) = (hedged.percentile(0.999), hedged.per_call() - 1.0);
        println!(
            "goals, hedged: p99.9 under 200 ms: {} ({}); extra requests at most 5%: {} ({:.1}%)",
            if p999 < Duration::from_millis(200) {
                "met"
            } else {
                "NOT met"
            },
            ms(p999),
            if extra <= 0.05 { "met" } else { "NOT met" },
            extra * 100.0,
        );
    }
}
