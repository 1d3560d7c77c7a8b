//! The response futures: [`ResponseFuture`] (a request admitted, waiting
//! for a slot first if it must, then one call under its permit) and
//! [`RetryResponseFuture`] (a call's attempts, as
//! [`Attempts`](crate::retry::Attempts) decides), one file each, with the
//! one call both make in `call.rs`; and, with the `http` feature,
//! `ResponseBody` (a response's body holding its call's permit until the
//! call's status comes, for gRPC).

#[cfg(feature = "http")]
mod body;
mod call;
mod response;
mod retry;

#[cfg(feature = "http")]
pub use body::ResponseBody;
pub(crate) use call::{finite, single_timeout};
pub use response::ResponseFuture;
pub use retry::RetryResponseFuture;
pub(crate) use retry::{First, Plan};
