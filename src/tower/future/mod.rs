//! The response futures: [`ResponseFuture`] (a request admitted, waiting
//! for a slot first if it must, then one call under its permit) and
//! [`RetryResponseFuture`] (a call's attempts, as
//! [`Attempts`](crate::retry::Attempts) decides), one file each, with the
//! one call a `ResponseFuture` makes in `call.rs` and the hedges a
//! `RetryResponseFuture` races beside an attempt in `hedge.rs` (and how
//! either's attempt is recorded when it answers, in `attempt.rs`); and,
//! with the `http`
//! feature, `ResponseBody` (a response's body holding its call's permit
//! until the call's status comes, for gRPC).
//!
//! None is named by the crate's public API: each is its service's
//! `Service::Future` (or, the body, in its `Service::Response`), and is
//! named, where a type must be written out, as
//! `<Rheostat<..> as Service<Req>>::Future`.

mod attempt;
#[cfg(feature = "http")]
mod body;
mod call;
mod hedge;
mod response;
mod retry;

pub(crate) use call::{finite, single_timeout};
pub(crate) use response::ResponseFuture;
pub(crate) use retry::RetryResponseFuture;
pub(crate) use retry::{First, Plan};
