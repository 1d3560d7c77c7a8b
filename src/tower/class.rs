//! Sorting requests into the limiter's priority classes, for both layers.

use std::fmt;

use crate::priority::Class;

/// Sorts a request into one of the limiter's priority classes (see
/// [`crate::priority`]) before it is admitted, and says whether it may be
/// [cut early](ClassifyRequest::cut_early): given to
/// [`RheostatLayer::classify_request`](super::RheostatLayer::classify_request)
/// for a client, or to `ShedLayer::classify_request` (the `http` feature)
/// for a server. A closure `Fn(&Req) -> Option<Class>` is one, for any
/// request type `Req` (an `http::Request<B>`, a gRPC request, a type of
/// your own).
///
/// A client classifies its own outbound requests, so whatever it reads is
/// its own say. A server reads requests its callers wrote: a header such as
/// `x-priority` is what a caller asks for, and any caller can ask for the
/// most critical class. On a server, take the class from what the server
/// itself established (an identity an authentication layer put in the
/// request's extensions, a route), and let the header only lower it:
/// [`lower_only`].
///
/// # Examples
///
/// ```
/// use http::Request;
/// use rheostat::priority::{Class, Priority};
/// use rheostat::tower::ClassifyRequest;
///
/// let by_header = |request: &Request<()>| {
///     Priority::parse(request.headers().get("x-priority")?).map(Class::from)
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
    /// The class `request` is admitted as; `None` if it has none: a client
    /// layer admits it as the limiter's default class (as if acquired
    /// without one), a server layer as the least critical class.
    fn class(&self, request: &Req) -> Option<Class>;

    /// Whether `request` may be cut early, by a timeout its limiter
    /// [learned](crate::timeout) shorter than the layer's; by default, it
    /// may. `false` for a request that is not safe to cut early (a payment,
    /// anything not idempotent): a client layer gives each of its attempts
    /// the layer's timeout, never a learned one shorter
    /// ([`Admission::cut_early`](crate::Admission::cut_early)). A server
    /// layer gives no timeout, and does not ask.
    ///
    /// [`IdempotentOnly`](super::IdempotentOnly) says `false` for a request
    /// that is not [`Idempotent`](super::Idempotent) (for HTTP, a `POST`, a
    /// `PATCH`, or a request marked `NotIdempotent`). A layer with no class
    /// function cuts every request early.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::Request;
    /// use rheostat::priority::{Class, Priority};
    /// use rheostat::tower::ClassifyRequest;
    ///
    /// /// A class from the `x-priority` header; a request to `/payments`
    /// /// is never cut early.
    /// struct Checkout;
    ///
    /// impl<B> ClassifyRequest<Request<B>> for Checkout {
    ///     fn class(&self, request: &Request<B>) -> Option<Class> {
    ///         Priority::parse(request.headers().get("x-priority")?).map(Class::from)
    ///     }
    ///     fn cut_early(&self, request: &Request<B>) -> bool {
    ///         !request.uri().path().starts_with("/payments")
    ///     }
    /// }
    ///
    /// assert!(!Checkout.cut_early(&Request::post("/payments/charge").body(())?));
    /// assert!(Checkout.cut_early(&Request::get("/search").body(())?));
    /// # Ok::<(), http::Error>(())
    /// ```
    fn cut_early(&self, request: &Req) -> bool {
        let _ = request;
        true
    }
}

impl<Req, F> ClassifyRequest<Req> for F
where
    F: Fn(&Req) -> Option<Class>,
{
    fn class(&self, request: &Req) -> Option<Class> {
        self(request)
    }
}

/// No class function: classifies no request. A layer holds `()` until it
/// is given a [`ClassifyRequest`]; a client layer then admits every
/// request as the limiter's default class, a server layer as the least
/// critical class.
///
/// For a client ([`RheostatLayer`](super::RheostatLayer)) it also keeps
/// the layer as it was without classes: waiting, a slot is reserved in
/// `poll_ready`, before the request is known (see the [module
/// documentation](super#readiness)).
impl<Req> ClassifyRequest<Req> for () {
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

/// How a client service admits each request: as `()` does, without a
/// class function (the limiter's default class; waiting, a slot reserved
/// in `poll_ready`, before the request is known) or as a [`ByRequest`]
/// does (each request as its class; waiting, in the response future,
/// which calls the inner service readied for it, so that service must be
/// `Clone`). Implemented by these two alone, so that each client service
/// has one `Service` impl.
pub trait Admit<S, Req>: sealed::Sealed {
    /// Whether a service that waits reserves the next call's slot in
    /// `poll_ready`.
    #[doc(hidden)]
    const RESERVES: bool;

    /// The class `request` is admitted as (`None`: the default class), and
    /// whether it may be cut early.
    #[doc(hidden)]
    fn admit(&self, request: &Req) -> (Option<Class>, bool);

    /// The inner service readied by `poll_ready`, for a response future
    /// that waits for a slot to call later (a clone takes its place, as
    /// tower advises); `None` if the slot is reserved in `poll_ready`.
    #[doc(hidden)]
    fn hand_over(service: &mut S) -> Option<S>;
}

mod sealed {
    /// Only `()` and [`ByRequest`](super::ByRequest) are an
    /// [`Admit`](super::Admit).
    #[allow(
        unreachable_pub,
        reason = "the seal of a public trait, named nowhere else"
    )]
    pub trait Sealed {}

    impl Sealed for () {}
    impl<F> Sealed for super::ByRequest<F> {}
}

impl<S, Req> Admit<S, Req> for () {
    const RESERVES: bool = true;

    fn admit(&self, _request: &Req) -> (Option<Class>, bool) {
        (None, true)
    }

    fn hand_over(_service: &mut S) -> Option<S> {
        None
    }
}

impl<S: Clone, Req, F: ClassifyRequest<Req>> Admit<S, Req> for ByRequest<F> {
    const RESERVES: bool = false;

    fn admit(&self, request: &Req) -> (Option<Class>, bool) {
        (self.0.class(request), self.0.cut_early(request))
    }

    fn hand_over(service: &mut S) -> Option<S> {
        let clone = service.clone();
        Some(std::mem::replace(service, clone))
    }
}

impl<F> fmt::Debug for ByRequest<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ByRequest(..)")
    }
}

/// A class from a trusted source that the request itself may only lower:
/// the class `trusted` gives a request, or the less critical class `asked`
/// gives it, if `asked` gives one less critical. A request `trusted` gives
/// no class has none, whatever it asks for.
///
/// On a server, `trusted` reads what the server established about the
/// caller (an identity an authentication layer in front put in the
/// request's extensions, a route), and `asked` what the caller wrote (an
/// `x-priority` header): a batch client may mark its own prefetches
/// `sheddable`, but no caller rises above its class by writing
/// `critical-plus`.
///
/// # Examples
///
/// ```
/// use http::Request;
/// use rheostat::priority::{Class, Priority};
/// use rheostat::tower::{lower_only, ClassifyRequest};
///
/// /// Who is calling, put in the request's extensions by an
/// /// authentication layer in front.
/// #[derive(Clone)]
/// struct Caller { class: Class }
///
/// let classify = lower_only(
///     |request: &Request<()>| request.extensions().get::<Caller>().map(|caller| caller.class),
///     |request: &Request<()>| Priority::parse(request.headers().get("x-priority")?).map(Class::from),
/// );
/// let request = |caller: Option<Priority>, asks: &str| {
///     let mut request = Request::get("/").header("x-priority", asks).body(()).unwrap();
///     if let Some(priority) = caller {
///         request.extensions_mut().insert(Caller { class: priority.into() });
///     }
///     request
/// };
/// // A batch caller asking for more gets its own class…
/// let batch = Some(Priority::Sheddable);
/// assert_eq!(classify.class(&request(batch, "critical-plus")), Some(Priority::Sheddable.into()));
/// // …an interactive one may ask for less…
/// let interactive = Some(Priority::Critical);
/// assert_eq!(classify.class(&request(interactive, "sheddable")), Some(Priority::Sheddable.into()));
/// assert_eq!(classify.class(&request(interactive, "junk")), Some(Priority::Critical.into()));
/// // …and one nobody vouched for has no class.
/// assert_eq!(classify.class(&request(None, "critical-plus")), None);
/// ```
pub fn lower_only<Req, T, A>(trusted: T, asked: A) -> impl ClassifyRequest<Req> + Clone + fmt::Debug
where
    T: ClassifyRequest<Req> + Clone,
    A: ClassifyRequest<Req> + Clone,
{
    LowerOnly { trusted, asked }
}

/// What [`lower_only`] gives.
#[derive(Clone, Copy)]
struct LowerOnly<T, A> {
    trusted: T,
    asked: A,
}

impl<Req, T, A> ClassifyRequest<Req> for LowerOnly<T, A>
where
    T: ClassifyRequest<Req>,
    A: ClassifyRequest<Req>,
{
    fn class(&self, request: &Req) -> Option<Class> {
        let trusted = self.trusted.class(request)?;
        // Classes are numbered most critical first: the greater is the
        // less critical.
        Some(
            self.asked
                .class(request)
                .map_or(trusted, |asked| asked.max(trusted)),
        )
    }

    /// Cut early only if both say it may: either may keep a request's
    /// timeout whole.
    fn cut_early(&self, request: &Req) -> bool {
        self.trusted.cut_early(request) && self.asked.cut_early(request)
    }
}

impl<T, A> fmt::Debug for LowerOnly<T, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LowerOnly(..)")
    }
}
