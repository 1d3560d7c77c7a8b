//! The kinds of degradation, and a scenario's `[sweep]` table that names
//! them: what a scenario file writes, with nothing of the scenario it is
//! in (the cells and their scores are the module's).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A way a dependency degrades.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Kind {
    /// Errors at random, unrelated to load.
    Errors,
    /// Capacity lost behind a queue.
    CapacityQueue,
    /// Capacity lost with no queue: 503 at once above it.
    CapacityRefuse,
    /// Calls that never answer, while the others stay fast.
    Hangs,
    /// Every call slower, capacity ample.
    Slowdown,
    /// A slowdown with errors.
    SlowdownErrors,
}

impl Kind {
    /// Every kind, in the order the matrix shows them.
    pub const ALL: [Kind; 6] = [
        Kind::Errors,
        Kind::CapacityQueue,
        Kind::CapacityRefuse,
        Kind::Hangs,
        Kind::Slowdown,
        Kind::SlowdownErrors,
    ];

    /// Its name in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Errors => "errors",
            Kind::CapacityQueue => "capacity-queue",
            Kind::CapacityRefuse => "capacity-refuse",
            Kind::Hangs => "hangs",
            Kind::Slowdown => "slowdown",
            Kind::SlowdownErrors => "slowdown-errors",
        }
    }

    /// What a severity means, for the axis of its picture.
    pub fn severity_label(self) -> &'static str {
        match self {
            Kind::Errors => "share of calls answered with a 5xx",
            Kind::CapacityQueue | Kind::CapacityRefuse => "share of the needed capacity lost",
            Kind::Hangs => "share of calls that hang",
            Kind::Slowdown => "speed lost: every call 1/(1-s) times as slow",
            Kind::SlowdownErrors => "speed lost s, and s/2 of calls a 5xx",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scenario's `[sweep]` table: the kinds and severities of its cells.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// When each cell's dependency degrades; the figures cover the rest of
    /// the run.
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// The kinds, each with its severities.
    pub kinds: Vec<SweepKind>,
}

/// One kind of degradation and the severities it is run at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepKind {
    /// The kind.
    pub kind: Kind,
    /// Its severities, each in `[0, 1)`, in rising order.
    pub severities: Vec<f64>,
}
