//! The board: the policy's answer ([`Published`]) copied into atomics that
//! the hot path reads without the policy's lock.
//!
//! # Invariant
//!
//! Only [`Board::store`], under the policy's lock, writes the answer, and
//! only [`Board::next_generation`], under the same lock, counts the
//! generation: answers are stored one at a time, each value only if it
//! changed, in this order: the feedback; a deferral's bounds, then its
//! `until`; the gate; when the gate expires; when the policy wants to be
//! woken; which member refuses, by name (the names of the policy in force:
//! a policy swapped by [`Limiter::update`](super::Limiter::update) brings
//! its own, kept in [`Last`]). A reader takes no lock and reads each value
//! on its own, so values read together may come from two successive
//! answers. A reader may assume:
//!
//! - the gate is one word: its limit, admit probability and probe flag are
//!   always of one answer;
//! - [`Board::covers`] loads a deferral's `until` before its bounds, which
//!   are stored before it: the bounds it reads were published with that
//!   `until` or after it, never before;
//! - the generation is counted when the policy's transitions are taken,
//!   before the answer that follows them is stored; a ticket takes it after
//!   its admission read the gate, so a call is stale when it finishes only
//!   if a transition was reported after it was admitted (one admitted under
//!   the gate of a moment before a transition may carry the newer
//!   generation).
//!
//! What a stale read can cause, and why it is safe: each is what the reader
//! would have done had it run a moment earlier, wholly before the store it
//! missed.
//!
//! - A call admitted under a gate being replaced: no call is admitted that
//!   would take the calls in flight above the limit it read (see
//!   `slots.rs`), and the next admission reads the new gate.
//! - A refusal that reads no clock under a gate whose expiry it has not yet
//!   seen: the next admission reads it, and applies what is due.
//! - A wake-up seen late: every admission and every locked event looks
//!   again, and [`Limiter::refresh`](super::Limiter::refresh) asks the
//!   policy under its lock, where the answer is current.
//! - A success held under a deferral being withdrawn: it is held with the
//!   instant it finished and handed over before the next event the policy
//!   hears of, whatever the deferral then says; one told under the lock
//!   without asking the policy anything is first checked against the
//!   deferral as the lock finds it (`finish.rs`). A success told at once
//!   that could have been held costs only the lock.
//! - A refusal that names the member that refused under the previous
//!   answer (or, just after a swap, the previous policy).

use std::time::{Duration, Instant};

use crossbeam_utils::atomic::AtomicCell;

use super::gate::{AtomicGate, Packed};
use crate::algorithms::{Deferral, Feedback, Gate, Hints, Published, Refusal, Refusers};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The policy's answer, where the hot path reads it without a lock.
pub(super) struct Board {
    gate: AtomicGate,
    /// Successes finishing before this many nanoseconds after `epoch` may be
    /// held for the policy ([`Deferral`]): 0 for none, `u64::MAX` for all.
    defer_until: AtomicU64,
    /// The slowest success that may be held, in nanoseconds.
    defer_latency: AtomicU64,
    /// The most calls in flight, at its admission, for a success that may
    /// be held.
    defer_in_flight: AtomicU32,
    /// The policy's [`Feedback`] (as `u8`), raised to `Timed` if every call
    /// is timed (`timed`).
    feedback: AtomicU8,
    /// Counts the events at which the policy reported transitions; a call
    /// admitted before the latest is stale when it finishes.
    generation: AtomicU32,
    /// Nanoseconds after `epoch` at which the policy wants to be woken
    /// ([`Published::wake_at`]); `u64::MAX` for never.
    wake: AtomicU64,
    /// Nanoseconds after `epoch` at which the gate itself expires (its
    /// `until`: an open breaker's cooldown); `u64::MAX` for never. While it
    /// is `u64::MAX`, a refusal needs no clock read: nothing can loosen the
    /// gate but a call finishing or the policy being told something.
    expires: AtomicU64,
    /// The name of the member whose gate refuses, one per [`Refusal`] (in
    /// the order of [`REFUSALS`]). Not loom's: a name read with a refusal,
    /// on which no count depends; a cell of a fat pointer, read under a
    /// seqlock that a reader never writes.
    culprits: [AtomicCell<&'static str>; REFUSALS.len()],
    /// The instant the nanoseconds above count from.
    epoch: Instant,
    /// Whether every call is timed: an observer is set, or the timeout is
    /// learned.
    timed: bool,
    /// The learned attempt timeout in nanoseconds, 0 while none is
    /// ([`crate::timeout`]); stored under the policy's lock like the
    /// answer, by [`Board::set_learned`].
    learned: AtomicU64,
    /// Calls in flight given the ceiling of a learned timeout
    /// ([`Board::start_uncut`]).
    uncut: AtomicU32,
    /// The learned hedge delay in nanoseconds, 0 while none is; stored
    /// with the learned timeout.
    hedge: AtomicU64,
    /// Whether the gate's limit last moved down (stored with the gate): a
    /// policy that is cutting sees congestion, and nothing is hedged.
    falling: AtomicBool,
    /// Whether calls may be hedged, so that successes are noted in
    /// `overtaken`.
    hedging: bool,
    /// When the latest-sent call that has succeeded was sent, in
    /// nanoseconds after the epoch plus one (0 while none has): an attempt
    /// sent before it has been overtaken.
    overtaken: AtomicU64,
}

/// What the answer last stored held (its instants, `u64::MAX` on the board
/// while `None`; its refusers), kept under the policy's lock, so that an
/// answer that has not moved is not converted again; and the names of the
/// members its refusers index, which follow the policy when it is swapped.
pub(super) struct Last {
    wake_at: Option<Instant>,
    expires: Option<Instant>,
    deferral: Option<Deferral>,
    /// The names of the policy's members (one, unless a stack), which its
    /// refusers index.
    members: Box<[&'static str]>,
    /// The refusers last stored, which index `members`; `None` when the
    /// names must be stored again (the members changed).
    refusers: Option<Refusers>,
}

impl Last {
    /// Nothing stored yet, for a policy made of `members`.
    pub(super) fn new(members: Vec<&'static str>) -> Self {
        Last {
            wake_at: None,
            expires: None,
            deferral: None,
            members: members.into_boxed_slice(),
            refusers: None,
        }
    }

    /// The policy is now made of `members` (it was swapped): whether they
    /// differ from those before, whose names the next store then replaces.
    pub(super) fn set_members(&mut self, members: Vec<&'static str>) -> bool {
        if *self.members == *members {
            return false;
        }
        self.members = members.into_boxed_slice();
        self.refusers = None;
        true
    }
}

/// The kinds of refusal, in the order of [`Board::culprits`].
const REFUSALS: [Refusal; 4] = [
    Refusal::Shut,
    Refusal::Limit,
    Refusal::Throttle,
    Refusal::Probe,
];

impl Board {
    /// A board showing `gate`, timing every call, with no deferral and no
    /// wake-up, until the first answer is stored.
    /// Calls are timed if `timed` or `hedging`, which needs their start.
    pub(super) fn new(gate: &Gate, epoch: Instant, timed: bool, hedging: bool) -> Self {
        Board {
            gate: AtomicGate::new(gate),
            defer_until: AtomicU64::new(0),
            defer_latency: AtomicU64::new(0),
            defer_in_flight: AtomicU32::new(0),
            feedback: AtomicU8::new(Feedback::Timed as u8),
            generation: AtomicU32::new(0),
            wake: AtomicU64::new(u64::MAX),
            expires: AtomicU64::new(u64::MAX),
            culprits: REFUSALS.map(|_| AtomicCell::new("unknown")),
            epoch,
            timed: timed || hedging,
            learned: AtomicU64::new(0),
            uncut: AtomicU32::new(0),
            hedge: AtomicU64::new(0),
            falling: AtomicBool::new(false),
            hedging,
            overtaken: AtomicU64::new(0),
        }
    }

    /// A call sent at `sent` succeeded: noted, where calls may be hedged,
    /// if it was sent after every success noted so far.
    #[inline]
    pub(super) fn succeeded(&self, sent: Instant) {
        if self.hedging {
            // Not a read-modify-write: of two successes noted at once, the
            // earlier-sent may be left, until the next success.
            let at = self.nanos(sent).saturating_add(1);
            if self.overtaken.load(Ordering::Relaxed) < at {
                self.overtaken.store(at, Ordering::Relaxed);
            }
        }
    }

    /// A call succeeded `at` (nanoseconds after the epoch) after running
    /// `latency`: [`Board::succeeded`], its instants already read.
    #[inline]
    pub(super) fn succeeded_at(&self, at: u64, latency: Duration) {
        if self.hedging {
            let ran = latency
                .as_secs()
                .saturating_mul(1_000_000_000)
                .saturating_add(u64::from(latency.subsec_nanos()));
            let sent = at.saturating_sub(ran).saturating_add(1);
            if self.overtaken.load(Ordering::Relaxed) < sent {
                self.overtaken.store(sent, Ordering::Relaxed);
            }
        }
    }

    /// Whether no call sent after `sent` has succeeded.
    #[inline]
    pub(super) fn in_order(&self, sent: Instant) -> bool {
        self.overtaken.load(Ordering::Relaxed) <= self.nanos(sent).saturating_add(1)
    }

    /// The learned attempt timeout, if one has been learned.
    #[inline]
    pub(super) fn learned(&self) -> Option<Duration> {
        match self.learned.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// Show `learned` as the learned attempt timeout (under the policy's
    /// lock).
    pub(super) fn set_learned(&self, learned: Option<Duration>) {
        let nanos = learned.map_or(0, |d| {
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
        });
        self.learned.store(nanos, Ordering::Relaxed);
    }

    /// The learned hedge delay, if one has been learned.
    #[inline]
    pub(super) fn hedge(&self) -> Option<Duration> {
        match self.hedge.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// Show `hedge` as the learned hedge delay (under the policy's lock).
    pub(super) fn set_hedge(&self, hedge: Option<Duration>) {
        let nanos = hedge.map_or(0, |d| {
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
        });
        self.hedge.store(nanos, Ordering::Relaxed);
    }

    /// Whether the gate's limit last moved down.
    #[inline]
    pub(super) fn falling(&self) -> bool {
        self.falling.load(Ordering::Relaxed)
    }

    /// Count one more call given the ceiling of a learned timeout, unless
    /// `most` are in flight already: whether it was counted. A slot held to
    /// the ceiling by a call that hangs is a slot the others cannot use, so
    /// the share given the ceiling is bounded in slots as well as in calls.
    /// Counted and given back by compare-and-swap: the count never passes
    /// `most`, whatever the threads racing for it.
    #[inline]
    pub(super) fn start_uncut(&self, most: u32) -> bool {
        self.uncut
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < most).then_some(n + 1)
            })
            .is_ok()
    }

    /// A call counted by [`Board::start_uncut`] has ended.
    #[inline]
    pub(super) fn end_uncut(&self) {
        self.uncut.fetch_sub(1, Ordering::Relaxed);
    }

    /// Nanoseconds from the epoch to `at` (0 before it).
    #[inline]
    pub(super) fn nanos(&self, at: Instant) -> u64 {
        // In u64, not `as_nanos`'s u128: on every timed call's path.
        let since = at.saturating_duration_since(self.epoch);
        since
            .as_secs()
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(since.subsec_nanos()))
            .min(u64::MAX - 1)
    }

    /// The gate.
    #[inline]
    pub(super) fn gate(&self) -> Packed {
        self.gate.load()
    }

    /// Whether the gate expires by itself (an open breaker's cooldown).
    #[inline]
    pub(super) fn expires(&self) -> bool {
        self.expires.load(Ordering::SeqCst) != u64::MAX
    }

    #[inline]
    pub(super) fn feedback(&self) -> Feedback {
        match self.feedback.load(Ordering::Relaxed) {
            0 => Feedback::Nothing,
            1 => Feedback::Outcomes,
            _ => Feedback::Timed,
        }
    }

    /// How many times the policy has reported transitions, modulo 2^21 (as
    /// a ticket keeps it).
    #[inline]
    pub(super) fn generation(&self) -> u32 {
        self.generation.load(Ordering::SeqCst) & super::permit::GENERATION
    }

    /// The policy reported transitions: calls admitted before are stale.
    #[inline]
    pub(super) fn next_generation(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether the policy wants to be woken at some instant.
    #[inline]
    pub(super) fn wakes(&self) -> bool {
        self.wake.load(Ordering::SeqCst) != u64::MAX
    }

    /// Whether the policy is due to be woken at `now`.
    #[inline]
    pub(super) fn wake_due(&self, now: Instant) -> bool {
        let wake = self.wake.load(Ordering::SeqCst);
        // Most gates never expire: skip the clock arithmetic for them.
        wake != u64::MAX && self.nanos(now) >= wake
    }

    /// Whether the policy is due to be woken `at` nanoseconds after the
    /// epoch.
    #[inline]
    pub(super) fn wake_due_at(&self, at: u64) -> bool {
        at >= self.wake.load(Ordering::SeqCst)
    }

    /// When the policy wants to be woken, if ever.
    #[inline]
    pub(super) fn wake_at(&self) -> Option<Instant> {
        match self.wake.load(Ordering::SeqCst) {
            u64::MAX => None,
            n => self.epoch.checked_add(Duration::from_nanos(n)),
        }
    }

    /// How long from `now` until the policy is woken, if it asked to be.
    #[inline]
    pub(super) fn retry_after(&self, now: Instant) -> Option<Duration> {
        match self.wake.load(Ordering::SeqCst) {
            u64::MAX => None,
            wake => Some(Duration::from_nanos(wake.saturating_sub(self.nanos(now)))),
        }
    }

    /// Until when (in nanoseconds after the epoch) a success of a call
    /// admitted at `generation` with `in_flight` calls in flight may be
    /// held: 0 if it may not be (stale, or too many calls in flight for the
    /// deferral), `u64::MAX` whenever it finishes.
    #[inline(always)]
    pub(super) fn may_hold_until(&self, generation: u32, in_flight: u32) -> u64 {
        if generation == self.generation()
            && in_flight <= self.defer_in_flight.load(Ordering::SeqCst)
        {
            self.defer_until.load(Ordering::SeqCst)
        } else {
            0
        }
    }

    /// Whether the deferral covers a success that took `latency`, admitted
    /// with `in_flight` calls in flight, and finished `at` nanoseconds after
    /// the epoch.
    #[inline]
    pub(super) fn covers(&self, at: u64, latency: Duration, in_flight: u32) -> bool {
        let until = self.defer_until.load(Ordering::SeqCst);
        until != 0
            && (until == u64::MAX || at < until)
            && u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX)
                <= self.defer_latency.load(Ordering::SeqCst)
            && in_flight <= self.defer_in_flight.load(Ordering::SeqCst)
    }

    /// The member whose gate refused, by the kind of refusal.
    #[inline]
    pub(super) fn culprit(&self, refusal: Refusal) -> &'static str {
        let at = REFUSALS.iter().position(|r| *r == refusal).unwrap_or(0);
        self.culprits[at].load()
    }

    /// Store the policy's answer, `last` the one stored before it; whether
    /// the gate changed.
    #[inline(always)]
    pub(super) fn store(&self, published: &Published, last: &mut Last) -> bool {
        let Hints {
            feedback, deferral, ..
        } = published.hints;
        let feedback = if self.timed {
            Feedback::Timed
        } else {
            feedback
        } as u8;
        if self.feedback.load(Ordering::Relaxed) != feedback {
            self.feedback.store(feedback, Ordering::Relaxed);
        }
        if last.deferral != deferral {
            last.deferral = deferral;
            let (until, latency, in_flight) = match deferral {
                None => (0, 0, 0),
                Some(Deferral {
                    until,
                    max_latency,
                    max_in_flight,
                }) => (
                    until.map_or(u64::MAX, |t| self.nanos(t)),
                    u64::try_from(max_latency.as_nanos()).unwrap_or(u64::MAX),
                    max_in_flight,
                ),
            };
            self.defer_latency.store(latency, Ordering::SeqCst);
            self.defer_in_flight.store(in_flight, Ordering::SeqCst);
            self.defer_until.store(until, Ordering::SeqCst);
        }
        let gate = published.gate;
        let before = self.gate.load().limit();
        let changed = self.gate.store(Packed::new(&gate));
        if changed && gate.limit != before {
            self.falling.store(gate.limit < before, Ordering::Relaxed);
        }
        if last.expires != gate.until {
            last.expires = gate.until;
            let expires = gate.until.map_or(u64::MAX, |t| self.nanos(t));
            self.expires.store(expires, Ordering::SeqCst);
        }
        if last.wake_at != published.wake_at {
            last.wake_at = published.wake_at;
            let wake = published.wake_at.map_or(u64::MAX, |t| self.nanos(t));
            self.wake.store(wake, Ordering::SeqCst);
        }
        if last.refusers != Some(published.refusers) {
            last.refusers = Some(published.refusers);
            for (cell, refusal) in self.culprits.iter().zip(REFUSALS) {
                let name = last.members.get(published.refusers.get(refusal));
                cell.store(name.copied().unwrap_or("unknown"));
            }
        }
        changed
    }
}
