//! Limiters from a configuration file.
//!
//! ```sh
//! cargo run --example config                       # examples/policies.toml
//! cargo run --example config -- my-policies.toml   # or any other file
//! ```
//!
//! Switching a dependency from AIMD to a breaker is a one-word edit to the
//! file (see its `payments`), and its timeout and wait sit in the same
//! block. A bad file is refused with every field at fault, each with the
//! reason and the line (here, `checkout` switched to `"breaker"`, whose
//! AIMD fields a breaker does not have):
//!
//! ```text
//! examples/policies.toml:39: invalid `limiters.checkout.policy.mode`: unknown field `mode`, expected one of …
//! examples/policies.toml:40: invalid `limiters.checkout.policy.initial`: unknown field `initial`, expected one of …
//! …
//! examples/policies.toml:44: invalid `limiters.checkout.policy.timeout`: unknown field `timeout`, expected one of …
//! ```

use std::process::ExitCode;

use rheostat::config::LimitersConfig;

fn main() -> ExitCode {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/examples/policies.toml").to_owned()
    });
    let file = match LimitersConfig::load(&path) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{path}:");
    for name in file.limiters.keys() {
        describe(&file, name);
    }
    // A name the file does not list gets the default.
    describe(&file, "anything-else");
    ExitCode::SUCCESS
}

fn describe(file: &LimitersConfig, name: &str) {
    match file.build(name) {
        Ok(limiter) => {
            let snapshot = limiter.snapshot();
            let gate = limiter.gate();
            let members = match file.get(name).map(|c| &c.policy) {
                Some(rheostat::config::PolicyConfig::Stack { members }) => {
                    let names: Vec<_> = members.iter().map(|m| m.name()).collect();
                    format!(" [{}]", names.join(" → "))
                }
                _ => String::new(),
            };
            let limit = if gate.limit == rheostat::algorithms::MAX_LIMIT {
                "unlimited".to_owned()
            } else {
                gate.limit.to_string()
            };
            let retry = limiter.retry().map_or(String::new(), |r| {
                let c = r.config();
                let deadline = c
                    .deadline
                    .map_or(String::new(), |d| format!(" within {d:?}"));
                format!(
                    "  retry: {} attempts{deadline}, budget {:.0}% + {}/s",
                    c.attempts,
                    c.budget.ratio * 100.0,
                    c.budget.min_per_second
                )
            });
            // A learned timeout's attempt timeout is its ceiling.
            let learned = file
                .get(name)
                .and_then(|c| c.timeout)
                .is_some_and(|t| t.as_learned().is_some());
            let learned = if learned { "learned, up to " } else { "" };
            // Callers wait when the file says so, or says for how long.
            let waits = file
                .get(name)
                .is_some_and(|c| c.wait || c.max_wait.is_some());
            let call = match (limiter.timeouts().ceiling, waits) {
                (Some(t), true) => format!("  calls: {learned}{t:?}, waiting"),
                (Some(t), false) => format!("  calls: {learned}{t:?}"),
                (None, true) => "  calls: waiting".to_owned(),
                (None, false) => String::new(),
            };
            println!(
                "  {name:<16} {:<9}{members:<22} limit {limit:<10} admit {:.0}%{call}{retry}",
                snapshot.policy,
                gate.admit_probability * 100.0,
            );
        }
        Err(e) => println!("  {name:<16} {e}"),
    }
}
