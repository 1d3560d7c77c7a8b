//! The synchronisation primitives of the lock-free accounting, from `std`
//! or, under `--cfg rheostat_loom`, from loom, which then explores every
//! interleaving of them (`tests/loom.rs`).
//!
//! Only what the in-flight count, the published gate, the policy lock and
//! the waiter queue use goes through here. The `Arc`s of the public API
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

/// Poisoning is `std`'s in both: loom's `Mutex::lock` returns a
/// `std::sync::LockResult`, and its `try_lock` a `std::sync::TryLockResult`.
pub(crate) use std::sync::{PoisonError, TryLockError};

/// Orders the access before it and the access after it in the single total
/// order of sequentially consistent operations, as the `SeqCst` accesses on
/// both sides of it already are in the C++/Rust memory model. A no-op
/// outside loom: loom models `SeqCst` accesses as acquire/release only
/// (loom's README, "Unsupported features"), and would report the
/// store-buffering pattern of the waiter queue (see `limiter/wait.rs`) as a lost
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
