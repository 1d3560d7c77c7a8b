//! [`SummedMetrics`]: one set of series that many limiters feed.

use std::borrow::Cow;
use std::sync::Arc;

use super::MetricsObserver;

/// One set of series that many limiters feed together, labelled
/// `limiter=<label>` whatever their names: in-flight, the calls, the
/// rejections, the retries and the latency histogram summed over them, and
/// none of a limiter's own gauges (`rheostat_limit`,
/// `rheostat_admit_probability`, `rheostat_breaker_state`), which mean
/// nothing summed. Given to each limiter a [keyed set](crate::keyed) makes
/// for keys that clients choose, it keeps the number of series fixed
/// however many keys come and are evicted. Clones share the series.
///
/// # Examples
///
/// ```
/// use rheostat::algorithms::{Algorithm, Fixed};
/// use rheostat::keyed::KeyedLimiters;
/// use rheostat::metrics::SummedMetrics;
/// use rheostat::Limiter;
///
/// // Every tenant's calls in the series labelled `limiter="tenants"`.
/// let series = SummedMetrics::new("tenants");
/// let tenants = KeyedLimiters::builder(move |tenant: &u64| {
///     let policy: Box<dyn Algorithm> = Box::new(Fixed::new(8)?);
///     Ok(Limiter::builder(policy)
///         .name(tenant.to_string())
///         .metrics_summed(&series))
/// })
/// .build()?;
/// tenants.get(&42)?.try_acquire()?.success();
/// tenants.get(&43)?.try_acquire()?.success();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SummedMetrics(pub(super) Arc<MetricsObserver>);

impl SummedMetrics {
    /// The series labelled `limiter=<label>`, each handle registered now,
    /// with the recorder installed now (those of retries and classes when
    /// the first limiter that has them is built).
    pub fn new(label: impl Into<Cow<'static, str>>) -> Self {
        SummedMetrics(Arc::new(MetricsObserver::summed(label.into())))
    }
}
