//! The hedged row against its twin over many seeds, beside the yardstick:
//! the twin against itself with nothing changed but its limiters' seeds.
//! Run by hand (a few minutes):
//!
//! ```text
//! cargo test --release -p rheostat-sim --test hedge_seeds -- --ignored --nocapture
//! ```

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat_sim::{compare, rows, Scenario};

/// Seeds 1 to this.
const SEEDS: u64 = 12;

/// A table of `hedged / twin` and `reseeded / twin` goodput per scenario and
/// sweep cell over the seeds: the least, the median, and how many seeds
/// fall below 0.98.
#[test]
#[ignore = "a few minutes in release; run by hand"]
fn the_hedged_row_and_the_reseeded_twin_against_the_twin_over_twelve_seeds() {
    let mut all: Vec<Scenario> = Scenario::builtin_sweeps()
        .unwrap()
        .iter()
        .flat_map(Scenario::cells)
        .map(|cell| cell.scenario)
        .collect();
    all.extend(Scenario::builtin().unwrap());
    let (twin, hedged, reseeded) = (
        rows::recommended_retry(),
        rows::recommended_hedge(),
        rows::recommended_retry_reseeded(),
    );
    let rows = [twin.clone(), hedged.clone(), reseeded.clone()];
    let mut ratios: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
    for seed in 1..=SEEDS {
        let (report, _) = compare(&all, &rows, seed, |_| {}).unwrap();
        for s in &report.scenarios {
            let (Some(t), Some(h), Some(r)) = (
                s.policy(twin.name()),
                s.policy(hedged.name()),
                s.policy(reseeded.name()),
            ) else {
                continue;
            };
            let at = match ratios.iter().position(|(name, ..)| *name == s.name) {
                Some(at) => at,
                None => {
                    ratios.push((s.name.clone(), Vec::new(), Vec::new()));
                    ratios.len() - 1
                }
            };
            ratios[at].1.push(h.goodput / t.goodput);
            ratios[at].2.push(r.goodput / t.goodput);
        }
    }
    let summary = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let below = v.iter().filter(|&&x| x < 0.98).count();
        format!(
            "{:.3} {:.3} {:>2}",
            v[0],
            (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2.0,
            below
        )
    };
    println!(
        "goodput over the twin's ({}), seeds 1-{SEEDS}: least, median, seeds below 0.98",
        twin.name()
    );
    println!(
        "{:<34} {:>16} {:>16}",
        "scenario or cell", "hedged", "reseeded twin"
    );
    for (name, mut h, mut r) in ratios {
        assert_eq!(h.len() as u64, SEEDS);
        println!("{name:<34} {:>16} {:>16}", summary(&mut h), summary(&mut r));
    }
}
