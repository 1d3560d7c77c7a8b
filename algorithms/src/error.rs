//! A configuration value outside what a policy accepts.

use std::borrow::Cow;
use std::fmt;

/// A configuration value outside what a policy accepts.
///
/// It names the field, shows the value found and says what is allowed.
/// Its `Debug` is its message, as `std::io::Error`'s and `anyhow`'s read:
/// what `?` in `main` prints.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::ConfigError;
///
/// let e = ConfigError::new("aimd.backoff", 1.5, "a number in (0, 1)");
/// let message = "invalid `aimd.backoff`: found 1.5, expected a number in (0, 1)";
/// assert_eq!(e.to_string(), message);
/// assert_eq!(format!("{e:?}"), message);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: Cow<'static, str>,
    found: String,
    allowed: Cow<'static, str>,
}

impl ConfigError {
    /// An error for `field`, which held `found` where `allowed` was expected.
    pub fn new(
        field: impl Into<Cow<'static, str>>,
        found: impl fmt::Display,
        allowed: impl Into<Cow<'static, str>>,
    ) -> Self {
        ConfigError {
            field: field.into(),
            found: found.to_string(),
            allowed: allowed.into(),
        }
    }

    /// The field at fault, such as `"aimd.backoff"`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The value that was refused, as text.
    pub fn found(&self) -> &str {
        &self.found
    }

    /// What the field accepts, such as `"a number in (0, 1)"`.
    pub fn allowed(&self) -> &str {
        &self.allowed
    }

    /// The same error with `prefix.` put before the field name, for nested
    /// configuration (`"payments"` + `"aimd.min"` → `"payments.aimd.min"`).
    #[must_use]
    pub fn within(mut self, prefix: &str) -> Self {
        self.field = Cow::Owned(format!("{prefix}.{}", self.field));
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid `{}`: found {}, expected {}",
            self.field, self.found, self.allowed
        )
    }
}

/// The message, as [`Display`](fmt::Display) writes it.
impl fmt::Debug for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for ConfigError {}
