//! Field names: a policy names its fields after itself (`aimd.backoff`,
//! `breaker.window.calls`); a configuration names them as a file writes them
//! (`backoff`, `window.count.calls`, `limiters.payments.policy.backoff`).

use crate::algorithms::ConfigError;

/// `outer.inner`, where either may be empty or serde_path_to_error's `.`
/// (and `inner` may start with an index: `members` + `[1]`).
pub(crate) fn join(outer: &str, inner: &str) -> String {
    let outer = if outer == "." { "" } else { outer };
    let inner = if inner == "." { "" } else { inner };
    match (outer.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_owned(),
        (false, true) => outer.to_owned(),
        (false, false) if inner.starts_with('[') => format!("{outer}{inner}"),
        (false, false) => format!("{outer}.{inner}"),
    }
}

/// `error` with its field renamed to `field`.
pub(crate) fn renamed(error: &ConfigError, field: String) -> ConfigError {
    ConfigError::new(field, error.found(), error.allowed().to_owned())
}

/// `error` with `location.` put before its field.
pub(crate) fn located(location: &str, error: &ConfigError) -> ConfigError {
    renamed(error, join(location, error.field()))
}

/// The path, inside a policy table, of the field a policy names `field`:
/// a policy names its fields by their serde path after its own name
/// (`aimd.backoff`, `breaker.window.count.calls`), so this drops the name.
pub(crate) fn policy_field(field: &str) -> String {
    field
        .split_once('.')
        .map_or_else(String::new, |(_, rest)| rest.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_become_table_paths() {
        assert_eq!(policy_field("aimd.backoff"), "backoff");
        assert_eq!(
            policy_field("breaker.window.count.calls"),
            "window.count.calls"
        );
        assert_eq!(policy_field("breaker.min_calls"), "min_calls");
        assert_eq!(policy_field("stack.members"), "members");
        assert_eq!(join("members[1]", "backoff"), "members[1].backoff");
        assert_eq!(join("limiters.a", "[0]"), "limiters.a[0]");
        assert_eq!(join(".", "max"), "max");
    }
}
