//! The main job: every shipped scenario against every policy, in virtual
//! time, on the same `Limiter` code users run.
//!
//! ```text
//! cargo run --release --example compare
//! cargo run --release --example compare -- --scenario brownout --policy aimd --policy breaker
//! cargo run --release --example compare -- --seed 7 --json out.json --out plots/ my-scenario.toml
//! ```
//!
//! Prints a table per scenario, writes every metric to
//! `target/rheostat/compare.json` and an SVG per scenario next to it.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use rheostat_sim::{compare, svg, PolicyKind, Scenario};

struct Args {
    scenarios: Vec<String>,
    policies: Vec<PolicyKind>,
    seed: u64,
    json: Option<PathBuf>,
    out: PathBuf,
    files: Vec<PathBuf>,
}

const USAGE: &str = "usage: compare [--scenario NAME]... [--policy NAME]... [--seed N] [--json PATH] [--out DIR] [SCENARIO.toml]...";

fn parse() -> Result<Args, String> {
    let mut args = Args {
        scenarios: Vec::new(),
        policies: Vec::new(),
        seed: 1,
        json: None,
        out: PathBuf::from("target/rheostat"),
        files: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| it.next().ok_or(format!("{flag} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--scenario" => args.scenarios.push(value("--scenario")?),
            "--policy" => {
                let name = value("--policy")?;
                let kind = PolicyKind::from_name(&name).ok_or_else(|| {
                    let names: Vec<_> = PolicyKind::ALL.iter().map(|k| k.name()).collect();
                    format!("unknown policy `{name}`; known: {}", names.join(", "))
                })?;
                args.policies.push(kind);
            }
            "--seed" => {
                let v = value("--seed")?;
                args.seed = v
                    .parse()
                    .map_err(|_| format!("--seed takes a whole number, not `{v}`"))?;
            }
            "--json" => args.json = Some(PathBuf::from(value("--json")?)),
            "--out" => args.out = PathBuf::from(value("--out")?),
            "-h" | "--help" => return Err(USAGE.to_string()),
            flag if flag.starts_with("--") => {
                return Err(format!("unknown flag `{flag}`\n{USAGE}"))
            }
            file => args.files.push(PathBuf::from(file)),
        }
    }
    if args.policies.is_empty() {
        args.policies = PolicyKind::ALL.to_vec();
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
    let mut scenarios = if args.files.is_empty() {
        match Scenario::builtin() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        }
    } else {
        let mut loaded = Vec::new();
        for file in &args.files {
            match Scenario::from_file(file) {
                Ok(s) => loaded.push(s),
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(2);
                }
            }
        }
        loaded
    };
    if !args.scenarios.is_empty() {
        let known: Vec<String> = scenarios.iter().map(|s| s.name.clone()).collect();
        for name in &args.scenarios {
            if !known.contains(name) {
                eprintln!("unknown scenario `{name}`; known: {}", known.join(", "));
                return ExitCode::from(2);
            }
        }
        scenarios.retain(|s| args.scenarios.contains(&s.name));
    }

    let result = compare(&scenarios, &args.policies, args.seed, |p| {
        eprint!(
            "\r[{:>3}/{}] {:<14} {:<22} {:>6.2} s   ",
            p.done,
            p.total,
            p.scenario,
            p.policy.name(),
            p.took.as_secs_f64()
        );
        let _ = std::io::stderr().flush();
    });
    eprintln!();
    let (report, stats) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    for scenario in &report.scenarios {
        println!("{}", scenario.table());
    }
    println!(
        "{} scenarios, {} simulated calls in {:.1} s ({:.2} M calls per core-second), seed {}",
        report.scenarios.len(),
        stats.calls,
        stats.wall.as_secs_f64(),
        stats.calls_per_core_second() / 1e6,
        report.seed
    );

    if let Err(e) = std::fs::create_dir_all(&args.out) {
        eprintln!("{}: {e}", args.out.display());
        return ExitCode::FAILURE;
    }
    let json = args.json.unwrap_or_else(|| args.out.join("compare.json"));
    if let Err(e) = std::fs::write(&json, report.to_json()) {
        eprintln!("{}: {e}", json.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {}", json.display());
    for scenario in &report.scenarios {
        let path = args.out.join(format!("{}.svg", scenario.name));
        match svg(scenario) {
            Ok(doc) => {
                if let Err(e) = std::fs::write(&path, doc) {
                    eprintln!("{}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
                println!("wrote {}", path.display());
            }
            Err(e) => eprintln!("{}: could not plot: {e}", scenario.name),
        }
    }
    ExitCode::SUCCESS
}
