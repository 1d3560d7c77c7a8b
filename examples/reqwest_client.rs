//! A reqwest client calling a flaky payment provider through a limiter: the
//! provider (an axum server on loopback) answers its first 20 requests, then
//! 503 to everything. The default breaker opens once half the calls in its
//! window have failed (here the 20th 503), and from then on each request is
//! refused at once, without being sent, and served a fallback.
//!
//! ```sh
//! cargo run --example reqwest_client --features reqwest
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Error};
use rheostat::algorithms::{Breaker, BreakerConfig};
use rheostat::reqwest::RheostatMiddleware;
use rheostat::{Limiter, Rejection};

/// What a charge came to.
enum Charge {
    Done,
    Failed(StatusCode),
    /// Not sent: the limiter refused it.
    Deferred(Rejection),
}

async fn charge(client: &ClientWithMiddleware, url: &str) -> Result<Charge, Error> {
    match client.post(url).body("{\"cents\": 1200}").send().await {
        Ok(response) if response.status().is_success() => Ok(Charge::Done),
        Ok(response) => Ok(Charge::Failed(response.status())),
        // The fallback: queue the charge for later instead of failing it.
        Err(Error::Middleware(error)) if error.is::<Rejection>() => {
            let rejection = error.downcast::<Rejection>().map_err(Error::Middleware)?;
            Ok(Charge::Deferred(rejection))
        }
        Err(error) => Err(error),
    }
}

/// A provider that answers its first `healthy` requests, then 503.
async fn provider(healthy: u64) -> std::io::Result<SocketAddr> {
    let seen = Arc::new(AtomicU64::new(0));
    let app = axum::Router::new().fallback(move || {
        let n = seen.fetch_add(1, Ordering::Relaxed);
        async move {
            if n < healthy {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = format!("http://{}/charges", provider(20).await?);

    // One limiter per dependency: the recommended breaker, and a 2 s
    // timeout for each attempt.
    let payments = Arc::new(
        Limiter::builder(Breaker::new(BreakerConfig::default())?)
            .name("payments")
            .timeout(Duration::from_secs(2))
            .build()?,
    );
    let client = ClientBuilder::new(reqwest::Client::builder().no_proxy().build()?)
        .with(RheostatMiddleware::new(Arc::clone(&payments)))
        .build();

    // Each change of outcome, then the count of each.
    let (mut done, mut failed, mut deferred) = (0, 0, 0);
    let mut last = "";
    for n in 1..=60 {
        let outcome = charge(&client, &url).await?;
        let (kind, said) = match &outcome {
            Charge::Done => {
                done += 1;
                ("done", "done".to_string())
            }
            Charge::Failed(status) => {
                failed += 1;
                ("failed", format!("failed: {status}"))
            }
            Charge::Deferred(rejection) => {
                deferred += 1;
                ("deferred", format!("deferred, not sent: {rejection}"))
            }
        };
        if kind != last {
            println!("charge {n:>2}: {said}");
            last = kind;
        }
    }
    println!("60 charges: {done} done, {failed} failed, {deferred} deferred without being sent");
    Ok(())
}
