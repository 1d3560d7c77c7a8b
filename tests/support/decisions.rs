//! An observer that keeps every retry decision, and counts how often the
//! retry budget ran dry. Shared by the tests that include it.

#![allow(dead_code, reason = "each test file uses what it needs")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use rheostat::retry::RetryOutcome;
use rheostat::Observer;

/// Every retry decision, and how often the budget ran dry.
#[derive(Default)]
pub(crate) struct Decisions {
    pub seen: Mutex<Vec<RetryOutcome>>,
    pub dry: AtomicU32,
}

impl Observer for Decisions {
    fn retry(&self, outcome: RetryOutcome) {
        self.seen.lock().unwrap().push(outcome);
    }
    fn retry_budget_exhausted(&self) {
        self.dry.fetch_add(1, Ordering::SeqCst);
    }
}

impl Decisions {
    /// The decisions so far, emptied.
    pub(crate) fn take(&self) -> Vec<RetryOutcome> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}
