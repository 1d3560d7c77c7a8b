//! A fixed limit that remembers every sample: what the runtime told the
//! policy, for tests of recording. Shared by the tests that include it.

#![allow(dead_code, reason = "each test file uses what it needs")]

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rheostat::algorithms::{Algorithm, Gate, Published, Sample};
use rheostat::Outcome;

/// A fixed limit that remembers every sample it was given.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    pub samples: Arc<Mutex<Vec<Sample>>>,
    pub limit: u32,
}

impl Recorder {
    pub(crate) fn new(limit: u32) -> Self {
        Recorder {
            samples: Arc::default(),
            limit,
        }
    }
    pub(crate) fn outcomes(&self) -> Vec<Outcome> {
        self.samples
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.outcome)
            .collect()
    }
}

impl Algorithm for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn publish(&self) -> Published {
        Published::new(Gate::limited(self.limit))
    }
    fn on_sample(&mut self, _now: Instant, sample: &Sample) {
        self.samples.lock().unwrap().push(*sample);
    }
}
