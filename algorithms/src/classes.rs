//! Classes of calls, most critical first: the slots kept for each class
//! against the classes below it, and an admit fraction split among them.
//!
//! A runtime that sorts calls into classes (rheostat's `priority` module)
//! makes every decision about them with the functions here, and keeps only
//! the numbers they read, in whatever cells its hot path needs (rheostat
//! keeps them in atomics and applies [`grown`] and [`drained`] inside
//! compare-and-swap loops). The numbers, per class, are plain integers:
//!
//! - its **share**: the part of the limit configured for it, in
//!   2<sup>−24</sup>ths of the limit ([`share`]);
//! - its **reserve**: slots kept for it beyond its share, in [`STEP`]ths of
//!   a slot, from nothing up to the limit's worth;
//! - what it **holds**: its calls in flight (not counted for the least
//!   critical class, see [`counted`]);
//! - its **arrivals**: its recent calls that met a gate admitting a fraction
//!   of calls.
//!
//! The rules, each stated once below:
//!
//! - A call of class `c` leaves free, for each more critical class, the
//!   slots kept for it (its share of the limit or its reserve, whichever is
//!   more, rounded up) that it does not use: [`need`].
//! - A reserve **grows** a slot when a call of its class finds the limit
//!   full while a less critical class holds slots ([`grows`], [`grown`]).
//! - It **drains** a [`STEP`]th of a slot when a call of its class ends
//!   while the class uses under three quarters of it ([`ended`]); a whole
//!   slot when a less critical call is turned away while the class holds
//!   nothing ([`turned_away`]); a whole slot when a waiter of a less
//!   critical class times out beside free slots while the class keeps more
//!   than it uses ([`starved`]). [`drained`] applies a drain.
//! - A gate that admits a fraction `p` of calls spends it on the most
//!   critical classes first, in proportion to their recent arrivals
//!   ([`fraction`]); the counts halve together every [`DECAY_AT`] arrivals
//!   of one class ([`decays`], [`decayed`]).
//!
//! Invariant: in any one state, a class is admitted whenever a less
//! critical class would be. The slots a class must leave free are those
//! kept for the classes above it, a subset of those a class below it must
//! leave ([`need`] never falls from one class to the next), and the admit
//! fraction is spent from the top ([`fraction`] never gives a class with
//! arrivals less than a less critical one).
//!
//! # No clock
//!
//! Unlike the policies of this crate, nothing here takes `now`: no rule
//! depends on time. A reserve moves by events, each of which the runtime
//! reports when it happens: a call that finds the limit full, a call that
//! ends, a call turned away, a waiter that times out (the wait is timed by
//! the runtime; the rule hears only that it ended empty-handed). The
//! arrival counts decay by arrivals, not by age, so the split follows the
//! last few thousand calls at whatever pace they come. A rate per second
//! would have to be configured, and would be too slow for one dependency
//! and too fast for another; these rules are paced by the traffic they
//! judge.
//!
//! # Examples
//!
//! Two classes, critical (0) and sheddable (1), under a limit of 4, driven
//! by hand:
//!
//! ```
//! use rheostat_algorithms::classes::{self, Kept};
//!
//! let limit = 4;
//! let mut critical = Kept::default(); // no share, no reserve, nothing held
//!
//! // Sheddable calls hold all 4 slots; a critical call finds the limit
//! // full, while a less critical class holds slots: its reserve grows a slot.
//! assert!(classes::grows(0, 2, 4, |_| critical.held));
//! critical.reserve = classes::grown(critical.reserve, limit).expect("under the limit");
//! assert_eq!(critical.slots(limit), 1);
//!
//! // A sheddable call now leaves that slot free; a critical call leaves
//! // nothing (no class above it keeps anything).
//! assert_eq!(classes::need(1, limit, 0b01, |_| critical), 1);
//! assert_eq!(classes::need(0, limit, 0b01, |_| critical), 0);
//!
//! // The critical class takes the slot, and its call ends: it then uses
//! // none of the slot kept for it, which drains by a 64th.
//! critical.held = 1;
//! assert_eq!(classes::need(1, limit, 0b01, |_| critical), 0);
//! critical.held = 0;
//! let by = classes::ended(critical.held, critical.reserve).expect("under three quarters");
//! critical.reserve = classes::drained(critical.reserve, by).expect("something was kept");
//! assert_eq!(critical.reserve, classes::STEP - 1);
//!
//! // A sheddable call is turned away for that slot while the critical
//! // class holds nothing: the slot goes back whole.
//! let by = classes::turned_away(critical.held, critical.reserve).expect("it holds nothing");
//! critical.reserve = classes::drained(critical.reserve, by).expect("something was kept");
//! assert_eq!(critical.reserve, 0);
//! assert_eq!(classes::need(1, limit, 0b01, |_| critical), 0);
//! ```

/// A slot of reserve, in the units a reserve is kept in.
///
/// A reserve grows a whole slot at a time and drains a `STEP`th of a slot
/// at a time (each time a call of its class ends with room to spare), so
/// it settles where its class finds the limit full about once for every
/// `STEP` of its calls that end with room to spare: refusals of the class
/// are rare, and room it stops using drains back to the classes below
/// within a few `STEP`s of calls. In the mixed-criticality brownout of
/// rheostat's comparison this serves 99.1% of critical calls; a reserve
/// drained by every refusal of a sheddable call instead, as first built,
/// served 98.7%.
pub const STEP: u64 = 64;

/// Arrivals of one class at which every class's count halves.
///
/// The split of an admit fraction follows the mix of the last few thousand
/// calls that met such a gate: each halving leaves older calls half the
/// weight, so the counts hold between [`DECAY_AT`]` / 2` and [`DECAY_AT`]
/// calls of the busiest class, whatever their pace. Counting arrivals
/// rather than time needs no rate to be set.
pub const DECAY_AT: u64 = 8192;

/// A whole limit, as a [`share`]: shares are kept in 2<sup>−24</sup>ths.
///
/// Fine enough that a share which is a whole number of slots of the limit
/// (0.3 of 10) keeps exactly that many at any limit up to 2<sup>24</sup>:
/// the share is rounded down and the slots up ([`share`]), and the error
/// is under a slot. A share times any limit fits in a `u64`.
pub const SHARE_ONE: u32 = 1 << 24;

/// A share of the limit, `fraction` in `[0, 1]`, in 2<sup>−24</sup>ths.
///
/// Rounded down here, and the slots it keeps rounded up in
/// [`Kept::slots`]: a share of 0.3 at a limit of 10 keeps 3 slots, not 4,
/// and a share of 0.17 at a limit of 1 keeps the one slot, as Netflix's
/// partitions do (a configured share is kept whole).
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::{share, Kept};
///
/// let kept = |fraction, limit| Kept { share: share(fraction), ..Kept::default() }.slots(limit);
/// assert_eq!(kept(0.3, 10), 3);
/// assert_eq!(kept(0.17, 1), 1);
/// assert_eq!(kept(0.0, 1000), 0);
/// ```
#[inline]
pub fn share(fraction: f64) -> u32 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a share in [0, 1] times 2^24, rounded down; out of range saturates"
    )]
    let share = (fraction * f64::from(SHARE_ONE)) as u32;
    share
}

/// Whether the calls of class `c`, of `classes`, are counted in what it
/// holds: every class's but the least critical's.
///
/// The least critical class holds the calls in flight the others do not:
/// nothing is kept for it (there is no class below it to keep anything
/// against), and no class below it asks what it holds, so a runtime need
/// not count its calls, and a call of that class costs no more than a call
/// on a limiter without classes. It is never [`grows`]'s to grow.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::counted;
///
/// assert!(counted(0, 4) && counted(2, 4));
/// assert!(!counted(3, 4));
/// assert!(!counted(0, 1));
/// ```
#[inline]
pub const fn counted(c: usize, classes: usize) -> bool {
    c + 1 < classes
}

/// One class as [`need`] reads it: what is kept for it and what it holds.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::{share, Kept, STEP};
///
/// // A share of a quarter, and a reserve of 3.5 slots, at a limit of 10:
/// // the reserve, rounded up, is more.
/// let kept = Kept { share: share(0.25), reserve: 3 * STEP + STEP / 2, held: 1 };
/// assert_eq!(kept.slots(10), 4);
/// assert_eq!(kept.unused(10), 3);
/// // At a limit of 100, the share is more.
/// assert_eq!(kept.slots(100), 25);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    /// Its share of the limit, in 2<sup>−24</sup>ths ([`share`]).
    pub share: u32,
    /// Its reserve, in [`STEP`]ths of a slot.
    pub reserve: u64,
    /// Its calls in flight.
    pub held: u32,
}

impl Kept {
    /// The slots kept for the class under `limit`: its share of the limit
    /// or its reserve, whichever is more, each rounded up to a whole slot.
    ///
    /// The share is a floor: a reserve adapts above it, and never below
    /// what was configured.
    #[inline]
    pub fn slots(self, limit: u32) -> u32 {
        let share = (u64::from(self.share) * u64::from(limit)).div_ceil(u64::from(SHARE_ONE));
        let reserve = self.reserve.div_ceil(STEP);
        u32::try_from(share.max(reserve)).unwrap_or(u32::MAX)
    }

    /// The slots kept for the class under `limit` that it does not use:
    /// those a less critical call must leave free.
    #[inline]
    pub fn unused(self, limit: u32) -> u32 {
        self.slots(limit).saturating_sub(self.held)
    }
}

/// The slots a call of class `c` must leave free under `limit`: for each
/// more critical class, those kept for it that it does not use
/// ([`Kept::unused`]).
///
/// `keeping` has a bit for each class that may keep a slot (one with a
/// share or a reserve), bit 0 the most critical: a class outside it keeps
/// nothing and is not read, so that a call looks only at the classes above
/// it that keep anything (in the common case, none). `class(h)` reads class
/// `h`; it is asked only of classes above `c`, each once, most critical
/// first. At most 32 classes.
///
/// A call is admitted if the calls in flight, plus one, plus `need` fit in
/// the limit. A class's own slots and those below it never count: a class
/// competes with the classes below it, not with itself. So the need of a
/// class is never more than that of a class below it, which leaves free
/// everything it does and the class between them too.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::{need, Kept, STEP};
///
/// // Critical keeps 2 slots and uses 1; critical-plus above it keeps none.
/// let classes = [
///     Kept::default(),
///     Kept { reserve: 2 * STEP, held: 1, ..Kept::default() },
///     Kept::default(),
/// ];
/// let keeping = 0b010;
/// assert_eq!(need(0, 10, keeping, |h| classes[h]), 0);
/// assert_eq!(need(1, 10, keeping, |h| classes[h]), 0);
/// assert_eq!(need(2, 10, keeping, |h| classes[h]), 1);
/// ```
#[inline]
pub fn need(c: usize, limit: u32, keeping: u32, class: impl Fn(usize) -> Kept) -> u32 {
    let below_c = match u32::try_from(c) {
        Ok(c) if c < u32::BITS => (1 << c) - 1,
        _ => u32::MAX,
    };
    let mut above = keeping & below_c;
    let mut need = 0u32;
    while above != 0 {
        let h = above.trailing_zeros() as usize;
        above &= above - 1;
        need = need.saturating_add(class(h).unused(limit));
    }
    need
}

/// Whether the reserve of class `c` (of `classes`) grows when one of its
/// calls finds the limit full with `in_flight` calls in flight; `held(h)`
/// reads what class `h` holds, asked of `c` and the classes above it.
///
/// It grows if a less critical class holds slots: some of the calls in
/// flight are of none of `c` and the classes above it. Keeping a slot
/// for `c` holds back only the classes below it, so where they hold
/// nothing, a reserve would hold back no one and only linger. The least
/// critical class has no class below it and never grows ([`counted`]).
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::grows;
///
/// // Of 4 classes, critical (1) holds 2 of the 4 calls in flight,
/// // critical-plus (0) one: the fourth is less critical.
/// let held = [1, 2, 0, 0];
/// assert!(grows(1, 4, 4, |h| held[h]));
/// // With only 3 in flight, every call is critical or above.
/// assert!(!grows(1, 4, 3, |h| held[h]));
/// // The least critical class never grows.
/// assert!(!grows(3, 4, 4, |h| held[h]));
/// ```
#[inline]
pub fn grows(c: usize, classes: usize, in_flight: u32, held: impl Fn(usize) -> u32) -> bool {
    counted(c, classes) && in_flight > (0..=c).map(held).fold(0u32, u32::saturating_add)
}

/// A reserve of `reserve` [`STEP`]ths grown by one slot, no further than
/// `limit` slots; `None` if it already keeps the limit or more.
///
/// One slot per call that finds the limit full: a class that needs room
/// gets it within a few refusals, as fast as its calls are refused. Past
/// the limit, a reserve would keep nothing more and take longer to drain.
/// A reserve kept under a larger limit is left as it is, never cut by a
/// growth.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::{grown, STEP};
///
/// assert_eq!(grown(0, 2), Some(STEP));
/// assert_eq!(grown(STEP + 1, 2), Some(2 * STEP));
/// assert_eq!(grown(2 * STEP, 2), None);
/// ```
#[inline]
pub fn grown(reserve: u64, limit: u32) -> Option<u64> {
    let most = u64::from(limit) * STEP;
    (reserve < most).then(|| (reserve + STEP).min(most))
}

/// What a reserve of `reserve` [`STEP`]ths drains when a call of its class
/// ends, leaving `held` of its calls in flight: a [`STEP`]th of a slot if
/// the class then uses under three quarters of what is kept for it.
///
/// Slowly, so that the reserve settles where its class is refused about
/// once for every [`STEP`] calls that end with room to spare. Three
/// quarters, because a class that uses most of its reserve still needs
/// it, and less would hold room it does not use: drained only below half
/// of it, critical calls in the mixed-criticality brownout were served
/// 99.5–99.7% of the time rather than 99.1%, but AIMD then held its limit
/// so low that it served half of the bound.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::{ended, STEP};
///
/// // Four slots kept: 2 in use is under three quarters, 3 is not.
/// assert_eq!(ended(2, 4 * STEP), Some(1));
/// assert_eq!(ended(3, 4 * STEP), None);
/// assert_eq!(ended(0, 0), None);
/// ```
#[inline]
pub fn ended(held: u32, reserve: u64) -> Option<u64> {
    (u64::from(held) * 4 * STEP < reserve.saturating_mul(3)).then_some(1)
}

/// What the reserve of a class drains when a less critical call is turned
/// away to keep slots for the classes above it, this one among them, and
/// the class holds `held` calls (`reserve` is not read): a whole slot if
/// it holds nothing.
///
/// A class that holds nothing is not using the room kept for it, and a
/// call turned away for it is lost for nothing; refusals come fast when
/// they come, so the slot goes back whole rather than a [`STEP`]th at a
/// time, and a class that stopped calling gives its room back within as
/// many refusals as it keeps slots.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::{turned_away, STEP};
///
/// assert_eq!(turned_away(0, 3 * STEP), Some(STEP));
/// assert_eq!(turned_away(1, 3 * STEP), None);
/// ```
#[inline]
pub fn turned_away(held: u32, reserve: u64) -> Option<u64> {
    let _ = reserve;
    (held == 0).then_some(STEP)
}

/// What the reserve of a class above drains when a waiter of a less
/// critical class waited its whole wait and was refused beside free slots,
/// and the class holds `held` calls: a whole slot if it keeps more than it
/// uses.
///
/// The free slots were kept for the classes above the waiter, which left
/// them unused all the while. A reserve that grew while the limit was full
/// otherwise drained only a [`STEP`]th of a slot per call of its own class,
/// and callers of the classes below waited and timed out beside free slots
/// for seconds (20 of 20 sheddable waiters beside 8 free slots). Only the
/// reserve counts here, not the share: a configured share is kept whatever
/// the waiters below it.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::{starved, STEP};
///
/// assert_eq!(starved(1, 2 * STEP), Some(STEP));
/// assert_eq!(starved(2, 2 * STEP), None);
/// // A part of a slot is kept as a whole one.
/// assert_eq!(starved(1, STEP + 1), Some(STEP));
/// ```
#[inline]
pub fn starved(held: u32, reserve: u64) -> Option<u64> {
    (reserve.div_ceil(STEP) > u64::from(held)).then_some(STEP)
}

/// A reserve of `reserve` [`STEP`]ths drained by `by` of them, no lower
/// than nothing; `None` if it kept nothing.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::{drained, STEP};
///
/// assert_eq!(drained(STEP, 1), Some(STEP - 1));
/// assert_eq!(drained(1, STEP), Some(0));
/// assert_eq!(drained(0, STEP), None);
/// ```
#[inline]
pub fn drained(reserve: u64, by: u64) -> Option<u64> {
    (reserve > 0).then(|| reserve.saturating_sub(by))
}

/// Whether a class that has now seen `seen` arrivals halves every class's
/// count ([`decayed`]): at [`DECAY_AT`].
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::{decayed, decays, DECAY_AT};
///
/// assert!(!decays(DECAY_AT - 1));
/// assert!(decays(DECAY_AT));
/// assert_eq!(decayed(DECAY_AT), DECAY_AT / 2);
/// ```
#[inline]
pub const fn decays(seen: u64) -> bool {
    seen >= DECAY_AT
}

/// A class's arrival count after a decay: halved, so that the classes'
/// proportions are kept and older calls weigh less.
#[inline]
pub const fn decayed(count: u64) -> u64 {
    count / 2
}

/// The fraction of class `c`'s calls to admit when a gate admits `p` (in
/// `[0, 1]`) of all calls; `arrivals` are every class's recent arrivals,
/// most critical first.
///
/// `p` of the recent calls, spent on the most critical classes first: each
/// class in turn is admitted whole while the budget lasts, so the least
/// critical class is refused entirely before a more critical one loses
/// anything. A class with no recent arrivals has no part of the mix to be
/// judged by and is admitted `p` of the time (a runtime counts a call's
/// arrival before it asks, so its own class has arrivals).
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::classes::fraction;
///
/// // 30% critical traffic under a gate admitting half of all calls: every
/// // critical call goes, and 2 in 7 sheddable ones.
/// let arrivals = [300, 700];
/// assert_eq!(fraction(0, 0.5, arrivals), 1.0);
/// assert!((fraction(1, 0.5, arrivals) - 2.0 / 7.0).abs() < 1e-12);
/// ```
pub fn fraction<I>(c: usize, p: f64, arrivals: I) -> f64
where
    I: IntoIterator<Item = u64>,
    I::IntoIter: Clone,
{
    #[allow(clippy::cast_precision_loss, reason = "counts far below 2^53")]
    let count = |n: u64| n as f64;
    let arrivals = arrivals.into_iter();
    let mut budget = p * arrivals.clone().map(count).sum::<f64>();
    for (h, n) in arrivals.enumerate() {
        let count = count(n);
        if h == c {
            return if count <= 0.0 {
                p
            } else {
                (budget / count).clamp(0.0, 1.0)
            };
        }
        budget -= count.min(budget);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_grows_one_slot_at_a_time_up_to_the_limit_and_no_further() {
        let mut reserve = 0;
        for slots in 1..=3 {
            reserve = grown(reserve, 3).expect("under the limit");
            assert_eq!(reserve, slots * STEP);
        }
        assert_eq!(grown(reserve, 3), None);
        // A part of a slot grows to the limit, not past it.
        assert_eq!(grown(3 * STEP - 1, 3), Some(3 * STEP));
        // A reserve kept under a larger limit is not cut by a growth.
        assert_eq!(grown(5 * STEP, 3), None);
        assert_eq!(grown(0, 0), None);
    }

    #[test]
    fn a_reserve_grows_only_while_a_less_critical_class_holds_slots() {
        // Critical-plus holds 1, critical 1, sheddable-plus 1: 4 in flight
        // leaves one sheddable call.
        let held = [1, 1, 1, 0];
        for c in 0..3 {
            let at_or_above = u32::try_from(c + 1).expect("small");
            assert!(grows(c, 4, 4, |h| held[h]), "class {c}");
            assert!(!grows(c, 4, at_or_above, |h| held[h]), "class {c}");
        }
        assert!(!grows(3, 4, 4, |h| held[h]));
    }

    #[test]
    fn a_class_asks_what_it_and_the_classes_above_it_hold_and_no_other() {
        let held = |h: usize| {
            assert!(h <= 1, "asked what class {h} holds");
            1
        };
        assert!(grows(1, 4, 3, held));
    }

    #[test]
    fn a_reserve_drains_a_step_per_call_ending_under_three_quarters_of_it() {
        let reserve = 8 * STEP;
        assert_eq!(ended(5, reserve), Some(1));
        assert_eq!(ended(6, reserve), None);
        assert_eq!(ended(8, reserve), None);
        // A reserve of a part of a slot drains with nothing held.
        assert_eq!(ended(0, 1), Some(1));
        assert_eq!(ended(0, 0), None);
    }

    #[test]
    fn a_class_holding_nothing_gives_a_whole_slot_back_when_a_lower_call_is_turned_away() {
        assert_eq!(turned_away(0, 5 * STEP), Some(STEP));
        assert_eq!(turned_away(0, 0), Some(STEP));
        assert_eq!(turned_away(1, 5 * STEP), None);
        assert_eq!(drained(5 * STEP, STEP), Some(4 * STEP));
    }

    #[test]
    fn a_class_keeping_more_than_it_uses_gives_a_slot_back_to_a_starved_waiter() {
        assert_eq!(starved(0, 1), Some(STEP));
        assert_eq!(starved(3, 4 * STEP), Some(STEP));
        assert_eq!(starved(4, 4 * STEP), None);
        assert_eq!(starved(0, 0), None);
    }

    #[test]
    fn a_drain_stops_at_nothing_and_a_reserve_of_nothing_does_not_drain() {
        assert_eq!(drained(10, STEP), Some(0));
        assert_eq!(drained(0, 1), None);
        assert_eq!(drained(u64::MAX, u64::MAX), Some(0));
    }

    #[test]
    fn the_slots_kept_are_the_share_or_the_reserve_whichever_is_more_rounded_up() {
        let kept = |fraction: f64, reserve: u64| Kept {
            share: share(fraction),
            reserve,
            held: 0,
        };
        assert_eq!(kept(0.3, 0).slots(10), 3);
        assert_eq!(kept(0.31, 0).slots(10), 4);
        assert_eq!(kept(0.3, 3 * STEP + 1).slots(10), 4);
        assert_eq!(kept(0.0, 1).slots(10), 1);
        assert_eq!(kept(1.0, 0).slots(7), 7);
        assert_eq!(kept(1.0, 0).slots(u32::MAX), u32::MAX);
        assert_eq!(share(1.0), SHARE_ONE);
    }

    #[test]
    fn a_class_in_use_leaves_the_classes_below_it_only_what_it_does_not_use() {
        let kept = Kept {
            share: 0,
            reserve: 3 * STEP,
            held: 2,
        };
        assert_eq!(kept.unused(10), 1);
        assert_eq!(Kept { held: 5, ..kept }.unused(10), 0);
    }

    #[test]
    fn need_reads_only_the_classes_above_that_keep_anything() {
        let classes = [
            Kept {
                reserve: STEP,
                ..Kept::default()
            },
            Kept {
                reserve: 2 * STEP,
                ..Kept::default()
            },
            Kept {
                reserve: 4 * STEP,
                ..Kept::default()
            },
        ];
        // Class 1 is outside `keeping`: it is not read, and counts nothing.
        let read = |h: usize| {
            assert_ne!(h, 1, "class 1 keeps nothing");
            classes[h]
        };
        assert_eq!(need(2, 10, 0b101, read), 1);
        assert_eq!(need(3, 10, 0b101, read), 5);
        assert_eq!(need(3, 10, 0b111, |h| classes[h]), 7);
        // Any class of 32 or more is below every bit.
        assert_eq!(need(40, 10, 0b111, |h| classes[h]), 7);
    }

    #[test]
    fn the_counts_decay_by_half_at_the_decay_point() {
        assert!(!decays(0));
        assert!(decays(DECAY_AT + 1));
        assert_eq!(decayed(1), 0);
        assert_eq!(decayed(7), 3);
    }

    #[test]
    fn a_fraction_is_spent_from_the_most_critical_class_down() {
        let arrivals = [100, 200, 300, 400];
        let fractions: Vec<f64> = (0..4).map(|c| fraction(c, 0.4, arrivals)).collect();
        // 400 of 1000 to spend: 100 and 200 whole, 100 of the 300.
        assert_eq!(fractions[..2], [1.0, 1.0]);
        assert!((fractions[2] - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(fractions[3], 0.0);
    }

    #[test]
    fn a_class_with_no_arrivals_or_beyond_the_classes_is_admitted_at_the_gates_fraction() {
        assert_eq!(fraction(1, 0.25, [10, 0, 10]), 0.25);
        assert_eq!(fraction(5, 0.25, [10, 10]), 0.25);
        assert_eq!(fraction(0, 0.25, [0, 0]), 0.25);
    }

    #[test]
    fn a_gate_admitting_everything_or_nothing_admits_every_class_alike() {
        let arrivals = [3, 5, 8];
        for c in 0..3 {
            assert_eq!(fraction(c, 1.0, arrivals), 1.0);
            assert_eq!(fraction(c, 0.0, arrivals), 0.0);
        }
    }

    #[test]
    fn only_the_least_critical_class_goes_uncounted() {
        for classes in 1..=16 {
            let uncounted: Vec<usize> = (0..classes).filter(|&c| !counted(c, classes)).collect();
            assert_eq!(uncounted, [classes - 1]);
        }
    }
}
