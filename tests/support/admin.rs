//! An operator's admin endpoint for a fleet's overrides, over HTTP (axum):
//! `GET /limiters` lists this instance's limiters with their state and
//! override; `PUT /overrides` publishes a fleet's overrides (a JSON list,
//! as a file's `[[overrides]]` writes them) through Redis to every
//! instance, `DELETE /overrides` clears them. A list is checked first as
//! every instance will check it ([`LiveLimiters::check_fleet_overrides`],
//! against this instance's file): one they would refuse is answered 400
//! with the field and the reason, as JSON, and not published. Shared by
//! `examples/fleet_admin.rs` and `tests/fleet_redis.rs`.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

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

/// Publish the body's overrides to the fleet, if every instance would
/// take them; the version written.
async fn set(State(admin): State<Admin>, body: String) -> (StatusCode, String) {
    let overrides = match serde_json::from_str::<Vec<OverrideConfig>>(&body) {
        Ok(overrides) => overrides,
        Err(e) => {
            return refused(
                &format!("line {} column {}", e.line(), e.column()),
                &format!("not a list of overrides: {e}"),
            )
        }
    };
    if let Err(e) = admin
        .live
        .check_fleet_overrides(&overrides, SystemTime::now())
    {
        return refused(
            e.field(),
            &format!("found {}, expected {}", e.found(), e.allowed()),
        );
    }
    publish(&admin, overrides).await
}

/// 400, with the field at fault and why, as JSON.
fn refused(field: &str, reason: &str) -> (StatusCode, String) {
    let body = serde_json::json!({ "field": field, "reason": reason });
    (StatusCode::BAD_REQUEST, format!("{body}\n"))
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
