//! A real HTTP dependency on loopback that never answers a share of its
//! requests, and a pool of workers calling it at a steady rate through the
//! tower layer: one run whose attempt timeout is typed, one whose timeout
//! is learned, side by side, each with the same server, seed, rate and
//! length. Shared by `examples/learned_timeout.rs` and
//! `tests/http_timeout.rs`.

use std::error::Error;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rheostat::algorithms::Aimd;
use rheostat::tower::{HttpClassifier, Rheostat, RheostatLayer};
use rheostat::{CallError, Limiter, Timeout};
use tokio::sync::{oneshot, Semaphore};

#[path = "server_thread.rs"]
mod server_thread;
use server_thread::{draw, Runtime, ServerThread};
use tokio::task::JoinSet;
use tower::{Layer, ServiceExt};

/// What is run: the dependency, the load, and how often a row is printed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup {
    /// How long each run sends requests (both run at once).
    pub(crate) length: Duration,
    /// Requests a second, sent at a steady pace.
    pub(crate) rate: u32,
    /// The callers' workers: a request needs one, and holds it until it
    /// ends; a request due when every worker is held is not sent.
    pub(crate) workers: u32,
    /// How long the server answers every request, from the start.
    pub(crate) healthy: Duration,
    /// Then, the share of requests it never answers.
    pub(crate) hang: f64,
    /// The rest are answered after a time spread evenly over this range.
    pub(crate) answer: (Duration, Duration),
    /// The typed timeout, and the learned one's ceiling.
    pub(crate) ceiling: Duration,
    /// Which requests hang and how long the others take; the limiters'
    /// draws.
    pub(crate) seed: u64,
    /// A row of the table every this often.
    pub(crate) row_every: Duration,
}

impl Default for Setup {
    /// 30 s at 100 requests a second from 200 workers; every request
    /// answered in 20–40 ms for 5 s, then 30% never answered; a 15 s
    /// timeout, typed or as the learned one's ceiling; a row every 3 s.
    fn default() -> Self {
        Setup {
            length: Duration::from_secs(30),
            rate: 100,
            workers: 200,
            healthy: Duration::from_secs(5),
            hang: 0.3,
            answer: (Duration::from_millis(20), Duration::from_millis(40)),
            ceiling: Duration::from_secs(15),
            seed: 7,
            row_every: Duration::from_secs(3),
        }
    }
}

// ----- the server -----------------------------------------------------------

/// A hyper server on 127.0.0.1, on a thread and runtime of its own. Stops
/// when dropped.
struct Server {
    thread: ServerThread,
    /// Requests it is not answering, whose connection is still open.
    hanging: Arc<AtomicU32>,
}

impl Server {
    fn start(setup: Setup, start: Instant) -> std::io::Result<Server> {
        let hanging = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&hanging);
        let thread = ServerThread::start(Runtime::CurrentThread, move |listener, stopped| {
            serve(listener, setup, start, counter, stopped)
        })?;
        Ok(Server { thread, hanging })
    }

    fn addr(&self) -> SocketAddr {
        self.thread.addr()
    }
}

async fn serve(
    listener: std::net::TcpListener,
    setup: Setup,
    start: Instant,
    hanging: Arc<AtomicU32>,
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
        let (numbered, hanging) = (Arc::clone(&numbered), Arc::clone(&hanging));
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |_request: Request<hyper::body::Incoming>| {
                    let n = numbered.fetch_add(1, Ordering::Relaxed);
                    let hangs =
                        start.elapsed() >= setup.healthy && draw(setup.seed, 2 * n) < setup.hang;
                    answer(setup, n, hangs.then(|| Hanging::new(&hanging)))
                });
            // A request the client gives up on closes its connection: the
            // connection ends, and the answer that never came with it.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One request the server is not answering, counted while it is held.
struct Hanging(Arc<AtomicU32>);

impl Hanging {
    fn new(count: &Arc<AtomicU32>) -> Hanging {
        count.fetch_add(1, Ordering::Relaxed);
        Hanging(Arc::clone(count))
    }
}

impl Drop for Hanging {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The answer to the `n`th request: never, if it `hangs`; otherwise a 200
/// after its time.
async fn answer(
    setup: Setup,
    n: u64,
    hangs: Option<Hanging>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    if let Some(_hanging) = hangs {
        std::future::pending::<()>().await;
    }
    let (lo, hi) = setup.answer;
    let time = lo + hi.saturating_sub(lo).mul_f64(draw(setup.seed, 2 * n + 1));
    tokio::time::sleep(time).await;
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

// ----- the callers ----------------------------------------------------------

/// A hyper (legacy) client through the tower layer, given no timeout of
/// its own: each attempt gets the limiter's.
type Guarded = Rheostat<Client<HttpConnector, Empty<Bytes>>, HttpClassifier, Aimd>;

/// What one run has counted so far.
#[derive(Debug, Default)]
struct Tally {
    ok: AtomicU64,
    timed_out: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    /// Requests due when every worker was held.
    unsent: AtomicU64,
    /// The most workers held since the last row.
    most: AtomicU32,
    /// The most workers held since the server began to hang requests.
    most_hanging: AtomicU32,
}

/// One run: its limiter, its workers and what it counted.
struct Run {
    name: &'static str,
    limiter: Arc<Limiter<Aimd>>,
    pool: Arc<Semaphore>,
    tally: Arc<Tally>,
    server: Server,
}

impl Run {
    fn start(
        name: &'static str,
        timeout: Timeout,
        setup: Setup,
        start: Instant,
        tasks: &mut JoinSet<()>,
    ) -> Result<Run, Box<dyn Error>> {
        let server = Server::start(setup, start)?;
        let limiter = Arc::new(
            Limiter::builder(Aimd::recommended())
                .name(name)
                .timeout(timeout)
                .seed(setup.seed)
                .build()?,
        );
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let service = RheostatLayer::new(Arc::clone(&limiter))
            .classify(HttpClassifier::new())
            .layer(client);
        let run = Run {
            name,
            limiter,
            pool: Arc::new(Semaphore::new(setup.workers as usize)),
            tally: Arc::new(Tally::default()),
            server,
        };
        let uri: hyper::Uri = format!("http://{}/", run.server.addr()).parse()?;
        tasks.spawn(drive(
            service,
            uri,
            setup,
            start,
            Arc::clone(&run.pool),
            Arc::clone(&run.tally),
        ));
        Ok(run)
    }

    /// Workers held now.
    fn held(&self, setup: &Setup) -> u32 {
        setup.workers - self.pool.available_permits() as u32
    }
}

/// Send a request every `1 / rate` until the run's length has passed, each
/// on a worker of `pool` if one is free; the requests still in flight at
/// the end are dropped with the task.
async fn drive(
    service: Guarded,
    uri: hyper::Uri,
    setup: Setup,
    start: Instant,
    pool: Arc<Semaphore>,
    tally: Arc<Tally>,
) {
    let mut requests = JoinSet::new();
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / setup.rate);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while start.elapsed() < setup.length {
        ticks.tick().await;
        let Ok(worker) = Arc::clone(&pool).try_acquire_owned() else {
            tally.unsent.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let held = setup.workers - pool.available_permits() as u32;
        tally.most.fetch_max(held, Ordering::Relaxed);
        tally.most_hanging.fetch_max(held, Ordering::Relaxed);
        let (service, uri, tally) = (service.clone(), uri.clone(), Arc::clone(&tally));
        requests.spawn(async move {
            let request = Request::get(uri).body(Empty::new()).expect("a request");
            let counter = match service.oneshot(request).await {
                Ok(response) if response.status() == 200 => {
                    let _ = response.into_body().collect().await;
                    &tally.ok
                }
                Ok(_) => &tally.failed,
                Err(CallError::TimedOut(_)) => &tally.timed_out,
                Err(CallError::Rejected(_)) => &tally.rejected,
                Err(_) => &tally.failed,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            drop(worker);
        });
        // Reap what has ended, so the set holds only what is in flight.
        while requests.try_join_next().is_some() {}
    }
    // Hold what is still in flight until the run is measured and this
    // task aborted.
    std::future::pending::<()>().await;
}

// ----- what is measured -----------------------------------------------------

/// One row of the table: one run over one interval.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    /// The end of the interval, from the start.
    pub(crate) elapsed: Duration,
    /// The attempt timeout in force at its end
    /// (`Limiter::timeouts().in_force`).
    pub(crate) timeout: Duration,
    /// The limiter's limit at its end.
    pub(crate) limit: u32,
    /// Workers held, mean (sampled every 10 ms).
    pub(crate) held_mean: f64,
    /// Workers held, most.
    pub(crate) held_max: u32,
    /// Of the workers held, those whose request the server is not
    /// answering, mean.
    pub(crate) hung_mean: f64,
    /// Requests answered 200, a second.
    pub(crate) goodput: f64,
    /// Requests timed out, a second.
    pub(crate) timed_out: f64,
    /// Requests refused by the limiter, a second.
    pub(crate) rejected: f64,
}

/// A run once the server hangs requests: from `Setup::healthy` to the end.
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    /// `typed` or `learned`.
    pub(crate) name: &'static str,
    /// Every row, from the start.
    pub(crate) rows: Vec<Row>,
    /// Requests answered 200 a second.
    pub(crate) goodput: f64,
    /// Workers held, mean.
    pub(crate) held_mean: f64,
    /// Workers held, most.
    pub(crate) held_max: u32,
    /// Workers held by requests the server is not answering, mean.
    pub(crate) hung_mean: f64,
    /// The timeout in force at the end.
    pub(crate) timeout: Duration,
    /// Requests not sent for want of a worker.
    pub(crate) unsent: u64,
    /// Requests that failed otherwise than by a timeout or a refusal.
    pub(crate) failed: u64,
}

impl Summary {
    /// Worker-seconds held for each request answered: how many workers a
    /// request a second answered costs.
    pub(crate) fn held_per_answer(&self) -> f64 {
        self.held_mean / self.goodput.max(f64::MIN_POSITIVE)
    }
}

/// Workers held, and of them those whose request hangs, summed over
/// samples.
#[derive(Clone, Copy, Default)]
struct Samples {
    count: u64,
    held: u64,
    hung: u64,
}

impl Samples {
    fn add(&mut self, held: u32, hung: u32) {
        self.count += 1;
        self.held += u64::from(held);
        self.hung += u64::from(hung);
    }

    fn means(&self) -> (f64, f64) {
        let count = self.count.max(1) as f64;
        (self.held as f64 / count, self.hung as f64 / count)
    }
}

/// Requests counted so far: answered, timed out, refused.
fn counts(tally: &Tally) -> [u64; 3] {
    [&tally.ok, &tally.timed_out, &tally.rejected].map(|c| c.load(Ordering::Relaxed))
}

fn print_header(setup: &Setup) {
    println!(
        "{} s at {} requests/s from {} workers; every request answered for the first {} s, \
         then {:.0}% never answered, the rest in {:?}–{:?}; Aimd::recommended(), \
         timeout typed {:?} or learned under that ceiling; seed {}",
        setup.length.as_secs(),
        setup.rate,
        setup.workers,
        setup.healthy.as_secs(),
        setup.hang * 100.0,
        setup.answer.0,
        setup.answer.1,
        setup.ceiling,
        setup.seed,
    );
    println!(
        "{:>7}  {:<8} {:>9} {:>5}  {:>9} {:>8} {:>9}  {:>9}  {:>11}  {:>10}",
        "elapsed",
        "run",
        "timeout",
        "limit",
        "held mean",
        "held max",
        "hung mean",
        "goodput/s",
        "timed out/s",
        "rejected/s"
    );
}

fn print_row(name: &str, row: &Row) {
    println!(
        "{:>5.1} s  {:<8} {:>9.1?} {:>5}  {:>9.1} {:>8} {:>9.1}  {:>9.1}  {:>11.1}  {:>10.1}",
        row.elapsed.as_secs_f64(),
        name,
        row.timeout,
        row.limit,
        row.held_mean,
        row.held_max,
        row.hung_mean,
        row.goodput,
        row.timed_out,
        row.rejected
    );
}

fn print_summary(setup: &Setup, typed: &Summary, learned: &Summary) {
    println!();
    println!(
        "from {} s (the first request that may hang) to {} s:",
        setup.healthy.as_secs(),
        setup.length.as_secs()
    );
    println!(
        "{:<8} {:>9}  {:>9} {:>8} {:>9}  {:>14}  {:>18}  {:>6}  {:>6}",
        "run",
        "goodput/s",
        "held mean",
        "held max",
        "hung mean",
        "held per ok/s",
        "timeout at the end",
        "unsent",
        "failed"
    );
    for s in [typed, learned] {
        println!(
            "{:<8} {:>9.1}  {:>9.1} {:>8} {:>9.1}  {:>14.3}  {:>18.1?}  {:>6}  {:>6}",
            s.name,
            s.goodput,
            s.held_mean,
            s.held_max,
            s.hung_mean,
            s.held_per_answer(),
            s.timeout,
            s.unsent,
            s.failed
        );
    }
    let ratio = |a: f64, b: f64| a / b.max(f64::MIN_POSITIVE);
    println!(
        "learned against typed: goodput {:.2}×; workers held {:.2}×, by hung requests {:.2}×, per request answered {:.2}×",
        ratio(learned.goodput, typed.goodput),
        ratio(learned.held_mean, typed.held_mean),
        ratio(learned.hung_mean, typed.hung_mean),
        ratio(learned.held_per_answer(), typed.held_per_answer()),
    );
}

/// Run the typed and the learned timeout side by side for `setup.length`,
/// printing a row per run every `setup.row_every`, then a summary of each
/// from `setup.healthy` on.
pub(crate) async fn compare(setup: Setup) -> Result<[Summary; 2], Box<dyn Error>> {
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    let runs = [
        Run::start(
            "typed",
            Timeout::Typed(setup.ceiling),
            setup,
            start,
            &mut tasks,
        )?,
        Run::start(
            "learned",
            Timeout::learned(setup.ceiling).into(),
            setup,
            start,
            &mut tasks,
        )?,
    ];
    print_header(&setup);
    let mut rows: [Vec<Row>; 2] = [Vec::new(), Vec::new()];
    // Since the last row, and since the server began to hang requests.
    let (mut interval, mut hanging) = ([Samples::default(); 2], [Samples::default(); 2]);
    let (mut seen, mut at_onset) = ([[0u64; 3]; 2], None);
    let mut last_row = Duration::ZERO;
    let mut sample = tokio::time::interval(Duration::from_millis(10));
    sample.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        sample.tick().await;
        let elapsed = start.elapsed().min(setup.length);
        let onset = elapsed >= setup.healthy;
        if onset && at_onset.is_none() {
            at_onset = Some(runs.each_ref().map(|run| counts(&run.tally)));
            for run in &runs {
                let held = run.held(&setup);
                run.tally.most_hanging.store(held, Ordering::Relaxed);
            }
        }
        for (i, run) in runs.iter().enumerate() {
            let (held, hung) = (run.held(&setup), run.server.hanging.load(Ordering::Relaxed));
            interval[i].add(held, hung);
            if onset {
                hanging[i].add(held, hung);
            }
        }
        let due = elapsed >= setup.length || elapsed - last_row >= setup.row_every;
        if !due {
            continue;
        }
        let secs = (elapsed - last_row).as_secs_f64();
        last_row = elapsed;
        for (i, run) in runs.iter().enumerate() {
            let now = counts(&run.tally);
            let [ok, timed_out, rejected] = [0, 1, 2].map(|k| (now[k] - seen[i][k]) as f64 / secs);
            seen[i] = now;
            let held_max = run.tally.most.swap(run.held(&setup), Ordering::Relaxed);
            let (held_mean, hung_mean) = interval[i].means();
            let row = Row {
                elapsed,
                timeout: run.limiter.timeouts().in_force.unwrap_or(Duration::ZERO),
                limit: run.limiter.gate().limit,
                held_mean,
                held_max,
                hung_mean,
                goodput: ok,
                timed_out,
                rejected,
            };
            print_row(run.name, &row);
            rows[i].push(row);
            interval[i] = Samples::default();
        }
        if elapsed >= setup.length {
            break;
        }
    }
    // The requests still in flight (the typed run's hung ones) are dropped
    // with the drivers.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    let at_onset = at_onset.unwrap_or_default();
    let secs = setup.length.saturating_sub(setup.healthy).as_secs_f64();
    let [typed, learned] = [0, 1].map(|i| {
        let run = &runs[i];
        let (held_mean, hung_mean) = hanging[i].means();
        Summary {
            name: run.name,
            rows: std::mem::take(&mut rows[i]),
            goodput: (seen[i][0] - at_onset[i][0]) as f64 / secs.max(f64::MIN_POSITIVE),
            held_mean,
            held_max: run.tally.most_hanging.load(Ordering::Relaxed),
            hung_mean,
            timeout: run.limiter.timeouts().in_force.unwrap_or(Duration::ZERO),
            unsent: run.tally.unsent.load(Ordering::Relaxed),
            failed: run.tally.failed.load(Ordering::Relaxed),
        }
    });
    print_summary(&setup, &typed, &learned);
    Ok([typed, learned])
}
