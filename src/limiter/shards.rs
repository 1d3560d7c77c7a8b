//! Slots parked per core, so that threads sharing one limiter do not all
//! write the one in-flight word.
//!
//! Every admission and every release writes the limiter's in-flight count.
//! On one thread that costs an uncontended atomic step; on many, the cache
//! line holding the count moves from core to core at every call, and two
//! threads together make fewer calls than one alone. A released slot can
//! instead be *parked* in a cell of the releasing thread's shard, still
//! counted as taken, and the next admission on that shard takes it back
//! without writing the shared count (it reads it): two steps on a line no
//! other core writes. A success the policy lets the limiter batch is
//! counted in the same cell as its parked slot, in the same step, and
//! collected from every cell before the policy's next event.
//!
//! The count of slots taken (`G`) is then calls in flight plus slots parked,
//! and admission keeps its guarantee: a parked slot is taken only while
//! `G` is within the limit, and calls in flight never exceed `G`. An
//! admission that finds the limit reached first moves every parked slot back
//! to the shared count and tries once more, so a slot parked on another core
//! never stands between a caller and a free place.

use std::cell::Cell;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

/// Whether a [`Limiter`](crate::Limiter) parks released slots per core, so
/// that threads sharing it stop all writing one shared word (see "Threads
/// sharing one limiter" in `docs/design.md`: on two threads, 1.7 to 2.0
/// times one thread's rate rather than about half of it).
///
/// The limit itself stays exact, and
/// [`Limiter::in_flight`](crate::Limiter::in_flight) subtracts the parked
/// slots. What changes is the number of calls in flight a policy is told
/// for a call ([`Sample::in_flight`](crate::algorithms::Sample::in_flight)):
/// it counts the slots parked on other cores as well, an over-estimate of
/// at most one per shard.
///
/// # Examples
///
/// ```
/// use rheostat::{algorithms::Fixed, Limiter, limiter::Sharding};
///
/// // Exact in-flight counts for the policy, at the price of one shared
/// // word written by every call on every thread.
/// let limiter = Limiter::builder(Fixed::new(100)?)
///     .sharding(Sharding::Off)
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "config", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "config", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum Sharding {
    /// Never park: every call writes the shared in-flight count.
    Off,
    /// Set the shards up the first time two threads are seen racing for a
    /// slot, and park only while the limit is at least
    /// [`PARK_PER_SHARD`] per shard, so the over-estimate stays within a
    /// sixteenth of the limit. A limiter only ever used by one thread at a
    /// time never allocates them.
    #[default]
    OnContention,
    /// Set the shards up at once and park at any limit; set up at once, as
    /// well, the buffers that hold timed successes for the policy (see
    /// [`Deferral`](crate::algorithms::Deferral)), which the other modes
    /// set up the first time two threads meet on the policy's lock.
    Always,
}

/// Under [`Sharding::OnContention`], slots are parked only while the limit
/// is at least this many per shard.
pub const PARK_PER_SHARD: u32 = 16;

/// The most shards a limiter sets up.
const MAX_SHARDS: usize = 64;

/// One parked slot (or none) and the successes counted there, per shard,
/// each cell on a cache line of its own: slots parked (0 or 1, since a slot
/// is parked only in an empty cell) and successes held for the policy as a
/// count, laid out as the limiter's in-flight word is (see [`SLOTS`]).
pub(crate) struct Shards {
    cells: Box<[CachePadded<AtomicU64>]>,
    /// One bit per cell that may hold a parked slot or batched successes:
    /// set by the cell's thread after it parks there (unless already set),
    /// cleared by a drain before it empties the cell. A refusal then visits
    /// only the cells in use rather than every core's, each a cache line
    /// another core may be writing.
    marks: AtomicU64,
    /// The least limit at which a slot is parked.
    floor: u32,
}

/// The slots part of the limiter's in-flight word and of a shard's cell:
/// the low 32 bits count slots (taken, or parked); the high 32 count
/// successes batched for the policy, so that a batched success moves its
/// slot and counts itself in one atomic step.
pub(crate) const SLOTS: u64 = 0xFFFF_FFFF;
/// One batched success in the in-flight word or a cell.
pub(crate) const ONE_BATCHED: u64 = 1 << 32;

/// The slots counted in the in-flight word or a cell.
pub(crate) fn slots_of(word: u64) -> u32 {
    #[allow(clippy::cast_possible_truncation, reason = "the low 32 bits")]
    let slots = (word & SLOTS) as u32;
    slots
}

impl Shards {
    pub(crate) fn new(sharding: Sharding) -> Self {
        let count = shard_count();
        let floor = match sharding {
            Sharding::Always => 1,
            _ => PARK_PER_SHARD.saturating_mul(u32::try_from(count).unwrap_or(u32::MAX)),
        };
        Shards {
            cells: (0..count)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            marks: AtomicU64::new(0),
            floor,
        }
    }

    /// This thread's cell and its bit in `marks`.
    fn mine(&self) -> (&AtomicU64, u64) {
        // The count is a power of two, at most 64.
        let i = index() & (self.cells.len() - 1);
        (&*self.cells[i], 1 << i)
    }

    /// The cells whose bit is set in `marks`, with their bits.
    fn marked(&self) -> impl Iterator<Item = (&AtomicU64, u64)> {
        let mut marks = self.marks.load(Ordering::SeqCst);
        std::iter::from_fn(move || {
            if marks == 0 {
                return None;
            }
            let i = marks.trailing_zeros();
            marks &= marks - 1;
            Some((&*self.cells[i as usize], 1 << i))
        })
    }

    /// Take back a slot parked on this thread's shard.
    #[inline]
    pub(crate) fn unpark(&self) -> bool {
        let (cell, _) = self.mine();
        let current = cell.load(Ordering::SeqCst);
        if slots_of(current) == 0 {
            return false;
        }
        // Another thread on this shard, or a drain, may take it first.
        let taken = cell
            .compare_exchange(current, current - 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if !taken {
            rehash();
        }
        taken
    }

    /// Park a released slot on this thread's shard, counting `successes`
    /// batched with it, if the limit allows it and the shard has room. On
    /// `None` the caller keeps the slot and the successes.
    #[inline]
    pub(crate) fn park(&self, limit: u32, successes: u64) -> Option<Parked<'_>> {
        if limit < self.floor {
            return None;
        }
        let (cell, bit) = self.mine();
        let current = cell.load(Ordering::SeqCst);
        if slots_of(current) != 0 {
            return None;
        }
        match cell.compare_exchange(
            current,
            current + successes * ONE_BATCHED + 1,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => {
                // After parking: a drain that cleared the bit before this
                // read is seen to, and one that clears it after empties
                // the cell after this park.
                if self.marks.load(Ordering::SeqCst) & bit == 0 {
                    self.marks.fetch_or(bit, Ordering::SeqCst);
                }
                Some(Parked {
                    cell,
                    batched: current >> 32,
                })
            }
            Err(_) => {
                rehash();
                None
            }
        }
    }

    /// Take every parked slot; returns how many.
    pub(crate) fn drain(&self) -> u32 {
        let mut parked = 0;
        for (cell, bit) in self.marked() {
            // The bit first, then the cell (see `park`).
            self.marks.fetch_and(!bit, Ordering::SeqCst);
            let before = cell.fetch_and(!SLOTS, Ordering::SeqCst);
            parked += slots_of(before);
            if before >> 32 != 0 {
                // Batched successes stay, and so does the mark.
                self.marks.fetch_or(bit, Ordering::SeqCst);
            }
        }
        parked
    }

    /// Take every success batched on the shards; returns how many.
    pub(crate) fn take_batched(&self) -> u64 {
        self.marked()
            .filter(|(cell, _)| cell.load(Ordering::SeqCst) >> 32 != 0)
            .map(|(cell, _)| cell.fetch_and(SLOTS, Ordering::SeqCst) >> 32)
            .sum()
    }

    /// Slots parked now.
    pub(crate) fn parked(&self) -> u32 {
        self.marked()
            .map(|(cell, _)| slots_of(cell.load(Ordering::SeqCst)))
            .sum()
    }
}

/// A slot just parked.
pub(crate) struct Parked<'a> {
    cell: &'a AtomicU64,
    /// Successes batched on the shard before this one.
    pub(crate) batched: u64,
}

impl Parked<'_> {
    /// Take the slots parked on this shard back out (someone waits for
    /// one); returns how many.
    pub(crate) fn unpark_all(&self) -> u32 {
        slots_of(self.cell.fetch_and(!SLOTS, Ordering::SeqCst))
    }
}

/// Shards per limiter: the machine's parallelism, rounded up to a power of
/// two, at least 2 and at most [`MAX_SHARDS`]. Under loom, a machine of two
/// cores: two shards, so that a model's threads may meet on one or not.
pub(super) fn shard_count() -> usize {
    #[cfg(not(rheostat_loom))]
    {
        static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *COUNT.get_or_init(|| {
            shards_for(std::thread::available_parallelism().map_or(2, std::num::NonZero::get))
        })
    }
    #[cfg(rheostat_loom)]
    {
        shards_for(2)
    }
}

/// Shards for a machine running `parallelism` threads at once.
fn shards_for(parallelism: usize) -> usize {
    parallelism.next_power_of_two().clamp(2, MAX_SHARDS)
}

#[cfg(not(rheostat_loom))]
std::thread_local! {
    /// This thread's shard, before masking; `usize::MAX` until first used.
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}
#[cfg(rheostat_loom)]
loom::thread_local! {
    /// Under loom, loom's thread-local: each thread of each run of a model
    /// starts without a shard, as a new thread does.
    static SHARD: Cell<usize> = Cell::new(usize::MAX);
}

/// This thread's shard: threads take shards in turn as they first use any
/// limiter, so the first threads on a machine each have one of their own.
#[inline]
pub(super) fn index() -> usize {
    SHARD.with(|shard| {
        let index = shard.get();
        if index != usize::MAX {
            return index;
        }
        let index = first_index();
        shard.set(index);
        index
    })
}

#[cfg(not(rheostat_loom))]
fn first_index() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed) % (usize::MAX / 2)
}

/// Under loom, from the thread's id, so that every run of a model places
/// its threads alike.
#[cfg(rheostat_loom)]
fn first_index() -> usize {
    format!("{:?}", loom::thread::current().id())
        .bytes()
        .fold(0, |h: usize, b| {
            h.wrapping_mul(31).wrapping_add(usize::from(b))
        })
        % (usize::MAX / 2)
}

/// Move this thread to another shard: it met another thread on this one.
fn rehash() {
    SHARD.with(|shard| {
        let next = shard
            .get()
            .wrapping_mul(0x9E37_79B9)
            .wrapping_add(0x7F4A_7C15)
            % (usize::MAX / 2);
        shard.set(next);
    });
}
