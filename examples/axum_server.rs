//! An axum server that sheds its own load under a burst, the critical
//! requests first served, the sheddable ones first refused.
//!
//! ```sh
//! cargo run --example axum_server
//! ```
//!
//! The server does its work on 8 workers, 20 ms a request: it serves about
//! 400 requests a second, and a request that finds every worker busy waits
//! for one, so its latency grows with the requests in flight. In front of
//! it, a [`ShedLayer`] admits requests through a `Gradient` limiter (at its
//! defaults), which learns the server's latency and keeps the requests in
//! flight near what the workers can take; a request that finds the limit
//! reached waits up to 50 ms, newest first, and one that cannot be served
//! in time is answered at once with a `503` and a `Retry-After`.
//!
//! A request's priority class comes from who sent it, not from what it
//! says: the `x-priority` header is written by the client, and any client
//! can write `critical-plus`. An authentication layer in front of the
//! shedding (a stand-in here: a bearer token names the caller) puts the
//! caller in the request's extensions; the shedding layer classifies by
//! it, and lets `x-priority` only lower the class ([`lower_only`]). The
//! checkout frontend is critical; the crawler is sheddable, and asks for
//! `critical-plus` on every request, to no avail; a request nobody vouched
//! for is of the least critical class.
//!
//! A driver in the same program warms the server up below its capacity,
//! then sends a burst at two and a half times it, half the requests from
//! the checkout frontend, half from the crawler, and prints how many of
//! each were served and shed, and how long the served ones took. It then
//! stops, in a few seconds.
//!
//! The server listens on 127.0.0.1, on a port of the system's choosing, or
//! on the address in `RHEOSTAT_ADDR` (`127.0.0.1:3000`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rheostat::algorithms::{Gradient, GradientConfig};
use rheostat::priority::{Class, Priorities, Priority};
use rheostat::tower::{lower_only, ShedLayer};
use tokio::sync::Semaphore;
use tower::util::MapRequestLayer;

/// The server's workers.
const WORKERS: usize = 8;
/// The work one request takes on a worker.
const WORK: Duration = Duration::from_millis(20);

/// Who is calling, as authentication found it.
#[derive(Clone, Copy)]
struct Caller {
    class: Class,
}

/// Stands for real authentication (a verified token, a client
/// certificate): the checkout frontend is critical, the crawler sheddable,
/// anyone else unknown.
fn authenticate(mut request: Request<Body>) -> Request<Body> {
    let priority = match request.headers().get("authorization").map(|v| v.as_bytes()) {
        Some(b"Bearer checkout") => Some(Priority::Critical),
        Some(b"Bearer crawler") => Some(Priority::Sheddable),
        _ => None,
    };
    if let Some(priority) = priority {
        request.extensions_mut().insert(Caller {
            class: priority.into(),
        });
    }
    request
}

/// A request's class as the server knows its caller: none (the least
/// critical class) if nobody vouched for it.
fn trusted(request: &Request<Body>) -> Option<Class> {
    request
        .extensions()
        .get::<Caller>()
        .map(|caller| caller.class)
}

/// The class a request asks for in its `x-priority` header: it may lower
/// the trusted class, never raise it.
fn asked(request: &Request<Body>) -> Option<Class> {
    Priority::parse(request.headers().get("x-priority")?).map(Class::from)
}

/// Waits for a worker, then works.
async fn work(State(workers): State<Arc<Semaphore>>) -> &'static str {
    let Ok(_worker) = workers.acquire().await else {
        return "closed";
    };
    tokio::time::sleep(WORK).await;
    "done"
}

/// How one request of the driver's ended.
struct Answer {
    /// The class its caller is owed: critical for the checkout frontend,
    /// sheddable for the crawler.
    priority: Priority,
    status: u16,
    retry_after: bool,
    latency: Duration,
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// Sends `per_tick` requests every `tick` for `length`, alternating the
/// checkout frontend and the crawler (which asks for `critical-plus`), and
/// waits for every answer.
async fn drive(
    client: &HttpClient,
    url: &str,
    tick: Duration,
    per_tick: usize,
    length: Duration,
) -> Vec<Answer> {
    let mut ticks = tokio::time::interval(tick);
    let start = Instant::now();
    let mut sent = Vec::new();
    while start.elapsed() < length {
        ticks.tick().await;
        for _ in 0..per_tick {
            let (priority, request) = if sent.len() % 2 == 0 {
                let request = Request::get(url).header("authorization", "Bearer checkout");
                (Priority::Critical, request)
            } else {
                let request = Request::get(url)
                    .header("authorization", "Bearer crawler")
                    .header("x-priority", "critical-plus");
                (Priority::Sheddable, request)
            };
            let request = request.body(Empty::new());
            let client = client.clone();
            sent.push(tokio::spawn(async move {
                let began = Instant::now();
                let response = client.request(request.ok()?).await.ok()?;
                Some(Answer {
                    priority,
                    status: response.status().as_u16(),
                    retry_after: response.headers().contains_key("retry-after"),
                    latency: began.elapsed(),
                })
            }));
        }
    }
    let mut answers = Vec::new();
    for request in sent {
        if let Ok(Some(answer)) = request.await {
            answers.push(answer);
        }
    }
    answers
}

/// The `q` quantile of `latencies`, sorted.
fn quantile(latencies: &[Duration], q: f64) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let at = ((latencies.len() - 1) as f64 * q).round() as usize;
    latencies[at]
}

fn report(phase: &str, answers: &[Answer]) {
    println!("{phase}: {} requests", answers.len());
    for (priority, caller) in [
        (Priority::Critical, "checkout"),
        (Priority::Sheddable, "crawler"),
    ] {
        let ours: Vec<&Answer> = answers.iter().filter(|a| a.priority == priority).collect();
        let mut served: Vec<Duration> = ours
            .iter()
            .filter(|a| a.status == 200)
            .map(|a| a.latency)
            .collect();
        served.sort();
        let shed = ours
            .iter()
            .filter(|a| a.status == 503 && a.retry_after)
            .count();
        let other = ours.len() - served.len() - shed;
        println!(
            "  {caller:<8} ({:<9}) served {:>4}  shed (503 + Retry-After) {:>4}  other {:>3}  served p50 {:>6.1?}  p99 {:>6.1?}",
            priority.as_str(),
            served.len(),
            shed,
            other,
            quantile(&served, 0.5),
            quantile(&served, 0.99),
        );
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limiter = Arc::new(
        ShedLayer::server_limiter(Gradient::new(GradientConfig::default())?)
            .name("axum-server")
            .max_wait(Duration::from_millis(50))
            .priorities(Priorities::default())
            .build()?,
    );
    let app = Router::new()
        .route("/work", get(work))
        .with_state(Arc::new(Semaphore::new(WORKERS)))
        .layer(ShedLayer::new(Arc::clone(&limiter)).classify_request(lower_only(trusted, asked)))
        // Outermost, so it runs first.
        .layer(MapRequestLayer::new(authenticate));

    let addr = std::env::var("RHEOSTAT_ADDR").unwrap_or_else(|_| "127.0.0.1:0".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let url = format!("http://{}/work", listener.local_addr()?);
    println!(
        "serving {url}: {WORKERS} workers, {WORK:?} a request (about {} a second)",
        WORKERS as u128 * 1000 / WORK.as_millis()
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    // Below capacity: 200 a second for one second, so the limiter learns
    // the server's latency unloaded.
    let warm = drive(
        &client,
        &url,
        Duration::from_millis(5),
        1,
        Duration::from_secs(1),
    )
    .await;
    report("warm-up, 200 a second", &warm);
    println!("  limit now {}", limiter.gate().limit);

    // Two and a half times capacity: 1000 a second for two seconds, the
    // limit read every 250 ms meanwhile.
    let watch = Arc::clone(&limiter);
    let limits = tokio::spawn(async move {
        let mut limits = Vec::new();
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            limits.push(watch.gate().limit);
        }
        limits
    });
    let burst = drive(
        &client,
        &url,
        Duration::from_millis(2),
        2,
        Duration::from_secs(2),
    )
    .await;
    report("burst, 1000 a second", &burst);
    println!("  limit every 250 ms: {:?}", limits.await?);
    println!("  after: {} in flight", limiter.in_flight());

    server.abort();
    Ok(())
}
