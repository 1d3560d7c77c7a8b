//! Reading a file: its errors, named by the path of the field in the file,
//! the value as written, what is allowed, and the line.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::locate::{line_of, Document};
use super::paths::join;
use super::policy::Mark;
use crate::algorithms::ConfigError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Toml,
    Json,
}

/// A configuration file that could not be read, parsed or checked.
///
/// It names the field as a path in the file (`limiters.payments.policy.backoff`,
/// `limiters.search.policy.members[0].limit`), shows the value as written,
/// says what is allowed, and gives the line (in TOML and in JSON). A value
/// the file left out, whose default another field's value makes invalid, is
/// said to be the default. A value out of range also carries the
/// [`ConfigError`], whose field is the same path
/// ([`ConfigFileError::config_error`]; not the error's source, since the
/// message already says what it says).
///
/// # Examples
///
/// ```
/// use rheostat::config::LimitersConfig;
///
/// // `initial` is left out: its default (10) is above the `max` written.
/// let err = LimitersConfig::from_toml("[limiters.search.policy]\npolicy = \"aimd\"\nmax = 5")
///     .unwrap_err();
/// assert_eq!(err.field(), "limiters.search.policy.initial");
/// assert_eq!(
///     err.to_string(),
///     "line 1: invalid `limiters.search.policy.initial`: found 10 (the default; the file \
///      does not set it), expected a whole number in [min, max] = [1, 5]"
/// );
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigFileError {
    details: Box<Details>,
}

#[derive(Clone, Debug, PartialEq)]
struct Details {
    file: Option<PathBuf>,
    field: String,
    reason: String,
    line: Option<usize>,
    invalid: Option<ConfigError>,
}

impl ConfigFileError {
    /// The field at fault, as a dotted path in the file; empty if the fault
    /// is not in one field (a syntax error).
    pub fn field(&self) -> &str {
        &self.details.field
    }

    /// Why it was refused: `found 1.5, expected a number in (0, 1)`,
    /// `unknown field `backof`, expected one of …`.
    pub fn reason(&self) -> &str {
        &self.details.reason
    }

    /// The line (from 1) the fault is on, where known.
    pub fn line(&self) -> Option<usize> {
        self.details.line
    }

    /// The file, if the error came from
    /// [`LimitersConfig::load`](super::LimitersConfig::load).
    pub fn file(&self) -> Option<&Path> {
        self.details.file.as_deref()
    }

    /// The range error, if the file parsed but a value is out of range.
    pub fn config_error(&self) -> Option<&ConfigError> {
        self.details.invalid.as_ref()
    }

    pub(crate) fn unreadable(path: &Path, error: &std::io::Error) -> Self {
        ConfigFileError::new(
            String::new(),
            format!("cannot read the file: {error}"),
            None,
        )
        .in_file(path)
    }

    pub(crate) fn in_file(mut self, path: &Path) -> Self {
        self.details.file = Some(path.to_owned());
        self
    }

    fn new(field: String, reason: String, line: Option<usize>) -> Self {
        ConfigFileError {
            details: Box::new(Details {
                file: None,
                field: clip_field(&field),
                reason: clip(&reason),
                line,
                invalid: None,
            }),
        }
    }

    /// A file that configures nothing: no limiter and no default.
    pub(crate) fn empty() -> Self {
        ConfigFileError::new(
            String::new(),
            "found no `[limiters.<name>]` table and no `[default]`, expected at least one: \
             the file configures nothing"
                .to_owned(),
            None,
        )
    }

    /// A file named as YAML, which is not read.
    pub(crate) fn yaml() -> Self {
        ConfigFileError::new(
            String::new(),
            "found a YAML file name, expected TOML (any other name) or JSON (`.json`): \
             YAML is not read"
                .to_owned(),
            None,
        )
    }

    /// A text longer than [`MAX_FILE_BYTES`].
    pub(crate) fn too_large(bytes: u64) -> Self {
        ConfigFileError::new(
            String::new(),
            format!(
                "found a file of {bytes} bytes, expected at most {MAX_FILE_BYTES} (1 MiB): \
                 a configuration is read whole, so its size is bounded"
            ),
            None,
        )
    }

    /// A value out of range, `error` naming its field by its path in the
    /// table at `location` of the file `text`.
    pub(crate) fn invalid(text: &str, format: Format, location: &str, error: &ConfigError) -> Self {
        let field = join(location, error.field());
        let found = Document::parse(text, format).find(&field);
        let default = if found.whole {
            ""
        } else {
            " (the default; the file does not set it)"
        };
        let mut e = ConfigFileError::new(
            field.clone(),
            format!(
                "found {}{default}, expected {}",
                error.found(),
                error.allowed()
            ),
            found.line,
        );
        e.details.invalid = Some(ConfigError::new(
            e.details.field.clone(),
            shorten(error.found()),
            error.allowed().to_owned(),
        ));
        e
    }
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.details.file, self.details.line) {
            (Some(file), Some(line)) => write!(f, "{}:{line}: ", file.display())?,
            (Some(file), None) => write!(f, "{}: ", file.display())?,
            (None, Some(line)) => write!(f, "line {line}: ")?,
            (None, None) => {}
        }
        if self.details.field.is_empty() {
            f.write_str(&self.details.reason)
        } else {
            write!(
                f,
                "invalid `{}`: {}",
                self.details.field, self.details.reason
            )
        }
    }
}

/// The message says everything (the range error's too, which
/// [`ConfigFileError::config_error`] hands out typed): no source.
impl std::error::Error for ConfigFileError {}

/// The most bytes a configuration text may hold: a file of ten thousand
/// limiters is a few hundred kilobytes, and everything read is held while it
/// is parsed and checked.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// The most bytes of one name or value an error repeats: a longer one is
/// shown by its start and its length, so a hostile file cannot make an
/// error as large as itself.
const ECHO: usize = 64;

/// `s`, or its start and its length if it is longer than [`ECHO`].
fn shorten(s: &str) -> String {
    if s.len() <= ECHO {
        return s.to_owned();
    }
    let mut end = ECHO / 2;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

/// An error's reason with every quoted name or value in it shortened (see
/// [`shorten`]), and the whole at most sixteen times [`ECHO`].
fn clip(text: &str) -> String {
    if text.len() <= ECHO {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find(['`', '"']) {
        let quote = &rest[open..=open];
        out.push_str(&rest[..=open]);
        let inside = &rest[open + 1..];
        let close = inside.find(quote).unwrap_or(inside.len());
        out.push_str(&shorten(&inside[..close]));
        rest = &inside[close..];
        if let Some(after) = rest.strip_prefix(quote) {
            out.push_str(quote);
            rest = after;
        }
    }
    out.push_str(rest);
    if out.len() > 16 * ECHO {
        let mut end = 16 * ECHO;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push('…');
    }
    out
}

/// A field's path with every name in it shortened (see [`shorten`]).
fn clip_field(field: &str) -> String {
    if field.len() <= ECHO {
        return field.to_owned();
    }
    field.split('.').map(shorten).collect::<Vec<_>>().join(".")
}

/// Parse `text`, naming the field of the first error by its path.
pub(crate) fn parse<T: DeserializeOwned>(text: &str, format: Format) -> Result<T, ConfigFileError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(ConfigFileError::too_large(text.len() as u64));
    }
    let (path, message, line) = match format {
        Format::Toml => {
            let deserializer = match toml::de::Deserializer::parse(text) {
                Ok(d) => d,
                Err(e) => {
                    return Err(ConfigFileError::new(
                        String::new(),
                        e.message().trim_end().to_owned(),
                        e.span().map(|s| line_of(text, s.start)),
                    ))
                }
            };
            match serde_path_to_error::deserialize(deserializer) {
                Ok(value) => return Ok(value),
                Err(e) => {
                    let path = e.path().to_string();
                    let inner = e.into_inner();
                    let line = inner.span().map(|s| line_of(text, s.start));
                    (path, inner.message().trim_end().to_owned(), line)
                }
            }
        }
        Format::Json => {
            let mut deserializer = serde_json::Deserializer::from_str(text);
            let parsed = match serde_path_to_error::deserialize(&mut deserializer) {
                Ok(value) => deserializer
                    .end()
                    .map(|()| value)
                    .map_err(|e| (String::new(), e)),
                Err(e) => Err((e.path().to_string(), e.into_inner())),
            };
            match parsed {
                Ok(value) => {
                    // serde keeps the last of a repeated key; refuse it.
                    if let Document::Json(index) = Document::parse(text, Format::Json) {
                        if let Some((field, line)) = index.duplicate() {
                            return Err(ConfigFileError::new(
                                field,
                                "written twice in the same object; keep one".to_owned(),
                                Some(line),
                            ));
                        }
                    }
                    return Ok(value);
                }
                Err((path, inner)) => {
                    let line = (inner.line() > 0).then_some(inner.line());
                    let full = inner.to_string();
                    let suffix = format!(" at line {} column {}", inner.line(), inner.column());
                    let mut message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
                    if inner.is_syntax() || inner.is_eof() {
                        message = format!("{message} (column {})", inner.column());
                    }
                    (path, message, line)
                }
            }
        }
    };
    let mark = Mark::read(&message);
    let (inner, reason) = mark
        .as_ref()
        .map_or(("", message.as_str()), |m| (m.path, m.reason));
    // serde_path_to_error writes `?` for a place it could not name (a
    // syntax error inside a table): name the table instead.
    let path = path.trim_end_matches(".?").trim_end_matches('?').to_owned();
    let field = join(&path, inner);
    let document = Document::parse(text, format);
    let range = mark.as_ref().and_then(|m| m.range);
    let line = if range.is_some() {
        // A value out of range is checked once its whole table is read:
        // serde's position is the table's. The field's own line, if the
        // file wrote it.
        document.find(&field).line
    } else {
        match format {
            // An error inside a policy table is reported by toml at the
            // table; look the field itself up.
            Format::Toml => document.find(&field).line.or(line),
            Format::Json => line.or(document.find(&field).line),
        }
    };
    let mut error = ConfigFileError::new(field.clone(), explain(reason, &document, &field), line);
    if let Some((found, allowed)) = range {
        error.details.invalid = Some(ConfigError::new(
            error.details.field.clone(),
            shorten(found),
            allowed.to_owned(),
        ));
    }
    Err(error)
}

/// serde's wording, in ours: `found <the value as written>, expected <what
/// is allowed>`.
fn explain(reason: &str, document: &Document<'_>, field: &str) -> String {
    // `invalid value: map, expected map with a single key`: a choice table
    // (`window`, `cooldown`, `half_open`) with more than one choice in it.
    if reason.contains("expected map with a single key") {
        let keys = document.keys(field);
        let written = keys
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(" and ");
        return if keys.is_empty() {
            "expected a table with exactly one choice in it".to_owned()
        } else {
            format!("found {written}, expected exactly one of them (each is a different choice)")
        };
    }
    let Some(rest) = reason
        .strip_prefix("invalid type: ")
        .or_else(|| reason.strip_prefix("invalid value: "))
    else {
        return reason.to_owned();
    };
    let Some((found, expected)) = rest.split_once(", expected ") else {
        return reason.to_owned();
    };
    let found = written(found);
    let expected = allowed(expected);
    if let Some(value) = found.strip_prefix("\"-").and_then(|v| v.strip_suffix('"')) {
        if expected.starts_with("a duration") {
            return format!(
                "found \"-{value}\", expected {expected}; a duration cannot be negative"
            );
        }
    }
    if expected == "any value" {
        // serde-value refuses an integer it cannot hold before the field's
        // own type is known.
        return format!(
            "found {found}, too large: expected a whole number of at most {} \
             (and the field's own range)",
            u64::MAX
        );
    }
    format!("found {found}, expected {expected}")
}

/// A value in serde's words (`integer `5``, `string "x"`, `unit value`) as
/// the file wrote it.
fn written(found: &str) -> String {
    let unquote = |s: &str| {
        s.strip_prefix('`')
            .and_then(|s| s.strip_suffix('`'))
            .map(str::to_owned)
    };
    if let Some(rest) = found.strip_prefix("integer ") {
        let rest = rest.strip_suffix(" as i128").unwrap_or(rest);
        return unquote(rest).unwrap_or_else(|| rest.to_owned());
    }
    if let Some(rest) = found.strip_prefix("floating point ") {
        return unquote(rest).unwrap_or_else(|| rest.to_owned());
    }
    if let Some(rest) = found.strip_prefix("boolean ") {
        return unquote(rest).unwrap_or_else(|| rest.to_owned());
    }
    if let Some(rest) = found.strip_prefix("string ") {
        return rest.to_owned();
    }
    match found {
        "unit value" | "null" | "none" | "option" => "null".to_owned(),
        "map" => "a table".to_owned(),
        "sequence" => "an array".to_owned(),
        other => other.to_owned(),
    }
}

/// What serde says a field expects (`u32`, `f64`), in a reader's words.
fn allowed(expected: &str) -> String {
    match expected {
        "u32" => format!("a whole number in [0, {}]", u32::MAX),
        "u64" => format!("a whole number in [0, {}]", u64::MAX),
        "usize" => format!("a whole number in [0, {}]", usize::MAX),
        "i32" | "i64" => "a whole number".to_owned(),
        "f64" | "f32" => "a number".to_owned(),
        "a boolean" | "bool" => "true or false".to_owned(),
        "a duration" => "a duration such as \"800ms\", \"30s\", \"2m\" or \"1h 30m\"".to_owned(),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_wording_becomes_found_and_expected() {
        let none = Document::Unknown;
        assert_eq!(
            explain("invalid type: unit value, expected u32", &none, "max"),
            "found null, expected a whole number in [0, 4294967295]"
        );
        assert_eq!(
            explain("invalid type: string \"x\", expected f64", &none, "k"),
            "found \"x\", expected a number"
        );
        assert_eq!(
            explain(
                "invalid value: string \"-5s\", expected a duration",
                &none,
                "t"
            ),
            "found \"-5s\", expected a duration such as \"800ms\", \"30s\", \"2m\" or \
             \"1h 30m\"; a duration cannot be negative"
        );
        assert_eq!(
            explain(
                "invalid type: integer `99999999999999999999` as i128, expected any value",
                &none,
                "max"
            ),
            "found 99999999999999999999, too large: expected a whole number of at most \
             18446744073709551615 (and the field's own range)"
        );
        assert_eq!(
            explain("unknown field `backof`, expected one of `a`", &none, "x"),
            "unknown field `backof`, expected one of `a`"
        );
    }
}
