//! Both ends of a gRPC dependency over loopback, with tonic: a server behind
//! `ShedLayer`, a client behind `RheostatLayer` classifying by `grpc-status`
//! with `GrpcClassifier`. Prints what each side saw.
//!
//! ```sh
//! cargo run --example grpc
//! ```
//!
//! The messages and the client and server glue are written by hand as
//! `tonic-build` would generate them (`tests/support/grpc.rs`), so nothing
//! needs `protoc`.

#![allow(clippy::unwrap_used, reason = "an example stops on the first surprise")]

#[path = "../tests/support/grpc.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
use rheostat::algorithms::Fixed;
use rheostat::tower::{GrpcClassifier, RheostatLayer, ShedLayer};
use rheostat::Limiter;
use support::{channel, serve_with, Ask, EchoClient, EchoServer};
use tonic::Code;
use tower::Layer;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // The server: at most 4 calls in its handlers, the rest refused at once
    // as gRPC expects (UNAVAILABLE, trailers-only, with a pushback).
    let server = EchoServer::default();
    let server_limiter = Arc::new(
        Limiter::builder(Fixed::new(4).unwrap())
            .name("echo-server")
            .build()
            .unwrap(),
    );
    let shed = ShedLayer::new(Arc::clone(&server_limiter))
        .fail_fast()
        .retry_after(Duration::from_millis(500));
    let addr = serve_with(server.clone(), shed).await;
    println!("server: listening on {addr}, 4 calls at a time");

    // The client: a breaker in front of the dependency, each call's permit
    // held until its status arrives.
    let limiter = Arc::new(
        Limiter::builder(Breaker::new(BreakerConfig::recommended()).unwrap())
            .name("echo")
            .build()
            .unwrap(),
    );
    let layer = RheostatLayer::new(Arc::clone(&limiter))
        .classify(GrpcClassifier::new())
        .timeout(Duration::from_secs(2))
        .unwrap();
    let mut client = EchoClient::new(layer.layer(channel(addr).await));

    // 1. A stream whose status comes 300 ms after its first message.
    let started = Instant::now();
    let mut stream = client
        .stream(Ask {
            messages: 1,
            delay_ms: 300,
            ..Ask::default()
        })
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap();
    println!(
        "client: first message after {:.0} ms, permits held: {}",
        ms(started.elapsed()),
        limiter.in_flight()
    );
    while stream.message().await.unwrap().is_some() {}
    println!(
        "client: status OK after {:.0} ms, permits held: {}",
        ms(started.elapsed()),
        limiter.in_flight()
    );

    // 2. The server refuses: its slots are all taken.
    let busy: Vec<_> = (0..4)
        .map(|_| server_limiter.try_acquire().unwrap())
        .collect();
    let served = server.served();
    let status = client.call(Ask::default()).await.unwrap_err();
    println!(
        "client: refused by the server with {:?}, pushback {} ms; reached its handler: {}",
        status.code(),
        status
            .metadata()
            .get("grpc-retry-pushback-ms")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("no"),
        if server.served() > served {
            "yes"
        } else {
            "no"
        },
    );
    println!("        its message: {}", status.message());
    drop(busy);

    // 3. The dependency answers UNAVAILABLE to everything, each answer an
    //    HTTP 200: the statuses open the breaker, which then refuses calls
    //    without sending them.
    let before = server.served();
    let (mut unavailable, mut refused) = (0, 0);
    for _ in 0..30 {
        match client.call(Ask::code(Code::Unavailable)).await {
            Err(status) if status.code() == Code::Unavailable => unavailable += 1,
            Err(_) => refused += 1,
            Ok(_) => {}
        }
    }
    println!("client: 30 calls to a dependency answering UNAVAILABLE to everything:");
    println!(
        "        {unavailable} answered so, {refused} refused by the client's breaker \
         (now {}), {} reached the server",
        limiter.snapshot().state.map_or_else(
            || "no breaker".to_owned(),
            |s| format!("{s:?}").to_lowercase()
        ),
        server.served() - before,
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
