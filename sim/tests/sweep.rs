//! The degradation sweep: each kind degrades the dependency as its
//! documentation says, its cells are scored against the best row that
//! keeps the caller whole, and every line of a picture spans the run.
//! The sweep's claims at the shipped defaults are `#[ignore]`d in debug
//! builds: `cargo test --release --test sweep -- --ignored`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::time::Duration;

use rheostat_sim::sweep::{CellReport, Kind, SweepReport};
use rheostat_sim::{
    compare, goodput_lines, rows, sweep_lines, Row, Scenario, ScenarioReport, SWEEP_ROWS,
};

const FAMILY: &str = r#"
    name = "fam"
    duration = "40s"
    [dependency]
    workers = 20
    service = { median = "50ms", p99 = "100ms" }
    [traffic]
    rate = 100
    timeout = "500ms"
    deadline = "1s"
    [sweep]
    at = "10s"
    kinds = [
        { kind = "errors", severities = [0.2, 0.5] },
        { kind = "capacity-queue", severities = [0.5] },
        { kind = "capacity-refuse", severities = [0.5] },
        { kind = "hangs", severities = [0.3] },
        { kind = "slowdown", severities = [0.75] },
        { kind = "slowdown-errors", severities = [0.5] },
    ]
"#;

fn family() -> Scenario {
    Scenario::from_toml("fam.toml", FAMILY).unwrap()
}

#[test]
fn each_kind_degrades_the_dependency_from_the_sweeps_start_as_documented() {
    let fam = family();
    let cells = fam.cells();
    assert_eq!(cells.len(), 7);
    let names: Vec<&str> = cells.iter().map(|c| c.scenario.name.as_str()).collect();
    assert_eq!(names[0], "fam/errors@0.2");
    assert_eq!(names[6], "fam/slowdown-errors@0.5");
    for c in &cells {
        assert!(c.scenario.sweep.is_none(), "a cell is one scenario");
        let phase = &c.scenario.dependency.phase;
        assert_eq!(phase.len(), 1);
        assert_eq!(phase[0].at, Duration::from_secs(10));
        let measure = c.scenario.measure.unwrap();
        assert_eq!(
            (measure.from, measure.to),
            (Duration::from_secs(10), Duration::from_secs(40))
        );
    }
    let p = |i: usize| &cells[i].scenario.dependency.phase[0];
    assert_eq!(p(1).overload_errors.unwrap().0, 0.5);
    // The need: 100 calls/s × the log-normal's mean (50 ms median, p99
    // 100 ms: σ = ln 2 / 2.326, mean 52.3 ms) = 5.23 calls; half kept.
    assert_eq!(p(2).workers.unwrap().0, 3);
    assert_eq!(cells[2].scenario.dependency.queue, 1000);
    assert_eq!(p(3).workers.unwrap().0, 3);
    assert_eq!(cells[3].scenario.dependency.queue, 0);
    assert_eq!(p(4).hang.unwrap().0, 0.3);
    // Four times as slow, four times the workers.
    let slow = p(5).service.unwrap();
    assert_eq!(
        (slow.median, slow.p99),
        (Duration::from_millis(200), Duration::from_millis(400))
    );
    assert_eq!(p(5).workers.unwrap().0, 80);
    assert!(p(5).overload_errors.is_none());
    assert_eq!(p(6).service.unwrap().median, Duration::from_millis(100));
    assert_eq!(p(6).overload_errors.unwrap().0, 0.25);
}

#[test]
fn a_sweep_table_is_checked_by_field_and_line() {
    let bad = FAMILY.replace("[0.2, 0.5]", "[0.5, 0.2]");
    let e = Scenario::from_toml("fam.toml", &bad).unwrap_err();
    assert_eq!(e.field(), "sweep.kinds[0].severities");
    assert!(e.reason().contains("rising"), "{e}");
    let bad = FAMILY.replace("[0.5] }", "[1.0] }");
    let e = Scenario::from_toml("fam.toml", &bad).unwrap_err();
    assert!(e.reason().contains("[0, 1)"), "{e}");
    let bad = FAMILY.replace("at = \"10s\"", "at = \"50s\"");
    let e = Scenario::from_toml("fam.toml", &bad).unwrap_err();
    assert_eq!(e.field(), "sweep.at");
    let bad = FAMILY.replace("\"errors\"", "\"gremlins\"");
    assert!(Scenario::from_toml("fam.toml", &bad).is_err());
}

fn scored(kinds: &[Row]) -> SweepReport {
    let cells = family().cells();
    let scenarios: Vec<Scenario> = cells.iter().map(|c| c.scenario.clone()).collect();
    let (report, _) = compare(&scenarios, kinds, 3, |_| {}).unwrap();
    SweepReport::new(
        "fam",
        cells
            .iter()
            .zip(&report.scenarios)
            .map(|(c, r)| {
                for p in &r.policies {
                    assert!(
                        p.successes as f64 <= r.bound_of(p).successes,
                        "{}: {} beats the bound",
                        r.name,
                        p.policy
                    );
                }
                CellReport::new(c, r)
            })
            .collect(),
    )
}

#[test]
fn a_cell_scores_every_row_against_the_best_that_keeps_the_caller_whole() {
    let sweep = scored(&[rows::clairvoyant(), rows::none(), rows::breaker_classic()]);
    for cell in &sweep.cells {
        let best = cell.best.as_deref().unwrap();
        assert_ne!(best, "clairvoyant", "no user can run the clairvoyant row");
        let b = cell.row(best).unwrap();
        assert!(b.whole && b.holds);
        assert!((b.vs_best.unwrap() - 1.0).abs() < 1e-12);
        for r in &cell.rows {
            assert_eq!(
                r.holds,
                r.whole && r.vs_best.unwrap() >= 0.9,
                "{}",
                r.policy
            );
            if r.whole && r.policy != "clairvoyant" {
                assert!(
                    r.vs_best.unwrap() <= 1.0 + 1e-12,
                    "{} beats the best",
                    r.policy
                );
            }
        }
    }
    // The classic breaker opens at half of calls failing and stays open:
    // at half the calls failing it cannot hold.
    let errors = sweep
        .cells
        .iter()
        .find(|c| c.kind == Kind::Errors && c.severity == 0.5)
        .unwrap();
    assert!(!errors.row("breaker-classic").unwrap().holds);
    let matrix = sweep.matrix();
    assert!(matrix.lines().all(|l| l.chars().count() <= 100), "{matrix}");
    assert!(matrix.contains("cells held:"));
}

#[test]
fn every_line_of_a_picture_spans_the_run() {
    // The bound's series and the policies' are sampled on steps of their
    // own (a run longer than its number of points): each line must still
    // end at the end of the run, not where the first policy's step says.
    let sc = Scenario::from_toml(
        "long.toml",
        r#"
        name = "long"
        duration = "23m"
        [dependency]
        workers = 10
        service = { median = "50ms", p99 = "100ms" }
        [traffic]
        rate = 5
        timeout = "1s"
        deadline = "1s"
        "#,
    )
    .unwrap();
    let (report, _) = compare(&[sc], &[rows::none(), rows::aimd()], 1, |_| {}).unwrap();
    let r = &report.scenarios[0];
    let lines = goodput_lines(r, &[]);
    assert_eq!(lines.len(), 3);
    for (name, pts) in &lines {
        let end = pts.last().unwrap().0;
        assert!((end - 23.0).abs() < 1e-9, "{name} ends at {end} minutes");
    }
    let picked = goodput_lines(r, &["aimd"]);
    assert_eq!(
        picked.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
        ["bound", "aimd"]
    );
    // A sweep's picture: a point per severity for each row it ran.
    let sweep = scored(&[rows::none(), rows::throttle()]);
    let lines = sweep_lines(&sweep, Kind::Errors, &SWEEP_ROWS, false);
    assert_eq!(
        lines.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
        ["none", "throttle"]
    );
    for (_, pts) in &lines {
        assert_eq!(pts.iter().map(|p| p.0).collect::<Vec<_>>(), [0.2, 0.5]);
    }
}

/// The shipped sweep at the shipped defaults, seed 1: no row beats the
/// bound in any cell; the recommended configuration keeps the caller whole
/// in every cell where sending everything does, with its learned timeout
/// and with the callers' typed one, and holds every such cell (at least
/// 0.9 of the best row that keeps the caller whole). It has no ceiling of
/// its own, so where a degraded dependency takes more than the caller's
/// pool of 200 (hangs at 0.7, a tenfold slowdown) it serves more than any
/// row that keeps the caller whole but fills the pool, as sending
/// everything does: a caller that knows its pool states it (`max`). It
/// serves every cell of hangs at least 0.99 as well as with the callers'
/// timeout and no cell below 0.95 of it, over seeds 1 to 3 together; and
/// the adaptive limits do not read random errors as congestion (each
/// keeps at least `NEVER_BELOW` of the best in every cell of errors, where
/// they once kept as little as 0.04). Other seeds are not asserted for the
/// rest: `docs/results.md` gives eight seeds' means.
#[test]
#[ignore = "runs the whole sweep; use --release"]
fn the_recommended_configuration_starves_no_cell_of_the_shipped_sweep() {
    const NEVER_BELOW: f64 = 0.8;
    let families = Scenario::builtin_sweeps().unwrap();
    assert!(!families.is_empty());
    for family in families {
        let cells = family.cells();
        let scenarios: Vec<Scenario> = cells.iter().map(|c| c.scenario.clone()).collect();
        let (report, _) = compare(&scenarios, &rows::all(), 1, |_| {}).unwrap();
        let mut scored = Vec::new();
        for (cell, r) in cells.iter().zip(&report.scenarios) {
            for p in &r.policies {
                assert!(
                    p.successes as f64 <= r.bound_of(p).successes,
                    "{}: {} beats the bound",
                    r.name,
                    p.policy
                );
            }
            scored.push(CellReport::new(cell, r));
        }
        let sweep = SweepReport::new(&family.name, scored);
        let matrix = sweep.matrix();
        assert!(matrix.lines().all(|l| l.chars().count() <= 100), "{matrix}");
        // The learned timeout against the typed one, over seeds 1 to 3:
        // capacity behind a queue at 0.6 settles in one of two regimes by
        // its history, whichever the timeout (0.89 to 1.15 of the typed
        // row from one seed to the next, both ways), so one run judges the
        // seed, not the timeout.
        // Seed 1 is the run above; seeds 2 and 3 run the two rows alone.
        let mut served = vec![(0.0, 0.0); cells.len()];
        let mut add = |scenarios: &[ScenarioReport]| {
            for (sum, r) in served.iter_mut().zip(scenarios) {
                sum.0 += r.policy("recommended").unwrap().successes as f64;
                sum.1 += r.policy("rec. typed").unwrap().successes as f64;
            }
        };
        add(&report.scenarios);
        for seed in 2..=3 {
            let rows = [rows::recommended(), rows::recommended_typed()];
            let (report, _) = compare(&scenarios, &rows, seed, |_| {}).unwrap();
            add(&report.scenarios);
        }
        for (cell, (l, t)) in sweep.cells.iter().zip(served) {
            assert!(
                l >= 0.95 * t,
                "{}: learned {l} against typed {t} over three seeds\n{matrix}",
                cell.scenario
            );
            // A learned timeout serves every cell of hangs at least 0.99 as
            // well as the callers' own (0.993 at 0.1 on seed 1, where one
            // call in ten hangs; 1.21 to 1.38 from 0.3 on).
            if cell.kind == Kind::Hangs {
                assert!(
                    l >= 0.99 * t,
                    "{}: learned {l} against typed {t} over three seeds\n{matrix}",
                    cell.scenario
                );
            }
        }
        for cell in &sweep.cells {
            let learned = cell.row("recommended").unwrap();
            let typed = cell.row("rec. typed").unwrap();
            let none = cell.row("none").unwrap();
            for r in [learned, typed] {
                assert!(r.whole || !none.whole, "{}: {r:?}\n{matrix}", cell.scenario);
            }
            assert!(
                learned.holds || !none.whole,
                "{}: {learned:?}\n{matrix}",
                cell.scenario
            );
        }
        for policy in ["aimd", "vegas", "gradient"] {
            for cell in sweep.cells.iter().filter(|c| c.kind == Kind::Errors) {
                assert!(
                    cell.row(policy).unwrap().vs_best.unwrap() >= NEVER_BELOW,
                    "{}: {policy}\n{matrix}",
                    cell.scenario
                );
            }
        }
    }
}

/// The throttle's advice, measured: against errors at random (every
/// severity of the shipped sweep's kind, and the same kind in three
/// families drawn at random), the throttle at its default `k` of 2 serves
/// at least as much as with `k` = 1 ("send about what succeeds"), which
/// refuses calls that would have succeeded. `docs/policies.md` states the
/// figures this prints.
#[test]
#[ignore = "runs a sweep kind over several families; use --release"]
fn the_throttle_at_its_default_k_serves_errors_at_random_as_well_as_at_k_one() {
    use rheostat::algorithms::{Algorithm, Throttle, ThrottleConfig};
    use rheostat_sim::families::Families;

    let k_one = Row::new("throttle k=1", |_, _| {
        let config = ThrottleConfig {
            k: 1.0,
            ..ThrottleConfig::default()
        };
        Ok(Box::new(Throttle::new(config)?) as Box<dyn Algorithm>)
    });
    let mut families = Scenario::builtin_sweeps().unwrap();
    families.extend(
        Families::new(3, 2026)
            .with_calls(150_000.0)
            .draw()
            .unwrap()
            .into_iter()
            .map(|f| f.scenario),
    );
    let rows = [rows::none(), rows::throttle(), k_one, rows::recommended()];
    for family in families {
        let cells: Vec<_> = family
            .cells()
            .into_iter()
            .filter(|c| c.kind == Kind::Errors)
            .collect();
        let scenarios: Vec<Scenario> = cells.iter().map(|c| c.scenario.clone()).collect();
        let (report, _) = compare(&scenarios, &rows, 1, |_| {}).unwrap();
        for r in &report.scenarios {
            let served = |name: &str| r.policy(name).unwrap().successes as f64;
            let none = served("none").max(1.0);
            println!(
                "{:<44} of no limiter: throttle {:.2}, k=1 {:.2}, recommended {:.2}",
                r.name,
                served("throttle") / none,
                served("throttle k=1") / none,
                served("recommended") / none,
            );
            assert!(
                served("throttle") >= 0.99 * served("throttle k=1"),
                "{}: k = 2 served less than k = 1\n{}",
                r.name,
                r.table()
            );
        }
    }
}
