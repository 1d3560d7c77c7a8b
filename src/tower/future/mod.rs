//! The response futures: [`ResponseFuture`] (one call under its permit),
//! [`ClassResponseFuture`] (a request admitted as its class first) and
//! [`RetryResponseFuture`] (a call's attempts, as
//! [`Attempts`](crate::retry::Attempts) decides), one file each; and, with
//! the `http` feature, `ResponseBody` (a response's body holding its
//! call's permit until the call's status comes, for gRPC).

#[cfg(feature = "http")]
mod body;
mod class;
mod response;
mod retry;

#[cfg(feature = "http")]
pub use body::ResponseBody;
pub use class::ClassResponseFuture;
pub use response::ResponseFuture;
pub(crate) use response::{finite, single_timeout};
pub use retry::RetryResponseFuture;
pub(crate) use retry::{First, Plan};

#[cfg(feature = "tower-retry")]
pub use super::policy::RetryBackoff;
