//! gRPC over real loopback: a tonic client behind `RheostatLayer` (with a
//! `GrpcClassifier`, classifying at the end of the body) calling a tonic
//! server on 127.0.0.1 whose handler is told to be slow, to fail with any
//! status, or to hang; and a tonic server behind `ShedLayer`.
//!
//! Asserts: each of the 17 statuses is classified as `GrpcClassifier`'s
//! table says, whether it comes in the headers (a trailers-only response)
//! or in the trailers after a message; the permit is held until the status
//! comes, and the latency the limiter learns runs to the status; a server
//! answering `UNAVAILABLE` to everything opens a breaker and cuts an
//! adaptive limit; a call refused by either layer never reaches the
//! handler, and a server's refusal is the gRPC status a client expects,
//! with its pushback; no permit leaks when a stream or a call is dropped,
//! and a status that never comes is cut by the layer's timeout; a retrying
//! `Limiter::call` honours the server's pushback as gRPC's retry design
//! says; a configuration file's `grpc` table makes the classifier.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "support/grpc.rs"]
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rheostat::algorithms::breaker::{Breaker, BreakerConfig, BreakerState};
use rheostat::algorithms::{Aimd, AimdConfig, AimdMode, Algorithm, Fixed};
use rheostat::config::LimitersConfig;
use rheostat::grpc::GrpcCode;
use rheostat::keyed::KeyedLimiters;
use rheostat::priority::{Class, Priorities, Priority};
use rheostat::retry::{Backoff, RetryConfig};
use rheostat::tower::{GrpcClassifier, KeyedLayer, Rheostat, RheostatLayer, ShedLayer};
use rheostat::{CallError, Limiter, Observer, Outcome};
use support::{channel, serve, serve_with, Ask, EchoClient, EchoServer};
use tonic::Code;
use tower::Layer;

/// Every outcome the limiter recorded, with its latency.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(Outcome, Duration)>>>);

impl Observer for Seen {
    fn finished(&self, outcome: Outcome, latency: Duration, _in_flight: u32) {
        self.0.lock().unwrap().push((outcome, latency));
    }
}

impl Seen {
    fn outcomes(&self) -> Vec<Outcome> {
        self.0.lock().unwrap().iter().map(|(o, _)| *o).collect()
    }
    fn last(&self) -> (Outcome, Duration) {
        *self.0.lock().unwrap().last().unwrap()
    }
    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

/// A limiter of `limit` whose outcomes `seen` records.
fn recorded(limit: u32, seen: &Seen) -> Arc<Limiter<Fixed>> {
    Arc::new(
        Limiter::builder(Fixed::new(limit).unwrap())
            .observer(seen.clone())
            .build()
            .unwrap(),
    )
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// Reads a stream to its status: the messages, then `Ok` or the error.
async fn drain(stream: &mut tonic::codec::Streaming<support::Reply>) -> (u32, Result<(), Code>) {
    let mut messages = 0;
    loop {
        match stream.message().await {
            Ok(Some(_)) => messages += 1,
            Ok(None) => return (messages, Ok(())),
            Err(status) => return (messages, Err(status.code())),
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn each_status_is_classified_as_the_table_says_from_the_headers_and_from_the_trailers() {
    let server = EchoServer::default();
    let addr = serve(server.clone()).await;
    let seen = Seen::default();
    let limiter = recorded(8, &seen);
    let layer = RheostatLayer::new(Arc::clone(&limiter)).classify(GrpcClassifier::new());
    let mut client = EchoClient::new(layer.layer(channel(addr).await));
    let table = GrpcClassifier::new();

    for code in GrpcCode::ALL {
        let expected = table.outcome(code, Duration::ZERO);
        let ask = Ask {
            code: code.as_i32(),
            ..Ask::default()
        };
        // Unary: a failure is trailers-only (its status in the headers);
        // OK comes in the trailers after the reply.
        seen.clear();
        let answer = client.call(ask.clone()).await;
        assert_eq!(
            answer.map(|_| ()).map_err(|s| s.code() as i32),
            if code == GrpcCode::Ok {
                Ok(())
            } else {
                Err(code.as_i32())
            }
        );
        assert_eq!(seen.outcomes(), [expected], "unary {code}");
        assert_eq!(limiter.in_flight(), 0);

        // Streaming: two messages, then the status in the trailers.
        seen.clear();
        let mut stream = client
            .stream(Ask { messages: 2, ..ask })
            .await
            .unwrap()
            .into_inner();
        let (messages, end) = drain(&mut stream).await;
        assert_eq!(messages, 2);
        assert_eq!(
            end.map_err(|c| c as i32),
            if code == GrpcCode::Ok {
                Ok(())
            } else {
                Err(code.as_i32())
            }
        );
        assert_eq!(seen.outcomes(), [expected], "stream {code}");
        assert_eq!(limiter.in_flight(), 0);
    }
    assert_eq!(server.served(), 34, "every call reached the server");
}

#[tokio::test(flavor = "current_thread")]
async fn the_permit_is_held_until_the_status_and_the_latency_runs_to_it() {
    let addr = serve(EchoServer::default()).await;
    let seen = Seen::default();
    let limiter = recorded(8, &seen);
    let classifier = GrpcClassifier::new().slow_after(ms(150)).unwrap();
    let layer = RheostatLayer::new(Arc::clone(&limiter)).classify(classifier);
    let mut client = EchoClient::new(layer.layer(channel(addr).await));

    // A message at once, the status (OK) 300 ms later.
    let mut stream = client.past_first_message(300).await;
    assert_eq!(
        limiter.in_flight(),
        1,
        "the headers and a message do not end the call"
    );
    assert!(seen.outcomes().is_empty());
    assert_eq!(drain(&mut stream).await, (0, Ok(())));
    assert_eq!(limiter.in_flight(), 0);
    let (outcome, latency) = seen.last();
    assert!(
        latency >= ms(300),
        "{latency:?}: to the status, not the headers"
    );
    assert_eq!(
        outcome,
        Outcome::Overload,
        "an OK after 300 ms is a slow call"
    );

    // The same call answering at once is a success.
    seen.clear();
    let mut stream = client
        .stream(Ask {
            messages: 1,
            ..Ask::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(drain(&mut stream).await, (1, Ok(())));
    assert_eq!(seen.outcomes(), [Outcome::Success]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_answering_unavailable_to_everything_opens_the_breaker_and_cuts_the_adaptive_limit(
) {
    let addr = serve(EchoServer::default()).await;
    let channel = channel(addr).await;
    let breaker = Arc::new(Limiter::new(
        Breaker::new(BreakerConfig::recommended()).unwrap(),
    ));
    let aimd = Arc::new(Limiter::new(
        Aimd::new(AimdConfig {
            mode: AimdMode::Netflix,
            initial: 20,
            ..AimdConfig::default()
        })
        .unwrap(),
    ));
    let mut through_breaker = EchoClient::new(
        RheostatLayer::new(Arc::clone(&breaker))
            .classify(GrpcClassifier::new())
            .layer(channel.clone()),
    );
    let mut through_aimd = EchoClient::new(
        RheostatLayer::new(Arc::clone(&aimd))
            .classify(GrpcClassifier::new())
            .layer(channel),
    );

    // Every answer is HTTP 200: only the status says it failed.
    let mut refused = 0;
    for _ in 0..40 {
        match through_breaker.call(Ask::code(Code::Unavailable)).await {
            Err(status) if status.code() == Code::Unavailable => {}
            Err(status) => {
                assert!(status.message().contains("open"), "{status:?}");
                refused += 1;
            }
            Ok(reply) => panic!("{reply:?}"),
        }
        let _ = through_aimd.call(Ask::code(Code::Unavailable)).await;
    }
    assert_eq!(breaker.snapshot().state, Some(BreakerState::Open));
    assert!(refused > 0, "the open breaker refused calls");
    let limit = aimd.gate().limit;
    assert!(limit < 20, "the limit was cut from 20 to {limit}");
}

/// Whether the client's own layer refused the call: tonic keeps the
/// layer's error as the status's source.
fn refused_by_the_layer(status: &tonic::Status) -> bool {
    use std::error::Error as _;
    status
        .source()
        .and_then(|e| e.downcast_ref::<CallError<tonic::transport::Error>>())
        .is_some_and(|e| matches!(e, CallError::Rejected(_)))
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_refused_by_the_client_layer_never_reaches_the_server() {
    let server = EchoServer::default();
    let addr = serve(server.clone()).await;
    let limiter = Arc::new(Limiter::new(Fixed::new(1).unwrap()));
    let layer = RheostatLayer::new(Arc::clone(&limiter)).classify(GrpcClassifier::new());
    let mut client = EchoClient::new(layer.layer(channel(addr).await));

    let held = limiter.try_acquire().unwrap();
    let status = client.call(Ask::default()).await.unwrap_err();
    assert!(status.message().contains("limit"), "{status:?}");
    // tonic reads an error of the channel's stack as UNKNOWN, the layer's
    // refusal its source.
    assert_eq!(status.code(), Code::Unknown);
    assert!(refused_by_the_layer(&status), "{status:?}");
    assert_eq!(server.served(), 0);
    drop(held);
    assert_eq!(
        client
            .call(Ask::default())
            .await
            .unwrap()
            .into_inner()
            .served,
        1
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_the_server_sheds_never_reaches_the_handler_and_is_answered_unavailable_with_a_pushback(
) {
    let server = EchoServer::default();
    let limiter = Arc::new(Limiter::new(Fixed::new(1).unwrap()));
    let shed = ShedLayer::new(Arc::clone(&limiter)).fail_fast();
    let addr = serve_with(server.clone(), shed).await;
    let mut client = EchoClient::new(channel(addr).await);

    let held = limiter.try_acquire().unwrap();
    let status = client.call(Ask::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(
        status.metadata().get("grpc-retry-pushback-ms").unwrap(),
        "1000"
    );
    assert!(status.message().contains("limit"), "{status:?}");
    assert_eq!(server.served(), 0);
    drop(held);

    // Admitted, served, and a handler's own status passed through.
    assert_eq!(
        client
            .call(Ask::default())
            .await
            .unwrap()
            .into_inner()
            .served,
        1
    );
    let status = client.call(Ask::code(Code::NotFound)).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_told_to_answer_resource_exhausted_does() {
    let server = EchoServer::default();
    let limiter = Arc::new(Limiter::new(Fixed::new(1).unwrap()));
    let shed = ShedLayer::new(Arc::clone(&limiter))
        .fail_fast()
        .retry_after(ms(250))
        .grpc_status(GrpcCode::ResourceExhausted)
        .unwrap();
    let addr = serve_with(server.clone(), shed).await;
    let mut client = EchoClient::new(channel(addr).await);
    let _held = limiter.try_acquire().unwrap();
    let status = client.call(Ask::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status.metadata().get("grpc-retry-pushback-ms").unwrap(),
        "250"
    );
    assert_eq!(server.served(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_files_server_table_sets_the_grpc_status_of_a_refusal_and_refuses_a_name_that_is_no_code()
{
    let text = |status: &str| {
        format!(
            "[limiters.api.policy]\npolicy = \"fixed\"\nlimit = 1\n\n[limiters.api.server]\nwait = false\ngrpc_status = \"{status}\"\n"
        )
    };
    let file = LimitersConfig::from_toml(&text("resource_exhausted")).unwrap();
    let limiter = Arc::new(file.build("api").unwrap());
    let shed = file.limiters["api"]
        .server
        .as_ref()
        .unwrap()
        .apply(ShedLayer::new(Arc::clone(&limiter)))
        .unwrap();
    let server = EchoServer::default();
    let addr = serve_with(server.clone(), shed).await;
    let mut client = EchoClient::new(channel(addr).await);
    let _held = limiter.try_acquire().unwrap();
    let status = client.call(Ask::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(server.served(), 0);
    for wrong in ["ok", "busy"] {
        let err = LimitersConfig::from_toml(&text(wrong))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!(
                "line 7: invalid `limiters.api.server.grpc_status`: found \"{wrong}\""
            )),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn no_permit_leaks_when_a_stream_or_a_call_is_dropped() {
    let addr = serve(EchoServer::default()).await;
    let seen = Seen::default();
    let limiter = recorded(2, &seen);
    let layer = RheostatLayer::new(Arc::clone(&limiter)).classify(GrpcClassifier::new());
    let mut client = EchoClient::new(layer.layer(channel(addr).await));

    for _ in 0..5 {
        // Two messages, then a status that never comes.
        let mut stream = client
            .stream(Ask {
                messages: 2,
                hang: true,
                ..Ask::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(stream.message().await.unwrap().is_some());
        assert_eq!(limiter.in_flight(), 1);
        drop(stream);
        assert_eq!(
            limiter.in_flight(),
            0,
            "the dropped stream gave its slot back"
        );

        // A unary call that hangs, given up on by its caller.
        let hung = tokio::time::timeout(
            ms(50),
            client.call(Ask {
                hang: true,
                ..Ask::default()
            }),
        )
        .await;
        assert!(hung.is_err());
        assert_eq!(
            limiter.in_flight(),
            0,
            "the dropped call gave its slot back"
        );
    }
    // A dropped call is the limiter's drop outcome: ignored.
    assert_eq!(seen.outcomes(), [Outcome::Ignore; 10]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_status_that_never_comes_is_cut_by_the_layers_timeout_as_an_overload() {
    let addr = serve(EchoServer::default()).await;
    let seen = Seen::default();
    let limiter = recorded(2, &seen);
    let layer = RheostatLayer::new(Arc::clone(&limiter))
        .classify(GrpcClassifier::new())
        .timeout(ms(200))
        .unwrap();
    let mut client = EchoClient::new(layer.layer(channel(addr).await));

    let started = Instant::now();
    let mut stream = client
        .stream(Ask {
            messages: 1,
            hang: true,
            ..Ask::default()
        })
        .await
        .unwrap()
        .into_inner();
    let (messages, end) = drain(&mut stream).await;
    assert_eq!(messages, 1);
    assert!(end.is_err(), "the stream ended with an error");
    let took = started.elapsed();
    // Cut, not hung: the server never sends the status.
    assert!(took >= ms(200) && took < ms(10_000), "{took:?}");
    assert_eq!(seen.outcomes(), [Outcome::Overload]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_retrying_call_waits_for_the_servers_pushback_and_stops_when_told_not_to_retry() {
    let server = EchoServer::default();
    let addr = serve(server.clone()).await;
    let limiter = Limiter::builder(Fixed::new(8).unwrap())
        .retry(RetryConfig {
            attempts: 3,
            deadline: Some(Duration::from_secs(5)),
            backoff: Backoff {
                base: ms(1),
                cap: ms(2),
            },
            ..RetryConfig::default()
        })
        .build()
        .unwrap();
    let client = EchoClient::new(channel(addr).await);
    let grpc = GrpcClassifier::new();
    let verdict = |result: &Result<tonic::Response<support::Reply>, tonic::Status>| match result {
        Ok(_) => grpc.verdict(GrpcCode::Ok, None, Duration::ZERO),
        Err(status) => grpc.verdict(
            GrpcCode::from_i32(status.code() as i32),
            status
                .metadata()
                .get("grpc-retry-pushback-ms")
                .map(|v| v.as_bytes()),
            Duration::ZERO,
        ),
    };
    // Each attempt sends `ask` again, with a client of its own.
    let send = |ask: Ask| {
        let client = client.clone();
        move || {
            let (mut client, ask) = (client.clone(), ask.clone());
            async move { client.call(ask).await }
        }
    };
    let unavailable = |pushback: &str| Ask {
        pushback: pushback.to_owned(),
        ..Ask::code(Code::Unavailable)
    };

    // Three attempts, each after the server's 150 ms.
    let started = Instant::now();
    let result = limiter.call(verdict, send(unavailable("150"))).await;
    assert!(result.is_err());
    assert_eq!(server.served(), 3);
    assert!(started.elapsed() >= ms(300), "{:?}", started.elapsed());

    // A negative pushback: the server asks not to be retried.
    let ask = unavailable("-1");
    assert!(limiter.call(verdict, send(ask)).await.is_err());
    assert_eq!(server.served(), 4);
    // A code that is not retryable.
    let ask = Ask::code(Code::Internal);
    assert!(limiter.call(verdict, send(ask)).await.is_err());
    assert_eq!(server.served(), 5);
}

#[tokio::test(flavor = "current_thread")]
async fn a_files_grpc_table_makes_the_classifier_the_layer_uses() {
    let file = LimitersConfig::from_toml(
        r#"
        [limiters.quota.policy]
        policy = "fixed"
        limit = 4

        [limiters.quota.grpc]
        overload = ["unavailable", "deadline_exceeded"]
        "#,
    )
    .unwrap();
    let classifier = file.limiters["quota"]
        .grpc
        .as_ref()
        .unwrap()
        .classifier()
        .unwrap();
    let addr = serve(EchoServer::default()).await;
    let seen = Seen::default();
    let limiter = recorded(4, &seen);
    let layer = RheostatLayer::new(Arc::clone(&limiter)).classify(classifier);
    let mut client = EchoClient::new(layer.layer(channel(addr).await));
    for code in [Code::ResourceExhausted, Code::Internal, Code::Unavailable] {
        let _ = client.call(Ask::code(code)).await;
    }
    assert_eq!(
        seen.outcomes(),
        [Outcome::Ignore, Outcome::Ignore, Outcome::Overload]
    );
}

#[test]
fn the_grpc_service_its_future_and_its_body_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    type Channel = tonic::transport::Channel;
    type Layered = Rheostat<Channel, GrpcClassifier, Fixed>;
    send_sync::<Layered>();
    send_sync::<RheostatLayer<GrpcClassifier, Fixed>>();
    // As `Send` and `Sync` as the body it wraps (tonic's is only `Send`).
    fn body_send<S: tower::Service<Req, Response = http::Response<B>>, Req, B: Send>() {}
    fn body_send_sync<S, Req, B>()
    where
        S: tower::Service<Req, Response = http::Response<B>>,
        B: Send + Sync,
    {
    }
    body_send::<Layered, http::Request<tonic::body::Body>, _>();
    type Full = http_body_util::Full<bytes::Bytes>;
    type Buffered = tower::util::BoxCloneSyncService<
        http::Request<()>,
        http::Response<Full>,
        std::convert::Infallible,
    >;
    body_send_sync::<Rheostat<Buffered, GrpcClassifier, Fixed>, http::Request<()>, _>();
    send::<<Layered as tower::Service<http::Request<tonic::body::Body>>>::Future>();
}

/// A unary call is `critical`, a stream `sheddable`: by the method's path.
fn by_method(request: &http::Request<tonic::body::Body>) -> Option<Class> {
    let priority = if request.uri().path() == support::CALL {
        Priority::Critical
    } else {
        Priority::Sheddable
    };
    Some(Class::from(priority))
}

#[tokio::test(flavor = "current_thread")]
async fn a_caller_waiting_for_the_slot_a_stream_holds_is_admitted_as_its_class_when_the_status_comes(
) {
    let server = EchoServer::default();
    let addr = serve(server.clone()).await;
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .priorities(Priorities::default())
            .max_wait(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let layer = RheostatLayer::new(Arc::clone(&limiter))
        .classify(GrpcClassifier::new())
        .classify_request(by_method)
        .wait();
    let mut client = EchoClient::new(layer.layer(channel(addr).await));

    // A stream takes the only slot and holds it in its body past its
    // first message, its status 300 ms later.
    let mut stream = client.past_first_message(300).await;
    assert_eq!(limiter.in_flight(), 1);
    let served = server.served();

    // A critical unary call waits for that slot, not sent meanwhile.
    let mut waiting = client.clone();
    let call = tokio::spawn(async move { waiting.call(Ask::default()).await });
    tokio::time::sleep(ms(100)).await;
    assert!(!call.is_finished());
    assert_eq!(server.served(), served, "the waiting call was not sent");
    assert_eq!(limiter.in_flight(), 1);

    // The stream's status frees the slot; the waiter takes it and is served.
    assert_eq!(drain(&mut stream).await, (0, Ok(())));
    call.await.unwrap().unwrap();
    assert_eq!(server.served(), served + 1);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_keyed_layer_holds_each_methods_permit_until_its_status() {
    let server = EchoServer::default();
    let addr = serve(server.clone()).await;
    // A limiter per method, one call at a time each, its outcomes seen.
    let (calls_seen, streams_seen) = (Seen::default(), Seen::default());
    let seen = (calls_seen.clone(), streams_seen.clone());
    let methods = Arc::new(
        KeyedLimiters::builder(move |method: &String| {
            let policy: Box<dyn Algorithm> = Box::new(Fixed::new(1)?);
            let seen = if method == support::CALL {
                &seen.0
            } else {
                &seen.1
            };
            Ok(Limiter::builder(policy)
                .name(method.clone())
                .observer(seen.clone()))
        })
        .build()
        .unwrap(),
    );
    let by_method = |request: &http::Request<tonic::body::Body>| request.uri().path().to_owned();
    let layer = KeyedLayer::new(Arc::clone(&methods), by_method).classify(GrpcClassifier::new());
    let mut client = EchoClient::new(layer.layer(channel(addr).await));

    // The stream's limiter stays full past its first message, to its status.
    let mut stream = client.past_first_message(200).await;
    let streams = methods.get(&support::STREAM.to_owned()).unwrap();
    assert_eq!(streams.in_flight(), 1);
    let refused = client.stream(Ask::default()).await.unwrap_err();
    assert!(refused_by_the_layer(&refused), "{refused:?}");
    // The other method's limiter is its own; a failure in its headers is
    // recorded against it alone.
    let failed = client.call(Ask::code(Code::Unavailable)).await.unwrap_err();
    assert_eq!(failed.code(), Code::Unavailable);
    let calls = methods.get(&support::CALL.to_owned()).unwrap();
    assert_eq!(calls.in_flight(), 0);
    assert_eq!(calls_seen.outcomes(), [Outcome::Overload]);
    assert!(streams_seen.outcomes().is_empty(), "the stream is not over");
    assert_eq!(drain(&mut stream).await, (0, Ok(())));
    assert_eq!(streams.in_flight(), 0);
    assert_eq!(streams_seen.outcomes(), [Outcome::Success]);
}
