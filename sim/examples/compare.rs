//! The main job: every shipped scenario against every policy, in virtual
//! time, on the same `Limiter` code users run.
//!
//! ```text
//! cargo run --release --example compare
//! cargo run --release --example compare -- --scenario brownout --policy aimd --policy breaker
//! cargo run --release --example compare -- --seed 7 --json out.json --out plots/ my-scenario.toml
//! cargo run --release --example compare -- --wide
//! cargo run --release --example compare -- --families 50 --family-seed 2
//! ```
//!
//! Runs the degradation sweep first (`sim/sweeps/degradation.toml`: every
//! row in every cell) and prints its matrix, then a table per scenario
//! (100 characters wide, the columns the docs discuss; `--wide` for every
//! column); writes every metric to `target/rheostat/compare.json`, the
//! sweep's scores to `sweep.json`, an SVG per scenario and one per kind of
//! degradation next to them, and, for each scenario where a row hedged
//! its requests, its latency percentiles (`NAME-latency.svg`). A file
//! with a `[sweep]` table is run as a sweep; `--scenario degradation`
//! picks a whole sweep.
//!
//! `--families N` runs `N` workloads drawn at random instead
//! (`rheostat_sim::families`: the ranges are documented there), each
//! through every cell of the shipped sweep, and prints how many cells each
//! row held, family by family and in all; `--family-seed S` draws another
//! `N`. It writes each family's scenario file and the scores to
//! `target/rheostat/families-S/`, so any family can be run again alone.
//!
//! A row of your own runs beside the shipped ones: add it to
//! [`own_rows`] (a [`Row`]: a name and a function from the scenario to
//! your `Algorithm`), and `--policy NAME` picks it like any other.

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use rheostat_sim::families::{Families, Tally};
use rheostat_sim::sweep::{Cell, Kind, SweepReport};
use rheostat_sim::{
    compare, latency_svg, rows, svg, sweep_svg, Comparison, Layout, Row, Scenario, Stats,
    LATENCY_ROWS, SWEEP_ROWS,
};

/// Rows of your own, compared beside the shipped ones ([`rows::all`]).
///
/// Each is one entry: a name and a function that builds your policy for
/// one instance of a scenario's fleet, for example
///
/// ```text
/// Row::new("mine", |scenario: &Scenario, _instance| {
///     Ok(Box::new(Mine::new(scenario.dependency.workers.0)) as Box<dyn Algorithm>)
/// })
/// ```
///
/// `Row::with_limiter` builds its limiters with a retry policy or
/// priorities; `own_row.rs` is a complete row, and `docs/comparison.md`
/// ("A row of your own") says more.
fn own_rows() -> Vec<Row> {
    Vec::new()
}

/// Every row run when none is named: the shipped ones, then your own.
fn every_row() -> Vec<Row> {
    let mut every = rows::all();
    every.extend(own_rows());
    every
}

/// Every row the command line can name: those, and the yardsticks.
fn nameable() -> Vec<Row> {
    let mut every = every_row();
    every.extend(rows::yardsticks());
    every
}

struct Args {
    scenarios: Vec<String>,
    policies: Vec<Row>,
    seed: u64,
    json: Option<PathBuf>,
    out: PathBuf,
    files: Vec<PathBuf>,
    layout: Layout,
    families: Option<Families>,
}

const USAGE: &str = "usage: compare [--scenario NAME]... [--policy NAME]... [--seed N] [--json PATH] [--out DIR] [--wide] [SCENARIO.toml]...
       compare --families N [--family-seed S] [--policy NAME]... [--seed N] [--out DIR]";

fn parse() -> Result<Args, String> {
    let mut args = Args {
        scenarios: Vec::new(),
        policies: Vec::new(),
        seed: 1,
        json: None,
        out: PathBuf::from("target/rheostat"),
        files: Vec::new(),
        layout: Layout::Narrow,
        families: None,
    };
    let mut family_seed = 1;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| it.next().ok_or(format!("{flag} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--scenario" => args.scenarios.push(value("--scenario")?),
            "--policy" => {
                let name = value("--policy")?;
                let every = nameable();
                let row = every.iter().find(|row| row.name() == name).ok_or_else(|| {
                    let names: Vec<_> = every.iter().map(Row::name).collect();
                    format!("unknown policy `{name}`; known: {}", names.join(", "))
                })?;
                args.policies.push(row.clone());
            }
            "--seed" => {
                let v = value("--seed")?;
                args.seed = v
                    .parse()
                    .map_err(|_| format!("--seed takes a whole number, not `{v}`"))?;
            }
            "--families" => {
                let v = value("--families")?;
                let n: u32 = v
                    .parse()
                    .map_err(|_| format!("--families takes a whole number, not `{v}`"))?;
                args.families = Some(Families::new(n, 1));
            }
            "--family-seed" => {
                let v = value("--family-seed")?;
                family_seed = v
                    .parse()
                    .map_err(|_| format!("--family-seed takes a whole number, not `{v}`"))?;
            }
            "--json" => args.json = Some(PathBuf::from(value("--json")?)),
            "--out" => args.out = PathBuf::from(value("--out")?),
            "--wide" => args.layout = Layout::Wide,
            "-h" | "--help" => return Err(USAGE.to_string()),
            flag if flag.starts_with("--") => {
                return Err(format!("unknown flag `{flag}`\n{USAGE}"))
            }
            file => args.files.push(PathBuf::from(file)),
        }
    }
    if let Some(f) = &mut args.families {
        f.seed = family_seed;
        if !args.scenarios.is_empty() || !args.files.is_empty() {
            return Err(format!(
                "--families runs drawn families, not scenarios or files\n{USAGE}"
            ));
        }
    }
    if args.policies.is_empty() {
        args.policies = if args.families.is_some() {
            let mut r = rows::for_families();
            r.extend(own_rows());
            r
        } else {
            every_row()
        };
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some(families) = args.families {
        return run_families(&args, families);
    }
    let loaded = if args.files.is_empty() {
        Scenario::builtin_sweeps().and_then(|mut all| {
            all.extend(Scenario::builtin()?);
            Ok(all)
        })
    } else {
        args.files.iter().map(|f| Scenario::from_file(f)).collect()
    };
    let loaded = match loaded {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if !args.scenarios.is_empty() {
        let known: Vec<String> = loaded.iter().map(|s| s.name.clone()).collect();
        for name in &args.scenarios {
            if !known.contains(name) {
                eprintln!("unknown scenario `{name}`; known: {}", known.join(", "));
                return ExitCode::from(2);
            }
        }
    }
    let picked = |s: &Scenario| args.scenarios.is_empty() || args.scenarios.contains(&s.name);
    // A sweep runs as its cells, each a scenario of its own.
    let mut cells: Vec<Cell> = Vec::new();
    let mut scenarios: Vec<Scenario> = Vec::new();
    for s in loaded.into_iter().filter(picked) {
        if s.sweep.is_some() {
            cells.extend(s.cells());
        } else {
            scenarios.push(s);
        }
    }
    let mut all: Vec<Scenario> = cells.iter().map(|c| c.scenario.clone()).collect();
    all.extend(scenarios.iter().cloned());

    let Some((report, stats)) = run(&all, &args) else {
        return ExitCode::FAILURE;
    };
    let tables = &report.scenarios[cells.len()..];
    let sweeps = SweepReport::scored(&cells, &report.scenarios);
    for sweep in &sweeps {
        println!("{}", sweep.matrix());
    }
    let json = args.json.unwrap_or_else(|| args.out.join("compare.json"));
    if args.layout == Layout::Narrow && !tables.is_empty() {
        println!("Per scenario, the columns the docs discuss; every column with --wide,");
        println!("every figure in {}.\n", json.display());
    }
    for scenario in tables {
        println!("{}", scenario.table_in(args.layout));
    }
    println!(
        "{} scenarios ({} of them sweep cells), seed {}: {} simulated calls\nin {:.1} s ({:.2} M calls per core-second)",
        report.scenarios.len(),
        cells.len(),
        report.seed,
        stats.calls,
        stats.wall.as_secs_f64(),
        stats.calls_per_core_second() / 1e6,
    );

    if let Err(e) = std::fs::create_dir_all(&args.out) {
        eprintln!("{}: {e}", args.out.display());
        return ExitCode::FAILURE;
    }
    let mut writes: Vec<(PathBuf, Result<String, String>)> = vec![(json, Ok(report.to_json()))];
    if !sweeps.is_empty() {
        writes.push((
            args.out.join("sweep.json"),
            serde_json::to_string_pretty(&sweeps).map_err(|e| e.to_string()),
        ));
    }
    // The pictures show the rows asked for, or the handful that tell the
    // story: the switch, the dial, the limits and the recommendation.
    let chosen: Vec<&str> = if args.policies.len() == every_row().len() {
        Vec::new()
    } else {
        args.policies.iter().map(Row::name).collect()
    };
    for sweep in &sweeps {
        let rows: &[&str] = if chosen.is_empty() {
            &SWEEP_ROWS
        } else {
            &chosen
        };
        for kind in Kind::ALL {
            if sweep.cells.iter().any(|c| c.kind == kind) {
                writes.push((
                    args.out.join(format!("{}-{}.svg", sweep.name, kind)),
                    sweep_svg(sweep, kind, rows),
                ));
            }
        }
    }
    for scenario in tables {
        writes.push((
            args.out.join(format!("{}.svg", scenario.name)),
            svg(scenario, &chosen),
        ));
        // Latency percentiles where a row hedged: with and without.
        let hedged = scenario.policies.iter().any(|p| {
            p.retry
                .as_ref()
                .and_then(|r| r.hedges)
                .is_some_and(|h| h.sent > 0)
        });
        if hedged {
            let rows: &[&str] = if chosen.is_empty() {
                &LATENCY_ROWS
            } else {
                &chosen
            };
            writes.push((
                args.out.join(format!("{}-latency.svg", scenario.name)),
                latency_svg(scenario, rows),
            ));
        }
    }
    for (path, doc) in writes {
        match doc {
            Ok(doc) => {
                if let Err(e) = std::fs::write(&path, doc) {
                    eprintln!("{}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
                println!("wrote {}", path.display());
            }
            Err(e) => eprintln!("{}: could not write: {e}", path.display()),
        }
    }
    ExitCode::SUCCESS
}

/// Run `scenarios` against the rows asked for, printing progress, or say
/// why not. Progress redraws one line, so only on a terminal: in a log it
/// would be one line of thousands of carriage returns.
fn run(scenarios: &[Scenario], args: &Args) -> Option<(Comparison, Stats)> {
    let terminal = std::io::stderr().is_terminal();
    let result = compare(scenarios, &args.policies, args.seed, |p| {
        if !terminal {
            return;
        }
        eprint!(
            "\r[{:>5}/{}] {:<34} {:<22} {:>6.2} s ",
            p.done,
            p.total,
            p.scenario,
            p.policy,
            p.took.as_secs_f64()
        );
        let _ = std::io::stderr().flush();
    });
    if terminal {
        eprintln!();
    }
    result.map_err(|e| eprintln!("{e}")).ok()
}

/// `--families N`: draw the families, run every cell of each against the
/// rows, print the tally (and a line per family), write each family's
/// scenario file and the scores.
fn run_families(args: &Args, families: Families) -> ExitCode {
    let drawn = match families.draw() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let cells: Vec<Cell> = drawn.iter().flat_map(|f| f.scenario.cells()).collect();
    let all: Vec<Scenario> = cells.iter().map(|c| c.scenario.clone()).collect();
    let Some((report, stats)) = run(&all, args) else {
        return ExitCode::FAILURE;
    };
    let sweeps = SweepReport::scored(&cells, &report.scenarios);
    println!("Cells held per family (recommended; the best other row):");
    for (family, sweep) in drawn.iter().zip(&sweeps) {
        let (held, of) = sweep.held("recommended");
        let best_other = sweep
            .policies()
            .into_iter()
            .filter(|p| *p != "recommended")
            .map(|p| (sweep.held(p).0, p))
            .max();
        println!(
            "  {:<14} {:>2}/{:<2} {:<26} {}",
            sweep.name,
            held,
            of,
            best_other.map_or_else(String::new, |(n, p)| format!("{p} {n}")),
            family.scenario.about.split(": ").nth(1).unwrap_or(""),
        );
    }
    let tally = Tally::new(&sweeps);
    println!("\n{}", tally.table());
    println!(
        "family seed {}, run seed {}: {} simulated calls in {:.1} s",
        families.seed,
        report.seed,
        stats.calls,
        stats.wall.as_secs_f64()
    );
    let dir = args.out.join(format!("families-{}", families.seed));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("{}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let mut writes: Vec<(PathBuf, String)> = drawn
        .iter()
        .map(|f| {
            (
                dir.join(format!("{}.toml", f.scenario.name)),
                f.toml.clone(),
            )
        })
        .collect();
    match serde_json::to_string_pretty(&(&tally, &sweeps)) {
        Ok(json) => writes.push((dir.join("families.json"), json)),
        Err(e) => eprintln!("families.json: could not write: {e}"),
    }
    for (path, text) in writes {
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("{}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    println!(
        "wrote {} (each family's scenario file, and the scores)",
        dir.display()
    );
    ExitCode::SUCCESS
}
