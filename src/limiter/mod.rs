//! The [`Limiter`], one gate in front of one dependency, and what fewer
//! callers name than the crate root holds: the order waiters are served in
//! ([`QueueOrder`], at most [`MAX_WAITERS`] of them), how slots are parked
//! per core ([`Sharding`], [`PARK_PER_SHARD`]), whether the gate admits now
//! ([`Readiness`]), and the probes a fleet shares ([`ProbeClaims`],
//! [`ProbeAllowance`], [`Claim`], [`CLAIM_LEAD`]).

// For maintainers: how the limiter is built.
//
// # Its state
//
// What the limiter shares between threads is a few types, each with
// private fields and its invariant at the top of its file:
//
// | type | file | holds |
// | --- | --- | --- |
// | `Board` | `board.rs` | the policy's answer, copied into atomics read without its lock: the gate, the deferral, the feedback, the generation, when to wake the policy, when the gate expires, which member refuses |
// | `Slots` | `slots.rs`, `shards.rs` | the slots taken and the successes counted for the policy, in one word, and the per-core shards that park released slots, set up on first contention |
// | `Deferred` | `deferred.rs` | the timed successes held for the policy, in per-shard buffers set up the first time two threads meet on its lock |
// | `WaitQueue` | `queue.rs` | the callers waiting for a slot, and the ordering by which none misses a slot freed as it joins |
// | `Classes` | `classes.rs` | the classes of calls: what each holds and the slots kept for it |
//
// Beside them, the policy behind its lock with what it last published
// (`Held`, `published.rs`), the refusals not yet told to it, the seed of
// the admit draw, the clock, the options and the observer.
//
// # Its methods
//
// `impl Limiter` is in five files, each owning one part and saying at its
// top what it keeps true: this one (the public face: reading the gate,
// acquiring, calling, updating the policy), `builder.rs` (making one),
// `admit.rs` (every way into a slot: the gate, a class's share, a probe,
// the queue), `finish.rs` (every way out of a slot, and what the policy
// learns from it) and `published.rs` (the policy behind its lock, and what
// is done under it: publication, overrides, granted probes, waiting until
// the gate admits). They call the types above; no type above calls back
// into them.
//
// # How a call ends
//
// A call is admitted (`admit.rs`, directly or after a wait in the queue)
// with a `Ticket`, its slot counted in flight; it ends in one of these
// ways, and each gives the slot back exactly once:
//
// | the caller | the outcome the policy is told |
// | --- | --- |
// | records it (`success`, `overload`, `ignore`, `record`) | that outcome |
// | runs it with a timeout that runs out (`Permit::run`, `Limiter::call`, the tower layers) | `Overload` |
// | drops the permit unrecorded: cancelled, aborted, panicking | the builder's `on_drop` (`Ignore` by default) |
// | records an attempt and keeps the slot (`record_attempt`, retries holding one slot) | that attempt's outcome; the call ends later, as above |
// | is refused, or cancelled while waiting | nothing: no slot was taken (a slot handed to a waiter that was cancelled goes back through `release_slot`) |
//
// What the policy learns, `finish.rs` decides, in this order:
//
// 1. the policy needs no feedback, wants no wake-up, and no observer
//    listens: the slot only;
// 2. a success the policy's deferral covers whenever it ends, untimed: the
//    slot, and one more success counted without the lock
//    (`finish_batched`), handed over in a batch later;
// 3. a timed success the deferral covers: held in a per-thread buffer
//    (`finish_deferred`), or, before the buffers are set up, told under
//    the lock without asking the policy anything (`finish_covered`);
// 4. anything else: under the lock, the sample told, what was held handed
//    over first, and the gate published again (`finish_locked`).
//
// A call is never held if it is a probe or not a success, kept its
// caller's own timeout (`Admission::cut_early`), is stale
// (admitted before the policy's latest transition), was admitted with
// more calls in flight than the deferral allows, took longer than its
// `max_latency`, ended after its `until`, or was untimed while the policy
// needs latencies. Whether it may be held is read from the `Board`, as
// last published; where it is held, in `Slots` or `Deferred`.

mod admission;
mod admit;
mod board;
mod builder;
mod classes;
mod deferred;
mod finish;
mod gate;
mod handles;
mod permit;
mod published;
mod queue;
mod ready;
mod shards;
mod shared_probes;
mod slots;

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::algorithms::{Algorithm, Gate};
use crate::clock::{Clock, DefaultClock};
use crate::error::{CallError, Rejection};
use crate::observe::Observer;
use crate::retry::{Decided, Verdict};
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex};
use board::Board;
use deferred::Deferred;
use published::Held;
use queue::WaitQueue;

// At the crate root; hidden here so that the module's page shows what is
// only here.
#[doc(hidden)]
pub use admission::Admission;
#[doc(hidden)]
pub use builder::Builder;
#[cfg(feature = "metrics")]
pub(crate) use builder::Named;
use builder::Options;
use crossbeam_utils::CachePadded;
pub use handles::{Classes, Overrides, Ready};
pub(crate) use permit::Ticket;
#[doc(hidden)]
pub use permit::{Handle, OwnedPermit, Permit};
pub use queue::QueueOrder;
pub use ready::Readiness;
pub use shards::{Sharding, PARK_PER_SHARD};
pub use shared_probes::{Claim, ProbeAllowance, ProbeClaims, CLAIM_LEAD};
// Its own module, so that the observers reading it do not import the limiter.
pub use crate::snapshot::Snapshot;
use slots::Slots;

use crate::timeout::Timeouts;

/// Most waiters a queue may be configured to hold.
pub const MAX_WAITERS: usize = 1 << 20;

/// A limiter that chooses its policy at run time.
pub type DynLimiter<C = DefaultClock> = Limiter<Box<dyn Algorithm>, C>;

/// One gate in front of one dependency: decides, call by call, whether a call
/// may go, and learns from how each call ends.
///
/// The policy `A` (a [`Fixed`](crate::algorithms::Fixed) bulkhead, an
/// [`Aimd`](crate::algorithms::Aimd) limit, or a `Box<dyn Algorithm>` chosen at
/// run time) publishes a [`Gate`]; the limiter enforces it without taking a
/// lock — an atomic in-flight count against the published limit, and a fast
/// random draw against the admit probability. Only recording a finished call
/// locks the policy, and only if the policy learns from it: the limiter reads
/// the clock and takes the lock no more than the policy's
/// [`Feedback`](crate::algorithms::Feedback) asks (a
/// [`Fixed`](crate::algorithms::Fixed) bulkhead needs neither).
///
/// # Examples
///
/// ```
/// use rheostat::{algorithms::Fixed, Limiter};
///
/// let limiter = Limiter::new(Fixed::new(2)?);
/// let a = limiter.try_acquire()?;
/// let b = limiter.try_acquire()?;
/// assert!(limiter.try_acquire().is_err()); // two in flight: the third is refused
/// a.success();
/// b.overload();
/// assert_eq!(limiter.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Limiter<A = Box<dyn Algorithm>, C = DefaultClock> {
    /// The policy's answer, read without its lock (`board.rs`).
    board: Board,
    /// The slots taken, and the shards that park them (`slots.rs`).
    slots: CachePadded<Slots>,
    /// The timed successes held for the policy (`deferred.rs`).
    deferred: Deferred,
    /// Local rejections not yet told to the policy.
    rejected: AtomicU64,
    /// Every refusal so far (hedges stand down after one).
    refusals: AtomicU64,
    rng: AtomicU64,
    policy: CachePadded<Mutex<Held<A>>>,
    clock: C,
    /// Callers waiting for a slot (`queue.rs`).
    waiters: WaitQueue,
    /// Notified when the published gate changes while someone waits for
    /// readiness.
    changed: tokio::sync::Notify,
    ready_waiters: AtomicUsize,
    /// Set while an active probe is running.
    probing: AtomicBool,
    options: Options,
    observer: Option<Box<dyn Observer>>,
    /// The classes of calls ([`crate::priority`]), if any.
    classes: Option<Box<classes::Classes>>,
    /// How a permit dropped without a record gives its slot back: set
    /// where the limiter is built, where its policy's and clock's bounds
    /// hold, so that a [`Permit`] (and what holds one) needs none.
    release: fn(&Self, &Ticket),
}

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// The limiter's attempt timeouts, read together: the ceiling a call
    /// is given when the code gives none, the timeout learned from the
    /// dependency, the one in force now, and a probe's. Takes the policy's
    /// lock briefly (for the probe's).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
    /// use rheostat::{Limiter, Timeout};
    ///
    /// let limiter = Limiter::builder(Breaker::new(BreakerConfig::default())?)
    ///     .timeout(Timeout::learned(Duration::from_secs(15)))
    ///     .build()?;
    /// let timeouts = limiter.timeouts();
    /// assert_eq!(timeouts.ceiling, Some(Duration::from_secs(15)));
    /// assert_eq!(timeouts.learned, None); // nothing seen yet
    /// assert_eq!(timeouts.in_force, Some(Duration::from_secs(15)));
    /// assert_eq!(timeouts.probe, Some(Duration::from_secs(30)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timeouts(&self) -> Timeouts {
        Timeouts {
            ceiling: self.timeout_ceiling(),
            learned: self.board.learned(),
            in_force: self.timeout_in_force(),
            probe: self.probe_timeout(),
            hedge: self.hedge_delay(),
        }
    }

    /// [`Timeouts::hedge`]: the typed hedge delay, else the learned one.
    #[inline]
    pub(crate) fn hedge_delay(&self) -> Option<Duration> {
        let hedge = self.retry()?.config().hedge.as_ref()?;
        hedge.delay.or_else(|| self.board.hedge())
    }

    /// [`Timeouts::ceiling`]: the builder's or the file's timeout.
    #[inline]
    pub(crate) fn timeout_ceiling(&self) -> Option<Duration> {
        self.options.timeout()
    }

    /// [`Timeouts::in_force`]: the learned timeout within its ceiling, else
    /// the ceiling.
    pub(crate) fn timeout_in_force(&self) -> Option<Duration> {
        self.options
            .timeout()
            .map(|ceiling| self.learned_cut().map_or(ceiling, |t| t.min(ceiling)))
    }

    /// Whether a call not marked otherwise may be cut early: not where the
    /// learned timeout says `cut_early = false`.
    #[inline]
    pub(crate) fn cuts_early(&self) -> bool {
        self.options
            .learned()
            .is_none_or(|learned| learned.cut_early)
    }

    /// The learned timeout a call that may be cut early is given: `None`
    /// until one is learned, and where no call is cut early.
    #[inline]
    pub(crate) fn learned_cut(&self) -> Option<Duration> {
        self.board.learned().filter(|_| self.cuts_early())
    }

    /// Whether callers wait for a slot rather than fail fast when the limit
    /// is reached ([`Builder::wait`]; in a file, a limiter with a
    /// `max_wait`): [`Limiter::call`] waits then, at most the limiter's
    /// [`Builder::max_wait`], and so does the tower layer
    /// (`RheostatLayer`), as it does when built with its `wait()`.
    pub(crate) fn waits(&self) -> bool {
        self.options.wait()
    }

    /// The clock the limiter reads.
    pub(crate) fn clock(&self) -> &C {
        &self.clock
    }

    /// Calls in flight now. With slots parked per core (see [`Sharding`]),
    /// it is read from more than one word: while other threads start and
    /// finish calls, it may count a call that finished, or miss one that
    /// started, while it reads.
    pub fn in_flight(&self) -> u32 {
        self.slots.in_flight()
    }

    /// The gate being enforced now, read without a lock: what the next
    /// admission will be held to. A gate whose time has come (an open
    /// breaker whose cooldown is over) is re-evaluated first, as an
    /// admission would, so that it reads half-open with its probe limit, not
    /// shut with a limit of 0.
    ///
    /// The limit binds admissions: no call is admitted that would take the
    /// calls in flight above the gate it was admitted under. A gate may
    /// still read below the calls in flight (a limit just cut; a half-open
    /// breaker whose probes are all out shuts until they answer).
    ///
    /// [`Gate::max_in_flight`] is `None` when the gate sets no concurrency
    /// limit (a throttle, a closed breaker alone).
    pub fn gate(&self) -> Gate {
        self.refresh_if_due(self.clock.now());
        let packed = self.board.gate();
        let until = self.board.wake_at();
        Gate {
            limit: packed.limit(),
            admit_probability: packed.admit_probability(),
            probe: packed.probe(),
            until,
        }
    }

    /// A view of the policy (locks it briefly, first handing it any
    /// successes counted for it without its lock), with the attempt
    /// timeout in force ([`Timeouts::in_force`]), the override in force
    /// ([`Limiter::overrides`]) and, for a learned timeout, since when no
    /// call has answered within its ceiling while calls kept ending at it,
    /// if that has lasted a window: the ceiling then cuts every call
    /// ([`crate::timeout`], "When the ceiling cuts every call"). That is
    /// what the metrics show as `rheostat_timeout_ceiling_cutting` and the
    /// [`Observer`] is told of ([`Observer::ceiling_cutting`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, clock::{Clock, ManualClock}, Limiter, Timeout};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::builder(Fixed::new(10)?)
    ///     .clock(clock.clone())
    ///     .timeout(Timeout::learned(Duration::from_secs(15)))
    ///     .build()?;
    /// let since = clock.now();
    /// // The dependency answers in 200 s: every call is cut at the 15 s
    /// // ceiling, and after a window (60 s) of that, it says so.
    /// for _ in 0..6 {
    ///     let permit = limiter.try_acquire()?;
    ///     clock.advance(Duration::from_secs(15));
    ///     permit.overload();
    /// }
    /// assert_eq!(limiter.snapshot().ceiling_cutting_since, Some(since + Duration::from_secs(15)));
    /// // One answer within the ceiling ends it.
    /// let permit = limiter.try_acquire()?;
    /// clock.advance(Duration::from_secs(1));
    /// permit.success();
    /// assert_eq!(limiter.snapshot().ceiling_cutting_since, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            timeout: self.timeout_in_force(),
            hedge: self.hedge_delay(),
            ..self.with_held(self.clock.now(), |held| held.view())
        }
    }

    /// Run `f` on the policy — to change a fixed limit, force a breaker
    /// open, swap a boxed policy — then publish its new gate and wake any
    /// waiter it lets through. Calls already in flight finish normally and are
    /// reported to the policy as it is when they finish.
    ///
    /// What the limiter shows of its policy follows the policy `f` leaves:
    /// a refusal names the member of the new policy that refused (and its
    /// reason is the new policy's: a throttle's refusal is `Throttled`, not
    /// a former breaker's `Ramping`), and where `f` swapped the policy for
    /// one of other members or changed its breaker state, the observer is
    /// told ([`Observer::policy_changed`]; the metrics then show the new
    /// breaker state, or none).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::{algorithms::Fixed, Limiter};
    ///
    /// let limiter = Limiter::new(Fixed::new(1)?);
    /// limiter.update(|fixed| fixed.set_limit(3))?;
    /// assert_eq!(limiter.gate().limit, 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update<R>(&self, f: impl FnOnce(&mut A) -> R) -> R {
        let observer = self.observer.as_deref();
        let (result, changed) = self.with_held(self.clock.now(), |held| {
            let state = observer.map(|_| held.policy.snapshot().state);
            let result = f(&mut held.policy);
            let swapped = held.last.set_members(held.policy.members());
            let changed = state
                .filter(|state| swapped || held.policy.snapshot().state != *state)
                .map(|_| held.view());
            (result, changed)
        });
        if let (Some(observer), Some(snapshot)) = (observer, changed) {
            observer.policy_changed(&Snapshot {
                timeout: self.timeout_in_force(),
                hedge: self.hedge_delay(),
                ..snapshot
            });
        }
        result
    }

    /// [`Timeouts::probe`]: the policy's, under its lock.
    pub(crate) fn probe_timeout(&self) -> Option<Duration> {
        self.lock().probe_timeout()
    }

    /// Apply the policy's time-driven changes due by now: what a driver of
    /// virtual time (the simulator) calls when the gate's
    /// [`until`](Gate::until) has passed. With a real clock, every call and
    /// [`Ready::drive`] apply them.
    #[doc(hidden)]
    pub fn wake(&self) {
        let now = self.clock.now();
        self.refresh(now);
    }

    /// Take a slot now or fail at once with the reason: an
    /// [`Admission`] with the limiter's settings. To admit a call of a
    /// class, or to hold the permit in a spawned task, use
    /// [`Limiter::admission`] or [`Admission::new`].
    ///
    /// # Errors
    ///
    /// A [`Rejection`] saying why:
    /// [`RejectReason::LimitReached`](crate::RejectReason::LimitReached),
    /// [`RejectReason::Throttled`](crate::RejectReason::Throttled) or
    /// [`RejectReason::Open`](crate::RejectReason::Open) (with the time until
    /// the next probe, where known).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::{algorithms::Fixed, Limiter, RejectReason};
    ///
    /// let limiter = Limiter::new(Fixed::new(1)?);
    /// let permit = limiter.try_acquire()?;
    /// let refused = limiter.try_acquire().unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::LimitReached);
    /// drop(permit);
    /// assert!(limiter.try_acquire().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<&Self>, Rejection> {
        // `Admission::new(self).try_acquire()`, without making one.
        Limiter::permit_now(self, None, false, true)
    }

    /// An [`Admission`] to this limiter, for a permit borrowed from it: set
    /// the call's class, wait or timeout, then
    /// [`try_acquire`](Admission::try_acquire),
    /// [`acquire`](Admission::acquire) or [`call`](Admission::call). (For
    /// a permit that owns a handle, `Admission::new(Arc::clone(&limiter))`.)
    #[inline]
    pub fn admission(&self) -> Admission<&Self> {
        Admission::new(self)
    }

    /// What is changed from outside the policy: an override, a fleet's
    /// probe tokens ([`Overrides`]).
    pub fn overrides(&self) -> Overrides<'_, A, C> {
        Overrides { limiter: self }
    }

    /// Whether the gate admits calls, and waiting until it does
    /// ([`Ready`]; [`Ready::new`] with an `Arc<Limiter>` for a spawned
    /// task).
    pub fn ready(&self) -> Ready<&Self> {
        Ready::new(self)
    }

    /// The classes of calls, for a limiter built with
    /// [priorities](Builder::priorities); `None` without.
    pub fn classes(&self) -> Option<Classes<'_, A, C>> {
        Classes::of(self)
    }

    pub(crate) fn observer(&self) -> Option<&dyn Observer> {
        self.observer.as_deref()
    }

    /// The retry policy given to [`Builder::retry`], if any: for the
    /// simulator, which drives its attempts itself.
    #[doc(hidden)]
    pub fn retry(&self) -> Option<&crate::retry::Retry> {
        self.options.retry()
    }

    /// [`Admission::call`] with the limiter's settings: its default class,
    /// its [`Builder::timeout`](crate::Builder::timeout) for each attempt,
    /// and, if it [waits](Builder::wait), a wait for a slot of at most its
    /// [`Builder::max_wait`](crate::Builder::max_wait), as the tower layers
    /// wait.
    ///
    /// # Cancel safety
    ///
    /// As [`Admission::call`].
    ///
    /// # Errors
    ///
    /// As [`Admission::call`].
    ///
    /// # Panics
    ///
    /// As [`Admission::call`].
    pub async fn call<M, F, T, E, K, V>(&self, classify: K, make: M) -> Result<T, CallError<E>>
    where
        M: FnMut() -> F,
        F: Future<Output = Result<T, E>>,
        K: FnMut(&Result<T, E>) -> V,
        V: Into<Verdict>,
    {
        self.admission().call(classify, make).await
    }

    /// Setbacks so far, for [`Limiter::late`]: calls refused and
    /// retries granted, counted as they happen, never reset.
    #[doc(hidden)]
    pub fn setbacks(&self) -> u64 {
        let retried = self.retry().map_or(0, crate::retry::Retry::retried);
        self.refusals.load(crate::sync::Ordering::Relaxed) + retried
    }

    /// Whose lateness an attempt that has run for the hedge delay shows,
    /// for [`Attempts::hedge`](crate::retry::Attempts::hedge). The attempt
    /// was sent at `sent` (its permit's [`Permit::started`]; `None`, never
    /// for a limiter that hedges, reads as overtaken), when
    /// [`Limiter::setbacks`] read `since`.
    ///
    /// [`Late::Congested`](crate::retry::Late::Congested) if its limit last
    /// moved down, its gate is shut or probing (a breaker not closed), it
    /// admits only a share of calls (a throttle refusing), or there was a
    /// setback since: a call refused (slots are short, and a hedge would
    /// take one a first attempt needs) or a failure retried (the
    /// dependency is failing calls, not only slow, and a retry is a failed
    /// call's only chance). Else
    /// [`Late::InOrder`](crate::retry::Late::InOrder) if no call sent
    /// after it has succeeded and others are in flight beside it, and
    /// [`Late::Alone`](crate::retry::Late::Alone) if one has (or it is
    /// alone in flight: with nothing to compare it with, it is taken to be
    /// late alone). Read without the policy's lock.
    #[doc(hidden)]
    pub fn late(&self, since: u64, sent: Option<Instant>) -> crate::retry::Late {
        use crate::retry::Late;
        let gate = self.board.gate();
        if gate.limit() == 0
            || gate.probe()
            || gate.admit_probability() < 1.0
            || self.board.falling()
            || self.setbacks() != since
        {
            Late::Congested
        } else if self.in_flight() > 1 && sent.is_some_and(|sent| self.board.in_order(sent)) {
            Late::InOrder
        } else {
            Late::Alone
        }
    }

    /// Tell the observer what became of a hedge.
    pub(crate) fn observe_hedge(&self, outcome: crate::retry::HedgeOutcome) {
        if let Some(observer) = self.observer() {
            observer.hedge(outcome);
        }
    }

    /// Tell the observer, if any, what was `decided` after a failed
    /// attempt (nothing of a first attempt refused, which is a call
    /// refused, not a retry).
    pub(crate) fn observe_retry(&self, decided: Decided) {
        let Some(observer) = self.observer() else {
            return;
        };
        if !decided.observed {
            return;
        }
        observer.retry(decided.outcome);
        if decided.dry {
            observer.retry_budget_exhausted();
        }
    }
}

impl<A, C> fmt::Debug for Limiter<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("name", &self.options.name)
            .field("in_flight", &self.slots.taken_relaxed())
            .field("limit", &self.board.gate().limit())
            .field("admit_probability", &self.board.gate().admit_probability())
            .finish_non_exhaustive()
    }
}
