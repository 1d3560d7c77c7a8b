//! A gRPC service for tests and examples, written by hand as `tonic-build`
//! would generate it from this `.proto` (so that nothing needs `protoc`):
//!
//! ```proto
//! syntax = "proto3";
//! package rheostat.test;
//!
//! // What the server is asked to do.
//! message Ask {
//!   int32 code = 1;        // the status to end with (0: OK)
//!   uint32 messages = 2;   // streaming: messages sent before the status
//!   uint64 delay_ms = 3;   // wait this long before the status
//!   bool hang = 4;         // never send the status
//!   string pushback = 5;   // a grpc-retry-pushback-ms to send with an error
//! }
//! message Reply { uint64 served = 1; }
//!
//! service Echo {
//!   rpc Call(Ask) returns (Reply);
//!   rpc Stream(Ask) returns (stream Reply);
//! }
//! ```
//!
//! A unary call that fails sends a trailers-only response (the status in
//! the headers); a unary call that succeeds, and a stream, send headers,
//! messages, then the status in the trailers.

#![allow(dead_code, reason = "each test file uses what it needs")]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tonic::codegen::{Body, Bytes, StdError};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Request, Response, Status};

/// What the server is asked to do.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Ask {
    /// The status to end with (0: OK).
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// Streaming: the messages sent before the status.
    #[prost(uint32, tag = "2")]
    pub messages: u32,
    /// How long to wait before the status, in milliseconds.
    #[prost(uint64, tag = "3")]
    pub delay_ms: u64,
    /// Never send the status.
    #[prost(bool, tag = "4")]
    pub hang: bool,
    /// A `grpc-retry-pushback-ms` to send with an error.
    #[prost(string, tag = "5")]
    pub pushback: String,
}

impl Ask {
    /// End with `code` at once.
    pub(crate) fn code(code: Code) -> Self {
        Ask {
            code: code as i32,
            ..Ask::default()
        }
    }
}

/// What the server answers: how many calls its handlers had seen.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Reply {
    #[prost(uint64, tag = "1")]
    pub served: u64,
}

pub(crate) const CALL: &str = "/rheostat.test.Echo/Call";
pub(crate) const STREAM: &str = "/rheostat.test.Echo/Stream";

// ----- client ------------------------------------------------------------------

/// The client of `Echo` over any gRPC service `T` (a tonic `Channel`, or
/// one behind a `RheostatLayer`).
#[derive(Clone, Debug)]
pub(crate) struct EchoClient<T> {
    inner: tonic::client::Grpc<T>,
}

impl<T> EchoClient<T>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    pub(crate) fn new(inner: T) -> Self {
        EchoClient {
            inner: tonic::client::Grpc::new(inner),
        }
    }

    async fn ready(&mut self) -> Result<(), Status> {
        self.inner
            .ready()
            .await
            .map_err(|e| Status::unknown(format!("service was not ready: {}", e.into())))
    }

    /// `Echo.Call`.
    pub(crate) async fn call(&mut self, ask: Ask) -> Result<Response<Reply>, Status> {
        self.ready().await?;
        let codec = tonic::codec::ProstCodec::default();
        let path = http::uri::PathAndQuery::from_static(CALL);
        self.inner.unary(Request::new(ask), path, codec).await
    }

    /// `Echo.Stream`.
    pub(crate) async fn stream(
        &mut self,
        ask: Ask,
    ) -> Result<Response<tonic::codec::Streaming<Reply>>, Status> {
        self.ready().await?;
        let codec = tonic::codec::ProstCodec::default();
        let path = http::uri::PathAndQuery::from_static(STREAM);
        self.inner
            .server_streaming(Request::new(ask), path, codec)
            .await
    }

    /// `Echo.Stream` of one message and then `OK` `delay_ms` later, read
    /// to its message: the call is not over.
    pub(crate) async fn past_first_message(
        &mut self,
        delay_ms: u64,
    ) -> tonic::codec::Streaming<Reply> {
        let ask = Ask {
            messages: 1,
            delay_ms,
            ..Ask::default()
        };
        let mut stream = self.stream(ask).await.unwrap().into_inner();
        assert!(stream.message().await.unwrap().is_some());
        stream
    }
}

// ----- server ------------------------------------------------------------------

/// The server of `Echo`: does what each `Ask` says, and counts the calls
/// its handlers see.
#[derive(Clone, Debug, Default)]
pub(crate) struct EchoServer {
    pub served: Arc<AtomicU64>,
}

impl EchoServer {
    pub(crate) fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }
}

impl tonic::server::NamedService for EchoServer {
    const NAME: &'static str = "rheostat.test.Echo";
}

/// The status an `Ask` ends with, if it is an error.
fn failure(ask: &Ask) -> Option<Status> {
    if ask.code == 0 {
        return None;
    }
    let mut metadata = MetadataMap::new();
    if !ask.pushback.is_empty() {
        if let Ok(value) = MetadataValue::try_from(ask.pushback.as_str()) {
            metadata.insert("grpc-retry-pushback-ms", value);
        }
    }
    Some(Status::with_metadata(
        Code::from_i32(ask.code),
        "asked to fail",
        metadata,
    ))
}

async fn wait(ask: &Ask) {
    if ask.hang {
        std::future::pending::<()>().await;
    }
    if ask.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(ask.delay_ms)).await;
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type ReplyStream = Pin<Box<dyn Stream<Item = Result<Reply, Status>> + Send>>;

struct Unary(Arc<AtomicU64>);

impl tonic::server::UnaryService<Ask> for Unary {
    type Response = Reply;
    type Future = BoxFuture<Result<Response<Reply>, Status>>;

    fn call(&mut self, request: Request<Ask>) -> Self::Future {
        let served = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move {
            let ask = request.into_inner();
            wait(&ask).await;
            match failure(&ask) {
                Some(status) => Err(status),
                None => Ok(Response::new(Reply { served })),
            }
        })
    }
}

struct Streaming(Arc<AtomicU64>);

impl tonic::server::ServerStreamingService<Ask> for Streaming {
    type Response = Reply;
    type ResponseStream = ReplyStream;
    type Future = BoxFuture<Result<Response<ReplyStream>, Status>>;

    fn call(&mut self, request: Request<Ask>) -> Self::Future {
        let served = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        let ask = request.into_inner();
        let stream = futures_util::stream::unfold(0, move |sent| {
            let ask = ask.clone();
            async move {
                if sent < ask.messages {
                    return Some((Ok(Reply { served }), sent + 1));
                }
                if sent > ask.messages {
                    return None;
                }
                wait(&ask).await;
                failure(&ask).map(|status| (Err(status), sent + 1))
            }
        });
        Box::pin(async move { Ok(Response::new(Box::pin(stream) as ReplyStream)) })
    }
}

impl<B> tower::Service<http::Request<B>> for EchoServer
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let served = Arc::clone(&self.served);
        match request.uri().path() {
            CALL => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(tonic::codec::ProstCodec::default());
                Ok(grpc.unary(Unary(served), request).await)
            }),
            STREAM => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(tonic::codec::ProstCodec::default());
                Ok(grpc.server_streaming(Streaming(served), request).await)
            }),
            _ => Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) }),
        }
    }
}

/// Serves `server` on 127.0.0.1, behind `layer`, until the runtime ends.
pub(crate) async fn serve_with<L>(server: EchoServer, layer: L) -> SocketAddr
where
    L: tower::Layer<tonic::service::Routes> + Clone + Send + Sync + 'static,
    L::Service: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower::Service<http::Request<tonic::body::Body>>>::Future: Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(server)
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });
    addr
}

/// Serves `server` on 127.0.0.1 until the runtime ends.
pub(crate) async fn serve(server: EchoServer) -> SocketAddr {
    serve_with(server, tower::layer::util::Identity::new()).await
}

/// A channel to `addr`, connected.
pub(crate) async fn channel(addr: SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}
