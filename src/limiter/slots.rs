//! The in-flight count: one word on a cache line of its own, and the
//! shards that park released slots beside it.
//!
//! # Invariant
//!
//! The word's low 32 bits count the slots *taken*: calls in flight plus
//! slots parked on the shards (`G` in `shards.rs`); its high 32 bits count
//! successes batched for the policy, not yet handed over. Each shard's cell
//! is laid out alike: a slot parked there (0 or 1) and the successes
//! batched beside it. What a reader may assume:
//!
//! - calls in flight never exceed the slots taken, and a slot is taken
//!   only while the slots taken are below the limit the caller read (from
//!   the word: a compare-and-swap below it; from a cell: kept only if the
//!   word then reads at most the limit), so no call is admitted that would
//!   take the calls in flight above the limit it was admitted under;
//! - a slot is given back exactly once, to the word or parked in a cell,
//!   and a success batched is counted in the same atomic step that gives
//!   its slot back, so [`Slots::take_batched`] never counts a success whose
//!   call still holds a slot;
//! - the shards, once set up, stay for the limiter's life, and a thread
//!   that sees them sees them whole (the `OnceLock` that holds them
//!   publishes them with release and acquire); before they are set up, a
//!   slot can only be in the word.
//!
//! With [`Sharding::OnContention`] the shards are set up the first time a
//! compare-and-swap on the word finds that another thread moved it: while
//! other threads take and give back slots, some through the word and, once
//! they see the shards, some through the cells. Both hold the invariant
//! alone; an admission that finds the word at the limit drains the cells
//! into it first, so a slot parked on a shard a thread has just begun to
//! see never stands between a caller and a free place.
//!
//! The word, like the policy's lock, is a [`CachePadded`] field of the
//! limiter: it starts a cache line of its own (two on x86_64, which
//! prefetches adjacent lines in pairs), so that two cores writing it do not
//! also invalidate each other's copy of the read-mostly fields beside it
//! (the gate, above all). On two threads, isolating the in-flight count and
//! the policy took the aggregate rate of `Fixed` from 0.35× to 0.56× of one
//! thread's, and of `Aimd` from 0.49× to 0.76×.

use super::shards::{slots_of, Parked, Shards, ONE_BATCHED, SLOTS};
use super::Sharding;
use crate::sync::{AtomicU64, OnceLock, Ordering};

/// The in-flight word and, once set up, the shards that park released
/// slots beside it (see `shards.rs`). The shards' handle is read by every
/// admission and release, as the word is: on the same line, it costs no
/// second line.
pub(super) struct Slots {
    word: AtomicU64,
    shards: OnceLock<Shards>,
    /// When the shards are set up.
    sharding: Sharding,
}

impl Slots {
    /// No slot taken; the shards set up at once under
    /// [`Sharding::Always`].
    pub(super) fn new(sharding: Sharding) -> Self {
        Slots {
            word: AtomicU64::new(0),
            shards: match sharding {
                Sharding::Always => OnceLock::from(Shards::new(Sharding::Always)),
                _ => OnceLock::new(),
            },
            sharding,
        }
    }

    /// Take a slot if fewer than `limit` are taken; returns the slots taken
    /// then, this one included (with parked slots, an over-estimate of the
    /// calls in flight by at most the slots parked on other shards).
    #[inline]
    pub(super) fn take(&self, limit: u32) -> Option<u32> {
        if let Some(shards) = self.shards.get() {
            if shards.unpark() {
                let taken = slots_of(self.word.load(Ordering::SeqCst));
                if taken <= limit {
                    return Some(taken);
                }
                // The limit fell below the slots taken: this one goes back.
                self.word.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let mut current = self.word.load(Ordering::SeqCst);
        let mut drained = false;
        loop {
            let in_flight = slots_of(current);
            if in_flight >= limit {
                if !drained && self.drain_parked() {
                    // Slots parked on other shards are free: count them
                    // as such and look again, once.
                    drained = true;
                    current = self.word.load(Ordering::SeqCst);
                    continue;
                }
                return None;
            }
            // Below the limit, at most `MAX_LIMIT`: adding one never carries
            // into the batched successes.
            match self.word.compare_exchange_weak(
                current,
                current + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Some(in_flight + 1),
                Err(actual) => {
                    if actual != current {
                        self.contended();
                    }
                    current = actual;
                }
            }
        }
    }

    /// Another thread took or gave back a slot between our read and our
    /// write: set the shards up, if the sharding says so.
    #[cold]
    fn contended(&self) {
        if self.sharding == Sharding::OnContention {
            self.shards
                .get_or_init(|| Shards::new(Sharding::OnContention));
        }
    }

    /// Give every parked slot back to the word; whether there were any.
    fn drain_parked(&self) -> bool {
        let Some(shards) = self.shards.get() else {
            return false;
        };
        let parked = shards.drain();
        if parked == 0 {
            return false;
        }
        self.word.fetch_sub(u64::from(parked), Ordering::SeqCst);
        true
    }

    /// Give a slot back to the word.
    #[inline]
    pub(super) fn give_back(&self) {
        self.word.fetch_sub(1, Ordering::SeqCst);
    }

    /// Give a slot back to the word and count a success batched for the
    /// policy, in one step; returns the successes batched there before it.
    #[inline]
    pub(super) fn give_back_batching(&self) -> u64 {
        self.word.fetch_add(ONE_BATCHED - 1, Ordering::SeqCst) >> 32
    }

    /// Park a released slot, with `successes` batched beside it, on this
    /// thread's shard, if there are shards and room on this one under the
    /// limit `limit` gives (read only if there are shards). On `None` the
    /// caller still holds the slot and the successes.
    #[inline]
    pub(super) fn park(&self, successes: u64, limit: impl FnOnce() -> u32) -> Option<Parked<'_>> {
        self.shards.get()?.park(limit(), successes)
    }

    /// Move the slots parked on the shard `parked` was parked on back to
    /// the word (someone waits for one).
    pub(super) fn unpark_to_word(&self, parked: &Parked<'_>) {
        let slots = parked.unpark_all();
        if slots != 0 {
            self.word.fetch_sub(u64::from(slots), Ordering::SeqCst);
        }
    }

    /// The slots taken (calls in flight plus slots parked).
    #[inline]
    pub(super) fn taken(&self) -> u32 {
        slots_of(self.word.load(Ordering::SeqCst))
    }

    /// [`Slots::taken`], with no ordering against other accesses: a
    /// figure to report, not to decide by.
    #[inline]
    pub(super) fn taken_relaxed(&self) -> u32 {
        slots_of(self.word.load(Ordering::Relaxed))
    }

    /// Calls in flight: the slots taken less those parked. With shards, read
    /// from more than one word (see [`Limiter::in_flight`](super::Limiter::in_flight)).
    #[inline]
    pub(super) fn in_flight(&self) -> u32 {
        let taken = self.taken();
        match self.shards.get() {
            Some(shards) => taken.saturating_sub(shards.parked()),
            None => taken,
        }
    }

    /// Whether successes may be batched: in the word, or in the cells
    /// once there are shards (not looked at, one by one).
    #[inline]
    pub(super) fn may_hold_batched(&self) -> bool {
        self.word.load(Ordering::SeqCst) >> 32 != 0 || self.shards.get().is_some()
    }

    /// Take every success batched, in the word and on the shards; returns
    /// how many.
    #[inline]
    pub(super) fn take_batched(&self) -> u64 {
        let mut batched = 0;
        if self.word.load(Ordering::SeqCst) >> 32 != 0 {
            batched = self.word.fetch_and(SLOTS, Ordering::SeqCst) >> 32;
        }
        if let Some(shards) = self.shards.get() {
            batched += shards.take_batched();
        }
        batched
    }
}
