//! Classes of calls at admission (see [`crate::priority`]): the reserve kept
//! for each class, the admit fraction spent on the most critical first, and
//! the calls each class holds.
//!
//! Every decision is the pure rule's ([`crate::algorithms::classes`]): what
//! a call must leave free, when a reserve grows or drains and by how much,
//! how an admit fraction is split. This file keeps only the numbers that
//! rule reads, in atomics so that admission takes no lock, and applies the
//! rule to them (a growth or a drain inside a compare-and-swap loop); a
//! call of a class is admitted, and its slot given back, in `admit.rs` and
//! `finish.rs` with every other call.
//!
//! Invariant: in any one state (calls in flight, what each class holds,
//! the reserves, the gate), a class is admitted whenever a less critical
//! class would be: the slots a class must leave free are those kept for
//! the classes above it, a subset of those a class below it must leave, and
//! the admit fraction is spent from the top. The state is read, then the
//! slot taken with the usual compare-and-swap: calls admitted at the same
//! instant on other threads may take a reserved slot, never one over the
//! limit.

use crate::algorithms::classes as rule;
use crate::algorithms::classes::Kept;
use crate::priority::{Class, Priorities};
use crate::sync::{AtomicU32, AtomicU64, Ordering};

pub(crate) struct Classes {
    config: Priorities,
    default: u8,
    /// Per class, most critical first: one slice, so that the few words a
    /// call reads sit together.
    state: Box<[ClassState]>,
    /// The classes with a share: a bit each, the most critical the lowest.
    shared: u32,
    /// The classes with a reserve, a bit each: so that a call looks only at
    /// the classes above it that keep anything (in the common case, none),
    /// not at each of them. A bit is set after its reserve grows from
    /// nothing, and cleared after it drains to nothing and then set again
    /// if the reserve grew meanwhile: a reserve that is not nothing always
    /// has its bit, at most a moment late.
    reserved: AtomicU32,
}

/// One class's accounting: the numbers the rule reads, as atomics.
struct ClassState {
    /// Calls it holds; not counted for the least critical class
    /// ([`rule::counted`]), which holds the calls in flight the others do
    /// not: a call of that class costs no more atomic steps than a call on
    /// a limiter without classes.
    held: AtomicU32,
    /// Its share of the limit, in 2^-24ths ([`rule::share`]).
    share: u32,
    /// Slots kept for it against less critical classes, beyond its share,
    /// in [`rule::STEP`]ths of a slot: moved only by [`rule::grown`] and
    /// [`rule::drained`].
    reserve: AtomicU64,
    /// Its recent calls that met a gate admitting a fraction of calls
    /// (every class's halved together now and then: [`rule::decays`]).
    arrivals: AtomicU64,
}

impl Classes {
    pub(crate) fn new(config: Priorities) -> Self {
        Classes {
            default: config.default_class().0,
            shared: config
                .classes
                .iter()
                .enumerate()
                .filter(|(_, c)| c.share > 0.0)
                .fold(0, |bits, (i, _)| bits | 1 << i),
            reserved: AtomicU32::new(0),
            state: config
                .classes
                .iter()
                .map(|c| ClassState {
                    held: AtomicU32::new(0),
                    share: rule::share(c.share),
                    reserve: AtomicU64::new(0),
                    arrivals: AtomicU64::new(0),
                })
                .collect(),
            config,
        }
    }

    pub(crate) fn config(&self) -> &Priorities {
        &self.config
    }

    /// `class`, or the last class if there are fewer.
    #[inline]
    pub(crate) fn clamp(&self, class: Class) -> u8 {
        class.0.min(self.last())
    }

    pub(crate) fn default_class(&self) -> u8 {
        self.default
    }

    /// The slots a call of class `c` must leave free under `limit`
    /// ([`rule::need`]), reading only the classes above it that keep
    /// anything.
    #[inline]
    pub(crate) fn need(&self, c: u8, limit: u32) -> u32 {
        let keeping = self.shared | self.reserved.load(Ordering::SeqCst);
        rule::need(usize::from(c), limit, keeping, |h| {
            let class = &self.state[h];
            Kept {
                share: class.share,
                reserve: class.reserve.load(Ordering::SeqCst),
                held: class.held.load(Ordering::Relaxed),
            }
        })
    }

    /// Class `c`'s reserve grew from nothing: it has its bit.
    fn reserved_from_nothing(&self, c: usize) {
        self.reserved.fetch_or(1 << c, Ordering::SeqCst);
    }

    /// Keep `by` [`rule::STEP`]ths of a slot fewer for class `h`, if any
    /// are kept ([`rule::drained`]).
    fn drain(&self, h: usize, by: u64) {
        let drained = self.state[h]
            .reserve
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| rule::drained(r, by));
        if matches!(drained, Ok(r) if r <= by) {
            self.drained_to_nothing(h);
        }
    }

    /// Class `c`'s reserve drained to nothing: it loses its bit, unless it
    /// grew again meanwhile (a grower sets the bit after its reserve is
    /// more than nothing, so one of the two sets it last).
    #[cold]
    fn drained_to_nothing(&self, c: usize) {
        self.reserved.fetch_and(!(1 << c), Ordering::SeqCst);
        if self.state[c].reserve.load(Ordering::SeqCst) != 0 {
            self.reserved.fetch_or(1 << c, Ordering::SeqCst);
        }
    }

    /// The least critical class: its calls are not counted.
    #[inline]
    fn last(&self) -> u8 {
        #[allow(clippy::cast_possible_truncation, reason = "at most MAX_CLASSES")]
        let last = (self.state.len() - 1) as u8;
        last
    }

    /// A call of class `c` found the limit full with `in_flight` calls in
    /// flight: its reserve grows if [`rule::grows`] says so.
    pub(crate) fn grow(&self, c: u8, limit: u32, in_flight: u32) {
        let c = usize::from(c);
        let grows = rule::grows(c, self.state.len(), in_flight, |h| {
            self.state[h].held.load(Ordering::Relaxed)
        });
        if grows {
            let grown =
                self.state[c]
                    .reserve
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| {
                        rule::grown(r, limit)
                    });
            if grown == Ok(0) {
                self.reserved_from_nothing(c);
            }
        }
    }

    /// A call of class `c` was turned away to keep slots for the classes
    /// above it: each drains as [`rule::turned_away`] says.
    pub(crate) fn shrink_above(&self, c: u8) {
        self.give_back_above(c, rule::turned_away);
    }

    /// Each class above `c` drains what `drain(held, reserve)` says.
    fn give_back_above(&self, c: u8, drain: impl Fn(u32, u64) -> Option<u64>) {
        for (h, class) in self.state[..usize::from(c)].iter().enumerate() {
            let held = class.held.load(Ordering::Relaxed);
            let reserve = class.reserve.load(Ordering::SeqCst);
            if let Some(by) = drain(held, reserve) {
                self.drain(h, by);
            }
        }
    }

    /// A waiter of class `c` waited its whole wait and was refused beside
    /// free slots: each class above drains as [`rule::starved`] says.
    pub(crate) fn starved(&self, c: u8) {
        self.give_back_above(c, rule::starved);
    }

    /// Count a call of class `c` arriving.
    #[inline]
    pub(crate) fn arrive(&self, c: u8) {
        let seen = self.state[usize::from(c)]
            .arrivals
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        if rule::decays(seen) {
            for class in self.state.iter() {
                let _ = class
                    .arrivals
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                        Some(rule::decayed(n))
                    });
            }
        }
    }

    /// The fraction of class `c`'s calls to admit when the gate admits
    /// `p` of all calls ([`rule::fraction`]).
    pub(crate) fn fraction(&self, c: u8, p: f64) -> f64 {
        let arrivals = self
            .state
            .iter()
            .map(|class| class.arrivals.load(Ordering::Relaxed));
        rule::fraction(usize::from(c), p, arrivals)
    }

    /// A call of class `c` took a slot: whether its class counts it.
    #[inline]
    pub(crate) fn took(&self, c: u8) -> bool {
        let counted = rule::counted(usize::from(c), self.state.len());
        if counted {
            self.state[usize::from(c)]
                .held
                .fetch_add(1, Ordering::Relaxed);
        }
        counted
    }

    /// A call of class `c` that its class counted ended: its reserve drains
    /// as [`rule::ended`] says.
    #[inline]
    pub(crate) fn released(&self, c: u8) {
        let class = &self.state[usize::from(c)];
        let held = class.held.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
        let reserve = class.reserve.load(Ordering::SeqCst);
        if let Some(by) = rule::ended(held, reserve) {
            self.drain(usize::from(c), by);
        }
    }

    /// Calls each class holds, most critical first, of `in_flight` in all:
    /// the least critical holds the rest.
    pub(crate) fn held(&self, in_flight: u32) -> Vec<u32> {
        let mut held: Vec<u32> = self
            .state
            .iter()
            .map(|class| class.held.load(Ordering::Relaxed))
            .collect();
        let counted = held[..held.len() - 1]
            .iter()
            .fold(0u32, |sum, &h| sum.saturating_add(h));
        if let Some(last) = held.last_mut() {
            *last = in_flight.saturating_sub(counted);
        }
        held
    }
}
