//! Several policies composed into one: a breaker in front of an adaptive
//! limit, a bulkhead around a throttle.

use std::fmt;
use std::time::{Duration, Instant};

use crate::{Algorithm, ConfigError, Feedback, Gate, Refusal, Sample, Snapshot, Transition};

/// Any number of policies behaving as one.
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
///   stack inside a stack reads as one list; [`Algorithm::refused_by`] returns
///   an index into that list.
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
/// assert_eq!(stack.gate().limit, 10);
///
/// // A failure reaches the throttle, which starts rejecting.
/// stack.on_sample(Instant::now(), &Sample::new(Outcome::Overload, Duration::from_millis(5), 1));
/// assert!(stack.gate().admit_probability < 1.0);
/// assert_eq!(stack.refused_by(Refusal::Throttle), 1);
/// assert_eq!(stack.refused_by(Refusal::Limit), 0);
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
    /// With field `stack.members` if `members` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_algorithms::{Algorithm, Fixed, Stack};
    ///
    /// let stack = Stack::new(vec![Box::new(Fixed::new(8)?), Box::new(Fixed::new(3)?)])?;
    /// assert_eq!(stack.gate().limit, 3);
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

    /// The direct member responsible for refusing a call for `refusal`.
    fn culprit(&self, refusal: Refusal) -> usize {
        match refusal {
            Refusal::Shut => self
                .position(|g| g.is_shut())
                .unwrap_or_else(|| self.smallest_limit()),
            Refusal::Limit => self.smallest_limit(),
            Refusal::Throttle => self.argmin(|g| g.admit_probability),
            Refusal::Probe => self
                .probe_refused_by
                .filter(|&i| i < self.members.len())
                .or_else(|| self.position(|g| g.probe))
                .unwrap_or(0),
        }
    }

    fn position(&self, pred: impl Fn(&Gate) -> bool) -> Option<usize> {
        self.members
            .iter()
            .position(|m| pred(&m.gate().sanitized()))
    }

    fn smallest_limit(&self) -> usize {
        self.argmin(|g| f64::from(g.limit))
    }

    /// The first member whose sanitized gate minimises `key`.
    fn argmin(&self, key: impl Fn(&Gate) -> f64) -> usize {
        let mut best = (0, f64::INFINITY);
        for (i, m) in self.members.iter().enumerate() {
            let k = key(&m.gate().sanitized());
            if k < best.1 {
                best = (i, k);
            }
        }
        best.0
    }

    /// The flattened index of `member`'s own culprit for `refusal`.
    fn flatten(&self, member: usize, refusal: Refusal) -> usize {
        let start = self.offsets.get(member).copied().unwrap_or(0);
        let end = self
            .offsets
            .get(member + 1)
            .copied()
            .unwrap_or(self.names.len());
        let inner = self.members[member].refused_by(refusal);
        start + inner.min(end.saturating_sub(start + 1))
    }
}

impl Algorithm for Stack {
    fn name(&self) -> &'static str {
        "stack"
    }

    fn gate(&self) -> Gate {
        self.members
            .iter()
            .map(|m| m.gate().sanitized())
            .fold(Gate::unlimited(), Gate::meet)
            .sanitized()
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        for m in &mut self.members {
            m.on_sample(now, sample);
        }
    }

    fn on_admit(&mut self, now: Instant) -> bool {
        self.probe_refused_by = None;
        for (i, m) in self.members.iter_mut().enumerate() {
            if m.gate().probe && !m.on_admit(now) {
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

    /// The most any member needs.
    fn feedback(&self) -> Feedback {
        self.members
            .iter()
            .map(|m| m.feedback())
            .max()
            .unwrap_or(Feedback::Nothing)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.members.iter().filter_map(|m| m.poll_timeout()).min()
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
        let mut snapshot = Snapshot::new(self.name(), self.gate());
        if let Some(state) = self.members.iter().find_map(|m| m.snapshot().state) {
            snapshot = snapshot.with_state(state);
        }
        if let Some(raw) = self.members[self.smallest_limit()].snapshot().raw_limit {
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

    fn members(&self) -> Vec<&'static str> {
        self.names.clone()
    }

    /// - [`Refusal::Shut`]: the first member whose gate is shut (if none is,
    ///   the product of probabilities reached 0 and the member with the
    ///   smallest limit is named);
    /// - [`Refusal::Limit`]: the member with the smallest limit;
    /// - [`Refusal::Throttle`]: the member with the lowest admit probability;
    /// - [`Refusal::Probe`]: the member that refused the latest
    ///   [`Algorithm::on_admit`], or else the first probe-gated member.
    ///
    /// Ties go to the outermost member; a nested stack names its own member.
    fn refused_by(&self, refusal: Refusal) -> usize {
        self.flatten(self.culprit(refusal), refusal)
    }
}

impl fmt::Debug for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stack")
            .field("members", &self.names)
            .field("gate", &self.gate())
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
/// assert_eq!(stack.gate().limit, 10);
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
