//! The in-flight count: one word on a cache line of its own, and the
//! shards that park released slots beside it.
//!
//! The word, like the policy's lock, is a [`CachePadded`] field of the
//! limiter: it starts a cache line of its own (two on x86_64, which
//! prefetches adjacent lines in pairs), so that two cores writing it do not
//! also invalidate each other's copy of the read-mostly fields beside it
//! (the gate, above all). On two threads, isolating the in-flight count and
//! the policy took the aggregate rate of `Fixed` from 0.35× to 0.56× of one
//! thread's, and of `Aimd` from 0.49× to 0.76×.

use super::*;

/// The in-flight word and, once set up, the shards that park released
/// slots beside it (see `shards.rs`). The shards' handle is read by every
/// admission and release, as the word is: on the same line, it costs no
/// second line.
pub(super) struct Slots {
    pub(super) word: AtomicU64,
    pub(super) shards: OnceLock<Shards>,
}

impl std::ops::Deref for Slots {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.word
    }
}

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Take a slot if fewer than `limit` are taken; returns the slots taken
    /// then, this one included (with parked slots, an over-estimate of the
    /// calls in flight by at most the slots parked on other shards).
    #[inline]
    pub(super) fn take_slot(&self, limit: u32) -> Option<u32> {
        if let Some(shards) = self.slots.shards.get() {
            if shards.unpark() {
                let taken = slots_of(self.slots.load(Ordering::SeqCst));
                if taken <= limit {
                    return Some(taken);
                }
                // The limit fell below the slots taken: this one goes back.
                self.slots.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let mut current = self.slots.load(Ordering::SeqCst);
        let mut drained = false;
        loop {
            let in_flight = slots_of(current);
            if in_flight >= limit {
                if !drained && self.drain_parked() {
                    // Slots parked on other shards are free: count them
                    // as such and look again, once.
                    drained = true;
                    current = self.slots.load(Ordering::SeqCst);
                    continue;
                }
                return None;
            }
            // Below the limit, at most `MAX_LIMIT`: adding one never carries
            // into the batched successes.
            match self.slots.compare_exchange_weak(
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
    /// write: set the shards up, if the options say so.
    ///
    /// Not under loom: `std`'s `OnceLock` publishes the shards, and loom,
    /// which cannot see that ordering, would report their first use on
    /// another thread as a race. The loom models park with
    /// [`Sharding::Always`], whose shards exist before any thread starts.
    #[cold]
    pub(super) fn contended(&self) {
        if cfg!(not(rheostat_loom))
            && self.options.sharding == Sharding::OnContention
            && self.slots.shards.get().is_none()
        {
            let _ = self.slots.shards.set(Shards::new(Sharding::OnContention));
        }
    }

    /// Give every parked slot back to the shared count; whether there were
    /// any.
    pub(super) fn drain_parked(&self) -> bool {
        let Some(shards) = self.slots.shards.get() else {
            return false;
        };
        let parked = shards.drain();
        if parked == 0 {
            return false;
        }
        self.slots.fetch_sub(u64::from(parked), Ordering::SeqCst);
        true
    }

    /// Park a released slot, with `successes` batched beside it, on this
    /// thread's shard, if there are shards and room on this one.
    #[inline]
    pub(super) fn park(&self, successes: u64) -> Option<Parked<'_>> {
        self.slots
            .shards
            .get()?
            .park(self.gate.load().limit(), successes)
    }
}
