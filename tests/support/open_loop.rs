//! A loopback HTTP dependency whose answers are data — each request's delay
//! and status a function of when it arrived and of its number — and an
//! open-loop load that calls it (or a proxy in front of it) through the
//! tower layer with any policy, recording every call and sampling the
//! limiter. Shared by `tests/http_recommended.rs` and `tests/haproxy.rs`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rheostat::algorithms::MAX_LIMIT;
use rheostat::tower::{HttpClassifier, RheostatLayer};
use rheostat::{Algorithm, CallError, Limiter};
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tower::{Layer, ServiceExt};

#[path = "server_thread.rs"]
mod server_thread;
#[allow(unused_imports, reason = "each includer uses what it needs")]
pub(crate) use server_thread::draw;
use server_thread::{Runtime, ServerThread};

// ----- the dependency -------------------------------------------------------

/// How the dependency answers one request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answer {
    /// How long it takes.
    pub(crate) delay: Duration,
    /// The status it answers with, after the delay.
    pub(crate) status: u16,
}

/// One request the dependency answered: when it arrived (after the start)
/// and how long its handler held it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Served {
    pub(crate) arrived: Duration,
    pub(crate) held: Duration,
}

/// A hyper server on 127.0.0.1, on a thread and runtime of its own, with
/// no limit of its own on what it serves at once. Stops when dropped.
pub(crate) struct Server {
    thread: ServerThread,
    served: Arc<Mutex<Vec<Served>>>,
}

impl Server {
    /// Serve on a free loopback port, answering the `n`th request (from 0)
    /// that arrives `at` after `start` (zero before it) as `answers(at, n)`
    /// says.
    pub(crate) fn start<F>(start: Instant, answers: F) -> std::io::Result<Server>
    where
        F: Fn(Duration, u64) -> Answer + Send + Sync + 'static,
    {
        let served = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&served);
        let answers = Arc::new(answers);
        let thread = ServerThread::start(Runtime::CurrentThread, move |listener, stopped| {
            serve(listener, start, answers, log, stopped)
        })?;
        Ok(Server { thread, served })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.thread.addr()
    }

    /// Every request answered so far.
    pub(crate) fn served(&self) -> Vec<Served> {
        self.served.lock().expect("the log").clone()
    }
}

async fn serve<F>(
    listener: std::net::TcpListener,
    start: Instant,
    answers: Arc<F>,
    served: Arc<Mutex<Vec<Served>>>,
    mut stopped: oneshot::Receiver<()>,
) where
    F: Fn(Duration, u64) -> Answer + Send + Sync + 'static,
{
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    let numbered = Arc::new(std::sync::atomic::AtomicU64::new(0));
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let (answers, served, numbered) = (
            Arc::clone(&answers),
            Arc::clone(&served),
            Arc::clone(&numbered),
        );
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |_request: Request<hyper::body::Incoming>| {
                    let began = Instant::now();
                    let arrived = began.saturating_duration_since(start);
                    let n = numbered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let answer = answers(arrived, n);
                    let served = Arc::clone(&served);
                    async move {
                        tokio::time::sleep(answer.delay).await;
                        let held = began.elapsed();
                        served
                            .lock()
                            .expect("the log")
                            .push(Served { arrived, held });
                        let mut response = Response::new(Full::new(Bytes::from_static(b"ok")));
                        *response.status_mut() =
                            StatusCode::from_u16(answer.status).expect("a status code");
                        Ok::<_, std::io::Error>(response)
                    }
                });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

// ----- the callers ----------------------------------------------------------

/// The load: calls a second, evenly spaced, for `length`, each with the
/// caller's `timeout` (a learned one, if the limiter has one, is shorter).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Load {
    pub(crate) rate: f64,
    pub(crate) length: Duration,
    pub(crate) timeout: Duration,
}

/// How one call went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Answered with this status.
    Answered(u16),
    /// Refused by the limiter, never sent.
    Refused,
    /// Ran out of time.
    TimedOut,
    /// The connection failed.
    Failed,
}

/// One call: when it was sent and when it ended (after the start), and how
/// it went.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    pub(crate) sent: Duration,
    pub(crate) ended: Duration,
    pub(crate) outcome: Outcome,
}

impl Record {
    pub(crate) fn ok(&self) -> bool {
        self.outcome == Outcome::Answered(200)
    }

    pub(crate) fn latency(&self) -> Duration {
        self.ended.saturating_sub(self.sent)
    }
}

/// The limiter, every 50 ms: its limit (`None` for no limit) and what it
/// has in flight.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    pub(crate) at: Duration,
    pub(crate) limit: Option<u32>,
    pub(crate) in_flight: u32,
}

/// What one run recorded.
#[derive(Debug)]
pub(crate) struct Run {
    /// Every call, in the order sent.
    pub(crate) records: Vec<Record>,
    pub(crate) samples: Vec<Sample>,
}

/// Call `uri` with `load` from `start` (now or later; every time recorded
/// is after it) through the tower layer over a hyper client, admitting
/// each call through `limiter`: an open loop (a call is sent when it is
/// due, whatever is in flight; a millisecond's calls go together). Waits
/// for every call to end.
pub(crate) async fn run<A>(limiter: Limiter<A>, uri: hyper::Uri, load: Load, start: Instant) -> Run
where
    A: Algorithm + Sync + 'static,
{
    assert!(
        start + Duration::from_millis(5) >= Instant::now(),
        "a run must start now or later: calls due before would go at once"
    );
    let limiter = Arc::new(limiter);
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .timeout(load.timeout)
        .expect("a valid timeout")
        .layer(client);
    tokio::time::sleep_until(start.into()).await;
    let sampler = {
        let limiter = Arc::clone(&limiter);
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            while start.elapsed() < load.length {
                tick.tick().await;
                let limit = limiter.gate().limit;
                samples.push(Sample {
                    at: start.elapsed(),
                    limit: (limit < MAX_LIMIT).then_some(limit),
                    in_flight: limiter.in_flight(),
                });
            }
            samples
        })
    };
    let mut calls = JoinSet::new();
    let mut records = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let total = (load.rate * load.length.as_secs_f64()) as u64;
    let mut next = 0;
    while next < total {
        tick.tick().await;
        let now = start.elapsed().as_secs_f64();
        while next < total && next as f64 / load.rate <= now {
            next += 1;
            let (service, uri) = (service.clone(), uri.clone());
            calls.spawn(async move {
                let sent = start.elapsed();
                let request = Request::get(uri).body(Empty::new()).expect("a request");
                let outcome = match service.oneshot(request).await {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let ended = start.elapsed();
                        // Read the body so the connection can be reused;
                        // the call ends at the response, as its permit does.
                        let _ = response.into_body().collect().await;
                        return Record {
                            sent,
                            ended,
                            outcome: Outcome::Answered(status),
                        };
                    }
                    Err(CallError::Rejected(_)) => Outcome::Refused,
                    Err(CallError::TimedOut(_)) => Outcome::TimedOut,
                    Err(_) => Outcome::Failed,
                };
                Record {
                    sent,
                    ended: start.elapsed(),
                    outcome,
                }
            });
        }
        // Reap what has ended, so the set holds only what is in flight.
        while let Some(done) = calls.try_join_next() {
            records.push(done.expect("a call's task"));
        }
    }
    while let Some(done) = calls.join_next().await {
        records.push(done.expect("a call's task"));
    }
    records.sort_by_key(|r| r.sent);
    Run {
        records,
        samples: sampler.await.expect("the sampler"),
    }
}

/// The `q` quantile of `values` (sorted in place); zero if empty.
pub(crate) fn percentile(values: &mut [Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort();
    let rank = ((values.len() as f64) * q).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}
