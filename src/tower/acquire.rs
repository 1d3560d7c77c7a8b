//! Waiting for a slot in the limiter's queue, as the services and their
//! response futures do.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::error::Rejection;
use crate::limiter::{Admission, Limiter, OwnedPermit};
use crate::priority::Class;

/// Waiting for a slot in the limiter's queue.
pub(crate) type Acquire<A, C> =
    Pin<Box<dyn Future<Output = Result<OwnedPermit<A, C>, Rejection>> + Send + Sync>>;

/// Starts waiting for a slot: of a class, or of the default class if
/// `None`; no longer than `within` either, if given; for a call that keeps
/// its caller's timeout unless it may be cut early (the last argument). A function pointer
/// made where `A: 'static` is known (in [`Rheostat::new`](super::Rheostat::new), and in the
/// retrying and server layers' `layer`), so that the `Service` impls need
/// no `'static` bound: with one, a future holding the service over a
/// `Box<dyn Algorithm>` cannot be proven `Send` inside an `async` block (the
/// compiler's "higher-ranked lifetime error"), and `tokio::spawn` refuses it.
pub(crate) type StartAcquire<A, C> =
    fn(Arc<Limiter<A, C>>, Option<Duration>, Option<Class>, bool) -> Acquire<A, C>;

pub(crate) fn start_acquire<A: Algorithm + 'static, C: Clock>(
    limiter: Arc<Limiter<A, C>>,
    within: Option<Duration>,
    class: Option<Class>,
    cut_early: bool,
) -> Acquire<A, C> {
    Box::pin(
        Admission::new(limiter)
            .class(class)
            .cut_early(cut_early)
            .acquire_within(within),
    )
}
