//! The synchronisation primitives of the lock-free accounting, from `std`
//! or, under `--cfg rheostat_loom`, from loom, which then explores every
//! interleaving of them (`tests/loom.rs`).
//!
//! Only what the limiter's shared state uses goes through here: the
//! in-flight count and its shards, the published answer, the policy lock,
//! the held samples' buffers and the waiter queue, and the `OnceLock`s
//! that set the shards and the buffers up lazily (under loom, a form loom
//! can follow: see `model`). The `Arc`s of the public API
//! (`self: &Arc<Limiter>`, owned permits) and of the active probe's
//! `Arc<dyn Fn>` stay `std`'s: a method receiver and an unsized coercion
//! need the standard `Arc`, and their reference counts are not part of the
//! accounting. Tokio's `Notify` and timers stay Tokio's.

#[cfg(rheostat_loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};
#[cfg(not(rheostat_loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

#[cfg(rheostat_loom)]
pub(crate) use model::OnceLock;
/// Set once, then read without a lock: the shards and the held samples'
/// buffers, which a limiter sets up lazily (see `limiter/slots.rs` and
/// `limiter/deferred.rs`). `std`'s outside loom; under loom, `model`'s.
#[cfg(not(rheostat_loom))]
pub(crate) use std::sync::OnceLock;

/// Poisoning is `std`'s in both: loom's `Mutex::lock` returns a
/// `std::sync::LockResult`, and its `try_lock` a `std::sync::TryLockResult`.
pub(crate) use std::sync::{PoisonError, TryLockError};

/// Orders the access before it and the access after it in the single total
/// order of sequentially consistent operations, as the `SeqCst` accesses on
/// both sides of it already are in the C++/Rust memory model. A no-op
/// outside loom: loom models `SeqCst` accesses as acquire/release only
/// (loom's README, "Unsupported features"), and would report the
/// store-buffering pattern of the waiter queue (see `limiter/queue.rs`) as a lost
/// wake-up that the real memory model rules out; under loom this is
/// `fence(SeqCst)`, which loom does model.
#[inline(always)]
pub(crate) fn seq_cst_point() {
    #[cfg(rheostat_loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// The next draw of a splitmix64 generator whose state is `state`:
/// lock-free and, for one caller, reproducible from the seed.
#[inline]
pub(crate) fn splitmix(state: &AtomicU64) -> u64 {
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut z = state
        .fetch_add(GAMMA, Ordering::Relaxed)
        .wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What loom cannot run as it is, in a form it can.
#[cfg(rheostat_loom)]
mod model {
    use loom::sync::atomic::{AtomicBool, Ordering};

    /// `std`'s `OnceLock` with its publication made visible to loom.
    ///
    /// `std`'s `OnceLock` hands the value it was set with to every thread
    /// that reads it after, with release and acquire; loom cannot see that
    /// ordering, and would report a thread's first use of the loom atomics
    /// and locks inside the value, made on another thread, as a race. So
    /// the value is kept in `std`'s `OnceLock` and counts as set, for a
    /// reader, only once a loom flag stored with release after it says so
    /// and the reader has loaded that flag with acquire: the edge the real
    /// `OnceLock` draws, drawn where loom sees it. Until then `get` answers
    /// `None`, as `std`'s does while another thread is still setting it,
    /// and a second thread asking to set it waits (yielding to loom) for
    /// the first to finish, as `std`'s blocks it.
    ///
    /// Setting the value runs no loom operation between `std`'s set and
    /// the flag's store but what the value's constructor runs (creating
    /// loom atomics and locks is none): loom's threads take turns on one
    /// OS thread, so `std`'s `OnceLock` is never found mid-set.
    pub(crate) struct OnceLock<T> {
        value: std::sync::OnceLock<T>,
        ready: AtomicBool,
    }

    impl<T> OnceLock<T> {
        pub(crate) fn new() -> Self {
            OnceLock {
                value: std::sync::OnceLock::new(),
                ready: AtomicBool::new(false),
            }
        }

        pub(crate) fn get(&self) -> Option<&T> {
            let value = self.value.get()?;
            self.ready.load(Ordering::Acquire).then_some(value)
        }

        pub(crate) fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
            if let Some(value) = self.get() {
                return value;
            }
            let mut mine = false;
            let value = self.value.get_or_init(|| {
                mine = true;
                f()
            });
            if mine {
                self.ready.store(true, Ordering::Release);
            } else {
                while !self.ready.load(Ordering::Acquire) {
                    loom::thread::yield_now();
                }
            }
            value
        }
    }

    impl<T> From<T> for OnceLock<T> {
        fn from(value: T) -> Self {
            OnceLock {
                value: std::sync::OnceLock::from(value),
                ready: AtomicBool::new(true),
            }
        }
    }
}
