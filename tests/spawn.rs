//! The tower layer's service can be spawned whatever limiter it holds: a
//! `DynLimiter` (every limiter from a configuration file is one), one built
//! from a file, one from `KeyedLimiters`, waiting or failing fast, with or
//! without a timeout. Each future is moved into `tokio::spawn` inside an
//! `async` block, as users write it; if the service's future stops being
//! provably `Send` there, this file does not compile.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::Request;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rheostat::algorithms::{Algorithm, Fixed};
use rheostat::config::LimitersConfig;
use rheostat::tower::{HttpClassifier, RheostatLayer};
use rheostat::{CallError, DynLimiter, Limiter};
use tower::{Layer, ServiceExt};

const FILE: &str = r#"
[default.policy]
policy = "gradient"

[limiters.payments.policy]
policy = "aimd"
"#;

/// A loopback address nothing listens on: every request is refused at once.
fn refusing() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
    // dropped here: the port refuses connections
}

fn client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>()
}

fn request(addr: SocketAddr) -> Request<Empty<Bytes>> {
    Request::get(format!("http://{addr}/"))
        .body(Empty::<Bytes>::new())
        .unwrap()
}

/// Spawn one call through the layer over `limiter` (with a timeout, and
/// waiting for a slot if `wait`); the connection is refused, so the call
/// fails and its slot comes back.
async fn spawn_one(limiter: Arc<DynLimiter>, wait: bool) {
    let mut layer = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .timeout(Duration::from_secs(5))
        .unwrap();
    if wait {
        layer = layer.wait();
    }
    let service = layer.layer(client());
    let addr = refusing();
    let task = tokio::spawn(async move {
        let answer = service.oneshot(request(addr)).await;
        matches!(answer, Err(CallError::Failed(_)))
    });
    assert!(task.await.unwrap(), "the refused connection is a failure");
    assert_eq!(limiter.in_flight(), 0, "the slot came back");
}

#[tokio::test]
async fn over_a_dyn_limiter() {
    let policy: Box<dyn Algorithm> = Box::new(Fixed::new(4).unwrap());
    let limiter = Arc::new(Limiter::builder(policy).build().unwrap());
    spawn_one(Arc::clone(&limiter), false).await;
    spawn_one(limiter, true).await;
}

#[tokio::test]
async fn over_a_limiter_from_a_file() {
    let file = LimitersConfig::from_toml(FILE).unwrap();
    let limiter = Arc::new(file.build("payments").unwrap());
    spawn_one(Arc::clone(&limiter), false).await;
    spawn_one(limiter, true).await;
}

#[tokio::test]
async fn over_a_keyed_limiter() {
    let file = LimitersConfig::from_toml(FILE).unwrap();
    let keyed = file.keyed().build().unwrap();
    spawn_one(keyed.get("payments").unwrap(), false).await;
    spawn_one(keyed.get("search").unwrap(), true).await;
}

/// Without the layer's timeout and without the HTTP classifier: the plainest
/// service over a `DynLimiter`, spawned with its `oneshot` future directly.
#[tokio::test]
async fn plain_oneshot() {
    let policy: Box<dyn Algorithm> = Box::new(Fixed::new(1).unwrap());
    let limiter = Arc::new(Limiter::builder(policy).build().unwrap());
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .layer(client());
    let task = tokio::spawn(service.oneshot(request(refusing())));
    assert!(matches!(task.await.unwrap(), Err(CallError::Failed(_))));
    assert_eq!(limiter.in_flight(), 0);
}

/// The keyed layer, by host, over keyed limiters from a file.
#[tokio::test]
async fn the_keyed_layer() {
    use rheostat::tower::KeyedLayer;

    let file = LimitersConfig::from_toml(FILE).unwrap();
    let hosts = Arc::new(file.keyed().build().unwrap());
    let by_host = |r: &Request<Empty<Bytes>>| r.uri().host().unwrap_or_default().to_owned();
    let service = KeyedLayer::new(Arc::clone(&hosts), by_host)
        .classify(HttpClassifier::new())
        .timeout(Duration::from_secs(5))
        .unwrap()
        .layer(client());
    let addr = refusing();
    let task = tokio::spawn(async move {
        let answer = service.oneshot(request(addr)).await;
        matches!(answer, Err(CallError::Failed(_)))
    });
    assert!(task.await.unwrap());
    assert_eq!(hosts.get("127.0.0.1").unwrap().in_flight(), 0);
}
