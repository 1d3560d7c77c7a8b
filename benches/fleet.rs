//! The call path beside a fleet's store: `try_acquire` and `success` on a
//! limiter whose overrides a `RedisOverrides` task follows (re-reading every
//! 10 ms), with Redis healthy, asleep (`DEBUG SLEEP` in a loop) and
//! stopped, beside the same limiter with no store at all. The store is
//! read beside the limiter, never by a call, so the four should not
//! differ beyond noise.
//!
//! `scripts/redis.sh && cargo bench --features redis --bench fleet`

use std::hint::black_box;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use rheostat::config::fleet::RedisOverrides;
use rheostat::config::LiveLimiters;

fn redis_server(port: u16) -> Child {
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server (scripts/redis.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut server = redis_server(port);
    let url = format!("redis://127.0.0.1:{port}/");
    let dir = std::env::temp_dir().join(format!("rheostat-bench-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let path = dir.join("limits.toml");
    std::fs::write(
        &path,
        "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 64\n",
    )
    .expect("the file");
    let bare = LiveLimiters::load(&path).expect("the file loads");
    let followed = Arc::new(LiveLimiters::load(&path).expect("the file loads"));
    let reader = RedisOverrides::new(&url, "bench", Arc::clone(&followed))
        .expect("a Redis URL")
        .every(Duration::from_millis(10));
    runtime.spawn(reader.run());
    std::thread::sleep(Duration::from_millis(200));

    let mut group = c.benchmark_group("try_acquire_and_success");
    let call = |live: &LiveLimiters| {
        let payments = live.get("payments").expect("listed");
        move || black_box(payments.try_acquire().expect("under the limit")).success()
    };
    group.bench_function("no store", |b| b.iter(call(&bare)));
    group.bench_function("store healthy", |b| b.iter(call(&followed)));
    let asleep = {
        let url = url.clone();
        runtime.spawn(async move {
            let Ok(client) = redis::Client::open(url) else {
                return;
            };
            let Ok(mut con) = client.get_multiplexed_async_connection().await else {
                return;
            };
            loop {
                let _: redis::RedisResult<()> = redis::cmd("DEBUG")
                    .arg("SLEEP")
                    .arg(1)
                    .query_async(&mut con)
                    .await;
            }
        })
    };
    group.bench_function("store asleep", |b| b.iter(call(&followed)));
    asleep.abort();
    let _ = server.kill();
    let _ = server.wait();
    group.bench_function("store stopped", |b| b.iter(call(&followed)));
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
