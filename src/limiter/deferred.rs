//! Timed successes held for the policy without its lock, each with the
//! instant it finished, and handed over before the next event the policy
//! hears of (an untimed one is only counted: see `finish.rs`).
//!
//! A latency policy (Vegas, Gradient, the latency mode of Aimd) learns from
//! every call but moves its gate only when its window closes. Taking its
//! lock for each finished call made threads sharing one limiter queue on
//! that lock: two threads made about 0.6 of one thread's rate. While the
//! policy publishes a [`Deferral`](crate::algorithms::Deferral), a timed
//! success it covers is pushed instead on a short buffer of the finishing thread's
//! own — one per shard, each behind its own lock on its own cache line —
//! and the buffers are emptied into the policy, oldest first, under its
//! lock, before the next event it hears of: a call the deferral does not
//! cover, a timeout, a refusal it counts, an update, or a buffer filling up.
//!
//! The buffers are set up the first time a thread finds the policy's lock
//! taken (or at once, with [`Sharding::Always`](super::Sharding::Always)):
//! one thread alone gains nothing from them — its lock is never contended —
//! and a limiter only ever used by one thread at a time keeps no buffer.
//!
//! # Invariant
//!
//! Every sample pushed is taken exactly once: a buffer's bit in `marks` is
//! set, under the buffer's lock, by the push that makes it non-empty, and
//! a hand-over ([`Deferred::take`]) clears the bits before it empties the
//! buffers they mark, each under its lock. A push that comes between the
//! two is emptied with the rest; one that comes after sets the bit again,
//! and is taken by the next hand-over. A sample held in a buffer whose bit
//! is not set is one being pushed: its push sets the bit before it lets go
//! of the buffer's lock. The buffers, once set up, stay for the limiter's life; a thread
//! that sees them sees them whole (their `OnceLock` publishes them with
//! release and acquire), and before they are set up nothing is pushed.
//! The set-up may come while other threads finish calls: a thread that
//! has not seen the buffers yet tells its success under the policy's lock
//! instead, after handing over whatever is held when it looks (see
//! `pending` in `finish.rs`).

use std::time::Instant;

use super::shards::{index, shard_count};
use crossbeam_utils::CachePadded;

use crate::algorithms::Sample;
use crate::sync::{AtomicU64, Mutex, OnceLock, Ordering, PoisonError};

/// Samples a buffer holds before the call that fills it hands them over.
pub(super) const CAPACITY: usize = 32;

/// The most buffers a limiter sets up: threads beyond share them.
const MAX_BUFFERS: usize = 16;

type Buffer = CachePadded<Mutex<Vec<(Instant, Sample)>>>;

/// The held successes of one limiter.
pub(super) struct Deferred {
    /// One buffer per shard, set up by the first success held.
    buffers: OnceLock<Box<[Buffer]>>,
    /// One bit per buffer that may hold samples.
    marks: AtomicU64,
}

impl Deferred {
    /// Held successes, with the buffers set up at once if `now`.
    pub(super) fn new(now: bool) -> Self {
        let deferred = Deferred {
            buffers: OnceLock::new(),
            marks: AtomicU64::new(0),
        };
        if now {
            deferred.set_up();
        }
        deferred
    }

    /// Set the buffers up, if they are not yet.
    #[cold]
    pub(super) fn set_up(&self) {
        self.buffers();
    }

    fn buffers(&self) -> &[Buffer] {
        self.buffers.get_or_init(|| {
            (0..shard_count().min(MAX_BUFFERS))
                .map(|_| CachePadded::new(Mutex::new(Vec::new())))
                .collect()
        })
    }

    /// Whether successes may be held: the buffers are set up.
    #[inline]
    pub(super) fn is_set_up(&self) -> bool {
        self.buffers.get().is_some()
    }

    /// Hold `sample`, finished at `at`; whether this thread's buffer is now
    /// full and should be handed over.
    #[inline]
    pub(super) fn push(&self, at: Instant, sample: Sample) -> bool {
        let buffers = self.buffers();
        // The count is a power of two.
        let i = index() & (buffers.len() - 1);
        let mut buffer = buffers[i].lock().unwrap_or_else(PoisonError::into_inner);
        if buffer.capacity() == 0 {
            buffer.reserve_exact(CAPACITY);
        }
        buffer.push((at, sample));
        let len = buffer.len();
        if len == 1 {
            self.marks.fetch_or(1 << i, Ordering::SeqCst);
        }
        len >= CAPACITY
    }

    /// Whether no sample is held (no atomic step while the buffers are not
    /// set up).
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.buffers.get().is_none() || self.marks.load(Ordering::SeqCst) == 0
    }

    /// Move every held sample into `out`, sorted by the instant it finished
    /// (samples of one thread keep their order).
    pub(super) fn take(&self, out: &mut Vec<(Instant, Sample)>) {
        let mut marks = self.marks.swap(0, Ordering::SeqCst);
        let Some(buffers) = self.buffers.get() else {
            return;
        };
        let mut sources = 0;
        while marks != 0 {
            let i = marks.trailing_zeros() as usize;
            marks &= marks - 1;
            let mut buffer = buffers[i].lock().unwrap_or_else(PoisonError::into_inner);
            if !buffer.is_empty() {
                sources += 1;
                out.append(&mut buffer);
            }
        }
        if sources > 1 {
            out.sort_by_key(|(at, _)| *at);
        }
    }
}
