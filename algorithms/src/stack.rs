//! Several policies composed into one: a breaker in front of an adaptive
//! limit, a bulkhead around a throttle.

use std::fmt;
use std::time::{Duration, Instant};

use crate::{Algorithm, ConfigError, Gate, Published, Refusal, Sample, Snapshot, Transition};

/// The most policies one stack may hold, those of a stack inside it
/// counted: every call asks every one of them, under the limiter's lock.
pub const MAX_MEMBERS: usize = 64;

/// Up to [`MAX_MEMBERS`] policies behaving as one.
///
/// - The gate is the [meet](Gate::meet) of the members' gates: the smallest
///   limit, the product of the admit probabilities, a probe if any member
///   probes, the earliest `until`.
/// - Every sample, every count of local rejections and every timeout reaches
///   every member, in order. Samples are passed on unchanged, `probe` flag
///   included: the stack cannot tell which member's probe a call was.
/// - While the gate has `probe` set, [`Algorithm::on_admit`] asks, in order,
///   only the members whose own gate has `probe` set, and stops at the first
///   that refuses. Members asked before it have already counted the call as
///   an admitted probe; it is not sent, so no sample for it ever arrives, and
///   they recover that allowance only through their own probe timeout. Put
///   the member most likely to refuse first (the outer breaker).
/// - [`Algorithm::members`] lists the members' own members, flattened, so a
///   stack inside a stack reads as one list; [`Published::refusers`] index
///   that list.
/// - The answer is the [meet](Published::meet) of the members' answers,
///   hints included: the stack asks for the most any member needs.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::{Algorithm, Fixed, Outcome, Refusal, Sample, Stack, Throttle, ThrottleConfig};
///
/// let mut stack = Stack::builder()
///     .push(Fixed::new(10)?)
///     .push(Throttle::new(ThrottleConfig { min_requests: 0, ..Default::default() })?)
///     .build()?;
/// assert_eq!(stack.members(), ["fixed", "throttle"]);
/// assert_eq!(stack.publish().gate.limit, 10);
///
/// // A failure reaches the throttle, which starts rejecting.
/// stack.on_sample(Instant::now(), &Sample::new(Outcome::Overload, Duration::from_millis(5), 1));
/// let published = stack.publish();
/// assert!(published.gate.admit_probability < 1.0);
/// assert_eq!(published.refusers.get(Refusal::Throttle), 1);
/// assert_eq!(published.refusers.get(Refusal::Limit), 0);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
pub struct Stack {
    members: Vec<Box<dyn Algorithm>>,
    /// Every member's `members()`, flattened; fixed at construction.
    names: Vec<&'static str>,
    /// Where each member's names start in `names`.
    offsets: Vec<usize>,
    /// The member that refused the latest `on_admit`, if it refused.
    probe_refused_by: Option<usize>,
}

impl Stack {
    /// A stack of `members`, outermost first.
    ///
    /// # Errors
    ///
    /// With field `stack.members` if `members` is empty, or if it holds
    /// more than [`MAX_MEMBERS`] policies, those of a stack inside it
    /// counted (each call asks every one of them).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_algorithms::{Algorithm, Fixed, Stack};
    ///
    /// let stack = Stack::new(vec![Box::new(Fixed::new(8)?), Box::new(Fixed::new(3)?)])?;
    /// assert_eq!(stack.publish().gate.limit, 3);
    ///
    /// let err = Stack::new(Vec::new()).expect_err("a stack needs a member");
    /// assert_eq!(err.field(), "stack.members");
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn new(members: Vec<Box<dyn Algorithm>>) -> Result<Self, ConfigError> {
        if members.is_empty() {
            return Err(ConfigError::new(
                "stack.members",
                "an empty list",
                "at least one policy",
            ));
        }
        let mut names = Vec::new();
        let mut offsets = Vec::with_capacity(members.len());
        for member in &members {
            offsets.push(names.len());
            let own = member.members();
            // A member that lists no names still occupies one index.
            if own.is_empty() {
                names.push(member.name());
            } else {
                names.extend(own);
            }
        }
        if names.len() > MAX_MEMBERS {
            return Err(ConfigError::new(
                "stack.members",
                format!("{} policies", names.len()),
                format!(
                    "at most {MAX_MEMBERS} policies (a stack inside a stack counts its members)"
                ),
            ));
        }
        Ok(Stack {
            members,
            names,
            offsets,
            probe_refused_by: None,
        })
    }

    /// A builder that adds members one at a time, outermost first.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_algorithms::{Algorithm, Fixed, Stack};
    ///
    /// let stack = Stack::builder().push(Fixed::new(4)?).build()?;
    /// assert_eq!(stack.len(), 1);
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn builder() -> StackBuilder {
        StackBuilder {
            members: Vec::new(),
        }
    }

    /// How many direct members the stack has (a nested stack counts once).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always `false`: a stack has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The direct member at `index`, outermost first.
    pub fn member(&self, index: usize) -> Option<&(dyn Algorithm + 'static)> {
        self.members.get(index).map(|m| &**m)
    }

    /// The direct member at `index`, to adjust it in place (a bulkhead's
    /// limit). Its [`Algorithm::members`] must not change.
    pub fn member_mut(&mut self, index: usize) -> Option<&mut (dyn Algorithm + 'static)> {
        self.members.get_mut(index).map(|m| &mut **m)
    }
}

impl Algorithm for Stack {
    fn name(&self) -> &'static str {
        "stack"
    }

    /// The [meet](Published::meet) of the members' answers, outermost
    /// first, each member's refusers shifted to its place in
    /// [`Algorithm::members`]; a probe refused in the latest
    /// [`Algorithm::on_admit`] is laid on the member that refused it.
    fn publish(&self) -> Published {
        let mut published = None::<Published>;
        let mut probe_refuser = None;
        for (i, member) in self.members.iter().enumerate() {
            let start = self.offsets[i];
            let end = self.offsets.get(i + 1).copied().unwrap_or(self.names.len());
            let mut own = member.publish();
            own.refusers = own.refusers.shifted(start, end - start);
            if self.probe_refused_by == Some(i) {
                probe_refuser = Some(own.refusers.get(Refusal::Probe));
            }
            published = Some(match published {
                None => Published {
                    gate: own.gate.sanitized(),
                    ..own
                },
                Some(outer) => outer.meet(own),
            });
        }
        let published = published.unwrap_or_else(|| Published::new(Gate::unlimited()));
        match probe_refuser {
            Some(index) => published.with_refusers(published.refusers.with(Refusal::Probe, index)),
            None => published,
        }
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        for m in &mut self.members {
            m.on_sample(now, sample);
        }
    }

    fn on_admit(&mut self, now: Instant) -> bool {
        self.probe_refused_by = None;
        for (i, m) in self.members.iter_mut().enumerate() {
            if m.publish().gate.probe && !m.on_admit(now) {
                self.probe_refused_by = Some(i);
                return false;
            }
        }
        true
    }

    fn on_rejected(&mut self, now: Instant, count: u64) {
        for m in &mut self.members {
            m.on_rejected(now, count);
        }
    }

    /// Hands the batch to every member: each counts it, or replays it.
    fn on_successes(&mut self, now: Instant, count: u64) {
        for m in &mut self.members {
            m.on_successes(now, count);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        for m in &mut self.members {
            m.handle_timeout(now);
        }
    }

    /// The stack's gate, the first breaker state any member reports, and the
    /// unrounded limit of the member holding the smallest limit, if it keeps
    /// one.
    fn snapshot(&self) -> Snapshot {
        let published = self.publish();
        let mut snapshot = Snapshot::new(self.name(), published.gate);
        if let Some(state) = self.members.iter().find_map(|m| m.snapshot().state) {
            snapshot = snapshot.with_state(state);
        }
        let smallest = self
            .offsets
            .iter()
            .rposition(|&start| start <= published.refusers.get(Refusal::Limit))
            .unwrap_or(0);
        if let Some(raw) = self.members[smallest].snapshot().raw_limit {
            snapshot = snapshot.with_raw_limit(raw);
        }
        snapshot
    }

    fn poll_transition(&mut self) -> Option<Transition> {
        self.members.iter_mut().find_map(|m| m.poll_transition())
    }

    /// The shortest of the members' probe timeouts: past it, some member
    /// has already counted the probe as failed.
    fn probe_timeout(&self) -> Option<Duration> {
        self.members.iter().filter_map(|m| m.probe_timeout()).min()
    }

    /// Every member with a breaker is held (or let go); whether any was.
    fn hold_closed(&mut self, now: Instant, hold: bool) -> bool {
        let mut any = false;
        for member in &mut self.members {
            // Every member, not only up to the first with a breaker.
            any |= member.hold_closed(now, hold);
        }
        any
    }

    fn members(&self) -> Vec<&'static str> {
        self.names.clone()
    }
}

impl fmt::Debug for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stack")
            .field("members", &self.names)
            .field("gate", &self.publish().gate)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Stack`] one member at a time; see [`Stack::builder`].
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::{Algorithm, Aimd, AimdConfig, Fixed, Stack};
///
/// let stack = Stack::builder()
///     .push(Fixed::new(100)?)
///     .push(Aimd::new(AimdConfig::default())?)
///     .build()?;
/// assert_eq!(stack.members(), ["fixed", "aimd"]);
/// // Aimd starts at 10 and doubles from there: the tighter gate binds.
/// assert_eq!(stack.publish().gate.limit, 10);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[must_use]
pub struct StackBuilder {
    members: Vec<Box<dyn Algorithm>>,
}

impl StackBuilder {
    /// Add `policy` inside the members added so far.
    pub fn push(mut self, policy: impl Algorithm + 'static) -> Self {
        self.members.push(Box::new(policy));
        self
    }

    /// Add an already boxed policy.
    pub fn push_boxed(mut self, policy: Box<dyn Algorithm>) -> Self {
        self.members.push(policy);
        self
    }

    /// The stack.
    ///
    /// # Errors
    ///
    /// With field `stack.members` if nothing was pushed.
    pub fn build(self) -> Result<Stack, ConfigError> {
        Stack::new(self.members)
    }
}

impl fmt::Debug for StackBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.members.iter().map(|m| m.name()).collect();
        f.debug_struct("StackBuilder")
            .field("members", &names)
            .finish()
    }
}
