//! A real HTTP dependency on loopback that browns out on a schedule, and a
//! load driver that calls it through the tower layer. Shared by
//! `examples/http_client.rs` and `tests/http.rs`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rheostat::algorithms::Gate;
use rheostat::tower::{HttpClassifier, Rheostat, RheostatLayer};
use rheostat::{CallError, DynLimiter, Observer};
use tokio::sync::{oneshot, Semaphore};

#[path = "server_thread.rs"]
mod server_thread;
use server_thread::{Runtime, ServerThread};
use tower::{Layer, ServiceExt};

/// What the dependency does, from some instant on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// All workers, normal service time.
    Normal,
    /// Only the degraded number of workers: requests queue.
    Degraded,
    /// Every request answered 503 at once.
    Outage,
    /// Every connection and request dropped: the client sees errors.
    Refusing,
    /// Back, but slow until it has served `warm_after` requests.
    ColdStart,
}

impl Phase {
    fn code(self) -> u8 {
        match self {
            Phase::Normal => 0,
            Phase::Degraded => 1,
            Phase::Outage => 2,
            Phase::Refusing => 3,
            Phase::ColdStart => 4,
        }
    }

    fn from_code(code: u8) -> Phase {
        match code {
            1 => Phase::Degraded,
            2 => Phase::Outage,
            3 => Phase::Refusing,
            4 => Phase::ColdStart,
            _ => Phase::Normal,
        }
    }

    pub(crate) fn is_down(self) -> bool {
        matches!(self, Phase::Outage | Phase::Refusing)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Normal => "normal",
            Phase::Degraded => "capacity drop",
            Phase::Outage => "outage (503)",
            Phase::Refusing => "outage (refused)",
            Phase::ColdStart => "back, cold start",
        }
    }
}

/// The dependency's shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dependency {
    pub(crate) workers: usize,
    pub(crate) degraded_workers: usize,
    pub(crate) service_time: Duration,
    /// A cold answer takes from this…
    pub(crate) cold_service_time: Duration,
    /// …to this (spread evenly over the requests it serves cold).
    pub(crate) cold_service_time_max: Duration,
    pub(crate) warm_after: u64,
}

/// A running server. Stops when dropped.
pub(crate) struct Server {
    thread: ServerThread,
    start: Instant,
    schedule: Vec<(Duration, Phase)>,
    started: Arc<AtomicU64>,
}

struct State {
    phase: AtomicU8,
    workers: Semaphore,
    served_since_recovery: AtomicU64,
    /// Requests that got a worker, since the start.
    started: Arc<AtomicU64>,
    dependency: Dependency,
}

impl Server {
    /// Start serving on 127.0.0.1 (a free port) on a thread of its own,
    /// following `schedule` (`(from, phase)`, from `start`).
    pub(crate) fn start(
        dependency: Dependency,
        schedule: Vec<(Duration, Phase)>,
        start: Instant,
    ) -> std::io::Result<Server> {
        let steps = schedule.clone();
        let started = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&started);
        let thread = ServerThread::start(Runtime::OneWorker, move |listener, stopped| {
            serve(listener, dependency, steps, start, stopped, counter)
        })?;
        Ok(Server {
            thread,
            start,
            schedule,
            started,
        })
    }

    /// Requests that got a worker since the server started (the cold start
    /// warms on these).
    pub(crate) fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.thread.addr()
    }

    /// The phase the schedule says the dependency is in `at` after start.
    pub(crate) fn phase_at(&self, at: Duration) -> Phase {
        phase_at(&self.schedule, at)
    }

    pub(crate) fn start_instant(&self) -> Instant {
        self.start
    }
}

fn phase_at(schedule: &[(Duration, Phase)], at: Duration) -> Phase {
    schedule
        .iter()
        .take_while(|(from, _)| *from <= at)
        .last()
        .map_or(Phase::Normal, |(_, phase)| *phase)
}

async fn serve(
    listener: std::net::TcpListener,
    dependency: Dependency,
    schedule: Vec<(Duration, Phase)>,
    start: Instant,
    mut stopped: oneshot::Receiver<()>,
    started: Arc<AtomicU64>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    let state = Arc::new(State {
        phase: AtomicU8::new(Phase::Normal.code()),
        workers: Semaphore::new(dependency.workers),
        served_since_recovery: AtomicU64::new(0),
        started,
        dependency,
    });
    tokio::spawn(follow(Arc::clone(&state), schedule, start));
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        if Phase::from_code(state.phase.load(Ordering::SeqCst)) == Phase::Refusing {
            drop(stream);
            continue;
        }
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |_request: Request<hyper::body::Incoming>| {
                    answer(Arc::clone(&state))
                });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Move through the schedule: set the phase, take workers away during a
/// capacity drop and give them back after.
async fn follow(state: Arc<State>, schedule: Vec<(Duration, Phase)>, start: Instant) {
    let taken = state.dependency.workers - state.dependency.degraded_workers;
    let mut held = None;
    for (from, phase) in schedule {
        tokio::time::sleep_until((start + from).into()).await;
        if phase == Phase::Degraded && held.is_none() {
            held = state.workers.acquire_many(taken as u32).await.ok();
        } else if phase != Phase::Degraded {
            held = None;
        }
        if phase == Phase::ColdStart {
            state.served_since_recovery.store(0, Ordering::SeqCst);
        }
        state.phase.store(phase.code(), Ordering::SeqCst);
    }
    drop(held);
}

async fn answer(state: Arc<State>) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let respond = |status: StatusCode| {
        let mut response = Response::new(Full::new(Bytes::from_static(b"ok")));
        *response.status_mut() = status;
        response
    };
    match Phase::from_code(state.phase.load(Ordering::SeqCst)) {
        Phase::Outage => return Ok(respond(StatusCode::SERVICE_UNAVAILABLE)),
        Phase::Refusing => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "refusing",
            ))
        }
        _ => {}
    }
    let Ok(_worker) = state.workers.acquire().await else {
        return Ok(respond(StatusCode::SERVICE_UNAVAILABLE));
    };
    state.started.fetch_add(1, Ordering::SeqCst);
    let served = state.served_since_recovery.fetch_add(1, Ordering::SeqCst);
    let cold = Phase::from_code(state.phase.load(Ordering::SeqCst)) == Phase::ColdStart
        && served < state.dependency.warm_after;
    let time = if cold {
        // An even spread between the two, in a fixed order (a multiplicative
        // hash of the request's number), so runs are alike.
        let (lo, hi) = (
            state.dependency.cold_service_time,
            state
                .dependency
                .cold_service_time_max
                .max(state.dependency.cold_service_time),
        );
        let spread =
            (served.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo).mul_f64(spread)
    } else {
        state.dependency.service_time
    };
    tokio::time::sleep(time).await;
    Ok(respond(StatusCode::OK))
}

// ----- the client side ----------------------------------------------------

/// The hyper client behind the limiter.
pub(crate) type Guarded = Rheostat<Client<HttpConnector, Empty<Bytes>>, HttpClassifier>;

/// A hyper (legacy) client through the tower layer.
pub(crate) fn client(
    limiter: Arc<DynLimiter>,
    timeout: Duration,
    slow: Option<Duration>,
) -> Guarded {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let classifier = match slow {
        Some(threshold) => HttpClassifier::new()
            .slow_after(threshold)
            .expect("a valid slow-call threshold"),
        None => HttpClassifier::new(),
    };
    RheostatLayer::new(limiter)
        .classify(classifier)
        .timeout(timeout)
        .expect("a valid timeout")
        .layer(client)
}

/// How one request went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Result_ {
    /// Answered with this status.
    Answered(u16),
    /// Refused by the limiter, never sent.
    Rejected,
    /// Ran out of time.
    TimedOut,
    /// The connection failed.
    Failed,
}

/// One request: when it was sent (after the start), how it went, how long
/// the caller waited.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    pub(crate) sent: Duration,
    pub(crate) result: Result_,
    pub(crate) latency: Duration,
}

/// Send a request every `every` until `until` after `start`, each through a
/// clone of `service`; wait for all of them.
pub(crate) async fn drive(
    service: Guarded,
    addr: SocketAddr,
    every: Duration,
    start: Instant,
    until: Duration,
) -> Vec<Record> {
    let uri: hyper::Uri = format!("http://{addr}/").parse().expect("a uri");
    let mut tasks = tokio::task::JoinSet::new();
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while start.elapsed() < until {
        ticks.tick().await;
        let service = service.clone();
        let uri = uri.clone();
        tasks.spawn(async move {
            let sent = start.elapsed();
            let request = Request::get(uri).body(Empty::new()).expect("a request");
            let began = Instant::now();
            let result = match service.oneshot(request).await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    // Read the body so the connection can be reused; the
                    // latency stops at the response, as the limiter's does.
                    let latency = began.elapsed();
                    let _ = response.into_body().collect().await;
                    return Record {
                        sent,
                        result: Result_::Answered(status),
                        latency,
                    };
                }
                Err(CallError::Rejected(_)) => Result_::Rejected,
                Err(CallError::TimedOut(_)) => Result_::TimedOut,
                Err(_) => Result_::Failed,
            };
            Record {
                sent,
                result,
                latency: began.elapsed(),
            }
        });
    }
    let mut records = Vec::new();
    while let Some(done) = tasks.join_next().await {
        if let Ok(record) = done {
            records.push(record);
        }
    }
    records.sort_by_key(|r| r.sent);
    records
}

/// Checks, at every admission, that in-flight is within the gate's limit.
///
/// A probe's admission can change the gate before the admission is
/// reported, so a call is checked against the largest limit published since
/// the previous admission (the gate it was admitted under is one of them).
/// Exact on a current-thread runtime, where nothing interleaves.
#[derive(Debug, Default)]
pub(crate) struct InFlightCheck {
    limit: AtomicU32,
    since_last: AtomicU32,
    pub(crate) max_in_flight: AtomicU32,
    pub(crate) over_limit: AtomicU32,
}

impl Observer for InFlightCheck {
    fn admitted(&self, in_flight: u32, _probe: bool) {
        self.max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
        if in_flight > self.since_last.load(Ordering::Relaxed) {
            self.over_limit.fetch_add(1, Ordering::Relaxed);
        }
        self.since_last
            .store(self.limit.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    fn gate_changed(&self, gate: &Gate) {
        self.limit.store(gate.limit, Ordering::Relaxed);
        self.since_last.fetch_max(gate.limit, Ordering::Relaxed);
    }
}

/// One second of a run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Second {
    pub(crate) sent: usize,
    pub(crate) ok: usize,
    pub(crate) errors: usize,
    pub(crate) rejected: usize,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

/// Per-second figures: requests by how they went and latency percentiles of
/// the admitted ones.
pub(crate) fn seconds(records: &[Record]) -> Vec<Second> {
    let last = records.last().map_or(0, |r| r.sent.as_secs() as usize);
    let mut out = vec![Second::default(); last + 1];
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(); last + 1];
    for r in records {
        let s = &mut out[r.sent.as_secs() as usize];
        s.sent += 1;
        match r.result {
            Result_::Answered(200) => s.ok += 1,
            Result_::Rejected => s.rejected += 1,
            _ => s.errors += 1,
        }
        if r.result != Result_::Rejected {
            latencies[r.sent.as_secs() as usize].push(r.latency);
        }
    }
    for (s, l) in out.iter_mut().zip(&mut latencies) {
        s.p50 = percentile(l, 0.5);
        s.p99 = percentile(l, 0.99);
    }
    out
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
