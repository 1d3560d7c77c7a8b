//! An operator's admin endpoint for a fleet's overrides, over HTTP (axum):
//! `GET /limiters` lists this instance's limiters with their state and
//! override; `PUT /overrides` publishes a fleet's overrides (a JSON list,
//! as a file's `[[overrides]]` writes them) through Redis to every
//! instance, `DELETE /overrides` clears them. Shared by
//! `examples/fleet_admin.rs` and `tests/fleet_redis.rs`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use rheostat::config::fleet;
use rheostat::config::{LiveLimiters, OverrideConfig};

/// What the handlers share: this instance's limiters, and the store.
#[derive(Clone)]
struct Admin {
    live: Arc<LiveLimiters>,
    redis: redis::Client,
    prefix: String,
}

/// The endpoint's routes.
pub(crate) fn router(live: Arc<LiveLimiters>, redis: redis::Client, prefix: &str) -> Router {
    Router::new()
        .route("/limiters", get(list))
        .route("/overrides", axum::routing::put(set).delete(clear))
        .with_state(Admin {
            live,
            redis,
            prefix: prefix.to_owned(),
        })
}

/// Each limiter: its policy, the limit enforced (`null`: none) and the
/// policy's own, calls in flight, breaker state and override in force
/// (with the seconds it has left), as JSON.
async fn list(State(admin): State<Admin>) -> String {
    let now = Instant::now();
    let limiters: Vec<serde_json::Value> = admin
        .live
        .names()
        .into_iter()
        .filter_map(|name| {
            let limiter = admin.live.get(&name)?;
            let snapshot = limiter.snapshot();
            Some(serde_json::json!({
                "name": name,
                "policy": snapshot.policy,
                "limit": limiter.gate().max_in_flight(),
                "policy_limit": snapshot.gate.max_in_flight(),
                "in_flight": limiter.in_flight(),
                "breaker": snapshot.state.map(|s| s.as_str()),
                "override": snapshot.overridden.map(|(o, until)| serde_json::json!({
                    "kind": o.as_str(),
                    "seconds_left": until.saturating_duration_since(now).as_secs(),
                })),
            }))
        })
        .collect();
    serde_json::json!({ "limiters": limiters }).to_string()
}

/// Publish the body's overrides to the fleet; the version written.
async fn set(State(admin): State<Admin>, body: String) -> (StatusCode, String) {
    match serde_json::from_str::<Vec<OverrideConfig>>(&body) {
        Ok(overrides) => publish(&admin, overrides).await,
        Err(e) => (
            StatusCode::BAD_REQUEST,
            format!("not a list of overrides: {e}\n"),
        ),
    }
}

/// Clear the fleet's overrides.
async fn clear(State(admin): State<Admin>) -> (StatusCode, String) {
    publish(&admin, Vec::new()).await
}

async fn publish(admin: &Admin, overrides: Vec<OverrideConfig>) -> (StatusCode, String) {
    let written = async {
        let mut connection = admin.redis.get_multiplexed_async_connection().await?;
        fleet::publish(&mut connection, &admin.prefix, overrides).await
    };
    match written.await {
        Ok(version) => (StatusCode::OK, format!("{{\"version\":{version}}}\n")),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the store did not take it: {e}\n"),
        ),
    }
}
