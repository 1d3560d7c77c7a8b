//! Sorting requests into the limiter's priority classes, for both layers.

use std::fmt;

use crate::priority::Class;

/// Sorts a request into one of the limiter's priority classes (see
/// [`crate::priority`]) before it is admitted: given to
/// [`RheostatLayer::classify_request`](super::RheostatLayer::classify_request)
/// for a client, or to `ShedLayer::classify_request` (the `http` feature)
/// for a server. A closure `Fn(&Req) -> Option<Class>` is one, for any
/// request type `Req` (an `http::Request<B>`, a gRPC request, a type of
/// your own).
///
/// # Examples
///
/// ```
/// use http::Request;
/// use rheostat::priority::{Class, Priority};
/// use rheostat::tower::ClassifyRequest;
///
/// let by_header = |request: &Request<()>| {
///     let value = request.headers().get("x-priority")?.to_str().ok()?;
///     Priority::parse(value).map(Class::from)
/// };
/// let request = Request::get("/").header("x-priority", "sheddable").body(())?;
/// assert_eq!(by_header.class(&request), Some(Priority::Sheddable.into()));
/// assert_eq!(by_header.class(&Request::new(())), None);
///
/// // Any request type will do.
/// struct Job { batch: bool }
/// let by_kind = |job: &Job| job.batch.then_some(Class::from(Priority::Sheddable));
/// assert_eq!(by_kind.class(&Job { batch: true }), Some(Priority::Sheddable.into()));
/// assert_eq!(by_kind.class(&Job { batch: false }), None);
/// # Ok::<(), http::Error>(())
/// ```
pub trait ClassifyRequest<Req> {
    /// The class `request` is admitted as; `None` for the limiter's default
    /// class (as if it had been acquired without one).
    fn class(&self, request: &Req) -> Option<Class>;
}

impl<Req, F> ClassifyRequest<Req> for F
where
    F: Fn(&Req) -> Option<Class>,
{
    fn class(&self, request: &Req) -> Option<Class> {
        self(request)
    }
}

/// Every request of the limiter's default class: what a layer does until
/// it is given a [`ClassifyRequest`].
///
/// For a client ([`RheostatLayer`](super::RheostatLayer)) it also keeps
/// the layer as it was without classes: waiting, a slot is reserved in
/// `poll_ready`, before the request is known (see the [module
/// documentation](super#readiness)).
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultClass;

impl<Req> ClassifyRequest<Req> for DefaultClass {
    fn class(&self, _request: &Req) -> Option<Class> {
        None
    }
}

/// The [`ClassifyRequest`] of a client layer given one with
/// [`RheostatLayer::classify_request`](super::RheostatLayer::classify_request):
/// each request is admitted as the class it returns (see the [module
/// documentation](super#classes)).
#[derive(Clone, Copy, Default)]
pub struct ByRequest<F>(pub(crate) F);

impl<F> ByRequest<F> {
    /// The class function.
    pub fn get_ref(&self) -> &F {
        &self.0
    }
}

impl<F> fmt::Debug for ByRequest<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ByRequest(..)")
    }
}
