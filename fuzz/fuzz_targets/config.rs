//! Arbitrary text as a limiter configuration file, TOML and JSON: parsing
//! never panics, and whatever parses builds into limiters (or a
//! `ConfigError`) without panicking, with sane gates.

#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use rheostat::config::LimitersConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    check(text);
    // Deep and large: the input under thousands of levels of nesting, and
    // repeated to the size bound (its first byte says how far), which the
    // fuzzer's own inputs, a few kilobytes, never reach.
    let depth = 1000 * usize::from(data.first().copied().unwrap_or(0) % 64);
    for open in ["[", "{\"a\":", "a = [", "a = {b = "] {
        check(&format!("{}{text}", open.repeat(depth)));
    }
    if !text.is_empty() {
        let copies = rheostat::config::MAX_FILE_BYTES / text.len();
        check(&text.repeat(copies.min(usize::from(data[0]) * 64)));
    }
});

fn check(text: &str) {
    for parsed in [LimitersConfig::from_toml(text), LimitersConfig::from_json(text)] {
        let Ok(file) = parsed else { continue };
        for name in file.limiters.keys() {
            if let Ok(limiter) = file.build(name) {
                let gate = limiter.gate();
                assert!(!gate.admit_probability.is_nan());
                assert!(gate.limit <= rheostat::algorithms::MAX_LIMIT);
            }
        }
    }
}
