//! The scenario comparison as a benchmark target: `cargo bench --bench compare`
//! runs every shipped scenario against every policy and prints the tables and
//! the simulator's speed, exactly as `cargo run --release --example compare`.

use rheostat_sim::{compare, rows, Scenario};

fn main() {
    let scenarios = match Scenario::builtin() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    match compare(&scenarios, &rows::all(), 1, |_| {}) {
        Ok((report, stats)) => {
            for scenario in &report.scenarios {
                println!("{}", scenario.table());
            }
            println!(
                "{} simulated calls in {:.1} s wall ({:.0} calls per core-second)",
                stats.calls,
                stats.wall.as_secs_f64(),
                stats.calls_per_core_second()
            );
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
