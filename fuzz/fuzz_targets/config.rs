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
});
