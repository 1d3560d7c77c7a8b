//! An operator's admin endpoint for a fleet's overrides: this instance's
//! limiters from a live file, following the fleet's overrides in Redis,
//! and an HTTP endpoint to list them and to set or clear an override for
//! every instance.
//!
//! ```sh
//! scripts/redis.sh && redis-server --port 6379 --save '' &
//! cargo run --example fleet_admin --features redis -- examples/policies.toml redis://127.0.0.1:6379/
//! curl localhost:8080/limiters
//! curl -X PUT localhost:8080/overrides -d '[{"limiter": "payments", "kind": "force_open", "until": "2026-12-03T00:00:00Z"}]'
//! curl -X DELETE localhost:8080/overrides
//! ```
//!
//! A list an instance would refuse (a limiter its file does not list, a
//! cap of 0, an end more than a week ahead, more than `MAX_OVERRIDES`) is
//! answered 400 with the field and the reason, and not published:
//!
//! ```sh
//! curl -X PUT localhost:8080/overrides -d '[{"limiter": "payments", "kind": "cap", "cap": 0, "until": "2026-12-03T00:00:00Z"}]'
//! # {"field":"overrides[0].cap","reason":"found 0, expected a whole number in [1, …]"}
//! ```
//!
//! `tests/fleet_redis.rs` runs the same endpoint over loopback against a
//! real Redis server.

use std::sync::Arc;
use std::time::Duration;

use rheostat::config::fleet::RedisOverrides;
use rheostat::config::LiveLimiters;

#[path = "../tests/support/admin.rs"]
mod admin;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(file), Some(url)) = (args.next(), args.next()) else {
        return Err("usage: fleet_admin FILE REDIS_URL [PORT]".into());
    };
    let port: u16 = args.next().map_or(Ok(8080), |p| p.parse())?;
    let live = Arc::new(LiveLimiters::load(&file)?);
    tokio::spawn(Arc::clone(&live).watch(Duration::from_secs(5)));
    tokio::spawn(RedisOverrides::new(&url, "rheostat", Arc::clone(&live))?.run());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    let redis = redis::Client::open(url.as_str())?;
    axum::serve(listener, admin::router(live, redis, "rheostat")).await?;
    Ok(())
}
