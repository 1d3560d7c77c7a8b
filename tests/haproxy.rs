//! A real reverse proxy in front of a dependency that slows down: HAProxy
//! on loopback, its one server the loopback test server
//! (`tests/support/open_loop.rs`) with `maxconn 20` and a 1 s queue
//! timeout, called through the tower layer over hyper with each policy at
//! its defaults, beside the same run with no limit.
//!
//! ```sh
//! scripts/haproxy.sh   # installs Debian's haproxy when missing
//! cargo test --release --test haproxy -- --ignored --nocapture
//! ```
//!
//! The server answers in 40 ms for 10 s (20 slots serve 500 calls/s), then
//! in 300 ms for 20 s (about 66 calls/s). The client sends 150 calls/s,
//! open loop, each with a 2 s timeout. Without a limit the proxy's queue
//! keeps its 20 slots busy and answers what waited over 1 s with a 503; a
//! limiter that finds the 20 slots keeps what it sends out of that queue.
//!
//! A row per policy: the share of the slowed server's capacity served
//! (calls answered 200 from the slowdown to the end, over what 20 slots
//! serve at the server's measured time per call), the p99 latency of
//! those answered, the share of the healthy phase's calls the limiter
//! refused, the limit at the slowdown, 1, 2 and 5 s after it and at the
//! end, and when it first came to 25 or below. Asserts only what makes
//! the figures mean something: the proxy queued (the run without a limit
//! served its capacity and waited over 1 s at its p99) and no call failed
//! to connect. Five runs of 30 s of real time, so the test is ignored by
//! default and CI does not run it; it needs `haproxy` on the `PATH`.
//! `docs/results.md`'s "Behind HAProxy" has the measured figures.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "support/open_loop.rs"]
#[allow(
    dead_code,
    reason = "shared with another test, which uses parts this one does not"
)]
mod open_loop;

use std::future::Future;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use open_loop::{Answer, Load, Outcome, Run, Server};
use rheostat::algorithms::{
    Fixed, Gradient, GradientConfig, Throttle, ThrottleConfig, Vegas, VegasConfig, MAX_LIMIT,
};
use rheostat::{Algorithm, Limiter};

/// The server's slots behind the proxy.
const SLOTS: u32 = 20;
const HEALTHY: Duration = Duration::from_millis(40);
const SLOW: Duration = Duration::from_millis(300);
/// When the server slows down, after the start.
const ONSET: Duration = Duration::from_secs(10);
const LOAD: Load = Load {
    rate: 150.0,
    length: Duration::from_secs(30),
    timeout: Duration::from_secs(2),
};
/// "About the slots": a limit this low has found them.
const FOUND: u32 = 25;

// ----- the proxy ------------------------------------------------------------

/// An `haproxy` process on 127.0.0.1, its configuration in a directory of
/// its own. Killed, and its directory removed, when dropped.
struct HaProxy {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

impl HaProxy {
    /// Start one in front of `backend` on a free port, and wait until it
    /// accepts connections.
    ///
    /// Not Debian's `/etc/haproxy/haproxy.cfg`: no daemon, chroot, user,
    /// stats socket or syslog, one thread, and the timeouts below. As
    /// there, `option abortonclose` is off: a request whose caller gave
    /// up keeps its server slot until the server answers.
    fn start(backend: SocketAddr) -> HaProxy {
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let dir =
            std::env::temp_dir().join(format!("rheostat-haproxy-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            "global
    maxconn 4096
    nbthread 1

defaults
    mode http
    maxconn 4096
    timeout connect 1s
    timeout client 10s
    timeout server 10s
    timeout queue 1s
    timeout http-keep-alive 10s

frontend callers
    bind {addr}
    default_backend dependency

backend dependency
    server dependency {backend} maxconn {SLOTS}
"
        );
        std::fs::write(dir.join("haproxy.cfg"), config).unwrap();
        let log = std::fs::File::create(dir.join("haproxy.log")).unwrap();
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(dir.join("haproxy.cfg"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("haproxy: {e} (scripts/haproxy.sh installs it)"));
        let mut proxy = HaProxy { child, dir, addr };
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(addr).is_err() {
            let exited = proxy.child.try_wait().unwrap();
            if exited.is_some() || Instant::now() > deadline {
                let log = std::fs::read_to_string(proxy.dir.join("haproxy.log"));
                panic!("haproxy did not start ({exited:?}): {log:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        proxy
    }

    fn uri(&self) -> hyper::Uri {
        format!("http://{}/", self.addr).parse().unwrap()
    }
}

impl Drop for HaProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ----- one row --------------------------------------------------------------

/// What one policy's run came to.
#[derive(Debug)]
struct Row {
    name: &'static str,
    /// Answered 200 from the slowdown to the end, over what the slots
    /// serve at the server's measured time per call.
    capacity: f64,
    /// The server's mean time per call after the slowdown.
    held: Duration,
    /// Of the calls sent after the slowdown, answered 200.
    p99: Duration,
    /// Of the calls sent before the slowdown, the share refused.
    healthy_refused: f64,
    /// Of the calls sent after it: the shares answered 503 (by the proxy,
    /// after its queue), timed out and refused.
    after: [f64; 3],
    failed: usize,
    /// The limit at the slowdown, 1, 2 and 5 s after it and at the end;
    /// `None` for no limit.
    limits: [Option<u32>; 5],
    /// How long after the slowdown the limit first came to [`FOUND`] or
    /// below.
    found: Option<Duration>,
    run: Run,
}

async fn row<A>(name: &'static str, limiter: Limiter<A>) -> Row
where
    A: Algorithm + Sync + 'static,
{
    // Time for the proxy to start; the server's schedule and the load
    // both count from here.
    let start = Instant::now() + Duration::from_secs(2);
    let server = Server::start(start, |at, _| Answer {
        delay: if at < ONSET { HEALTHY } else { SLOW },
        status: 200,
    })
    .unwrap();
    let proxy = HaProxy::start(server.addr());
    assert!(Instant::now() < start, "haproxy took over 2 s to start");
    let run = open_loop::run(limiter, proxy.uri(), LOAD, start).await;
    drop(proxy);

    let slowed: Vec<Duration> = server
        .served()
        .iter()
        .filter(|s| s.arrived >= ONSET)
        .map(|s| s.held)
        .collect();
    let held = slowed.iter().sum::<Duration>() / slowed.len().max(1) as u32;
    let span = LOAD.length - ONSET;
    let could = f64::from(SLOTS) * span.as_secs_f64() / held.as_secs_f64();
    let served = run
        .records
        .iter()
        .filter(|r| r.ok() && r.ended >= ONSET && r.ended < LOAD.length)
        .count();
    let (before, after): (Vec<&open_loop::Record>, Vec<_>) =
        run.records.iter().partition(|r| r.sent < ONSET);
    let share = |records: &[&open_loop::Record], outcome: Outcome| {
        records.iter().filter(|r| r.outcome == outcome).count() as f64 / records.len().max(1) as f64
    };
    let mut latencies: Vec<Duration> = after
        .iter()
        .filter(|r| r.ok())
        .map(|r| r.latency())
        .collect();
    let limit_at = |at: Duration| {
        run.samples
            .iter()
            .take_while(|s| s.at <= at)
            .last()
            .and_then(|s| s.limit)
    };
    let found = run
        .samples
        .iter()
        .find(|s| s.at >= ONSET && s.limit.is_some_and(|l| l <= FOUND))
        .map(|s| s.at.saturating_sub(ONSET));
    Row {
        name,
        capacity: served as f64 / could,
        held,
        p99: open_loop::percentile(&mut latencies, 0.99),
        healthy_refused: share(&before, Outcome::Refused),
        after: [
            share(&after, Outcome::Answered(503)),
            share(&after, Outcome::TimedOut),
            share(&after, Outcome::Refused),
        ],
        failed: run
            .records
            .iter()
            .filter(|r| r.outcome == Outcome::Failed)
            .count(),
        limits: [0, 1, 2, 5, 20].map(|s| limit_at(ONSET + Duration::from_secs(s))),
        found,
        run,
    }
}

/// A policy's row: its name and how its run is made. Adding a row is
/// adding an entry.
type Measure = fn() -> Pin<Box<dyn Future<Output = Row>>>;

fn rows() -> [Measure; 5] {
    [
        || {
            Box::pin(row(
                "no limit",
                Limiter::new(Fixed::new(MAX_LIMIT).unwrap()),
            ))
        },
        || Box::pin(row("recommended", Limiter::recommended())),
        || {
            let vegas = Vegas::new(VegasConfig::default()).unwrap();
            Box::pin(row("vegas", Limiter::new(vegas)))
        },
        || {
            let gradient = Gradient::new(GradientConfig::default()).unwrap();
            Box::pin(row("gradient", Limiter::new(gradient)))
        },
        || {
            let throttle = Throttle::new(ThrottleConfig::default()).unwrap();
            Box::pin(row("throttle", Limiter::new(throttle)))
        },
    ]
}

fn limit(l: Option<u32>) -> String {
    l.map_or("-".to_owned(), |l| l.to_string())
}

/// The limit and what is in flight, every 500 ms from 1 s before the
/// slowdown to 6 s after it.
fn onset(row: &Row) -> String {
    let around = ONSET.saturating_sub(Duration::from_secs(1))..ONSET + Duration::from_secs(6);
    let mut out = Vec::new();
    for s in row.run.samples.iter().filter(|s| around.contains(&s.at)) {
        if s.at.as_millis() % 500 < 50 {
            out.push(format!("{}/{}", limit(s.limit), s.in_flight));
        }
    }
    out.join(" ")
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "five runs of 30 s of real time, and haproxy (scripts/haproxy.sh); use --release"]
async fn behind_haproxy_each_policy_meets_a_server_that_slows_from_40_to_300_ms() {
    let mut done = Vec::new();
    for measure in rows() {
        let row = measure().await;
        println!(
            "{}: limit/in flight every 0.5 s from 1 s before the slowdown",
            row.name
        );
        println!("  {}", onset(&row));
        done.push(row);
    }
    println!();
    println!(
        "{:<12} {:>5} {:>5} {:>7} {:>6} {:>4} {:>4} {:>4} {:>5} {:>4} {:>4} {:>4} {:>4} {:>5}",
        "",
        "cap.",
        "svc",
        "p99",
        "h.ref",
        "503",
        "t/o",
        "ref.",
        "limit",
        "+1s",
        "+2s",
        "+5s",
        "end",
        "<=25"
    );
    for row in &done {
        let [l0, l1, l2, l5, end] = row.limits.map(limit);
        let found = row
            .found
            .map_or("never".to_owned(), |d| format!("{:.1}s", d.as_secs_f64()));
        println!(
            "{:<12} {:>5.2} {:>3}ms {:>5}ms {:>5.1}% {:>3.0}% {:>3.0}% {:>3.0}% {l0:>5} {l1:>4} {l2:>4} {l5:>4} {end:>4} {found:>5}",
            row.name,
            row.capacity,
            row.held.as_millis(),
            row.p99.as_millis(),
            100.0 * row.healthy_refused,
            100.0 * row.after[0],
            100.0 * row.after[1],
            100.0 * row.after[2],
        );
    }
    println!(
        "cap.: answered 200 after the slowdown / what {SLOTS} slots serve at svc, the server's mean
time per call then; p99 of those answered; h.ref: refused before the slowdown; 503 (from the
proxy's queue), t/o (timed out), ref. (refused): of the calls sent after it; the limit at
the slowdown, after it and at the end; <=25: how long after the slowdown it first came to
{FOUND} or below (0.0s: it was already)"
    );

    let none = &done[0];
    assert!(none.capacity >= 0.8, "{}", none.capacity);
    assert!(none.p99 >= Duration::from_secs(1), "{:?}", none.p99);
    for row in &done {
        assert_eq!(row.failed, 0, "{}: calls failed to connect", row.name);
    }
}
