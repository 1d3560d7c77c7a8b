//! A policy of your own in the comparison: one shipped scenario, your row
//! beside three shipped ones, the same bound for all.
//!
//! ```text
//! cargo run --release --example own_row
//! cargo run --release --example own_row -- retry-storm
//! ```
//!
//! A row is a value: a name and a function that builds your `Algorithm`
//! for one instance of the scenario's fleet. Here the policy is a fixed
//! limit at half the dependency's normal share per instance: a bulkhead
//! sized for a brownout that takes half the workers.

use std::process::ExitCode;
use std::time::Instant;

use rheostat::algorithms::{Algorithm, Gate, Published, Sample};
use rheostat_sim::{compare, rows, Row, Scenario};

/// Admits a fixed number of calls: a policy that never moves.
#[derive(Debug)]
struct HalfBulkhead(u32);

impl Algorithm for HalfBulkhead {
    fn name(&self) -> &'static str {
        "half-bulkhead"
    }
    fn publish(&self) -> Published {
        Published::new(Gate::limited(self.0))
    }
    fn on_sample(&mut self, _now: Instant, _sample: &Sample) {}
}

/// The row: built for each instance from the scenario it runs in.
fn half_bulkhead() -> Row {
    Row::new("half-bulkhead", |scenario: &Scenario, _instance| {
        let workers = scenario.dependency.workers.0;
        let instances = scenario.traffic.as_ref().map_or(1, |t| t.instances.0);
        let share = workers.div_ceil(instances.max(1));
        Ok(Box::new(HalfBulkhead((share / 2).max(1))) as Box<dyn Algorithm>)
    })
}

fn main() -> ExitCode {
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "brownout".to_owned());
    let scenarios = match Scenario::builtin() {
        Ok(all) => all,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(scenario) = scenarios.into_iter().find(|s| s.name == name) else {
        eprintln!("unknown scenario `{name}`");
        return ExitCode::from(2);
    };
    let compared = [
        rows::none(),
        rows::bulkhead(),
        rows::aimd(),
        half_bulkhead(),
    ];
    match compare(&[scenario], &compared, 1, |_| {}) {
        Ok((report, _stats)) => {
            println!("{}", report.scenarios[0].table());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
