//! A file's errors, named by the path of the field in the file, the value
//! as written, what is allowed, and the line (reading it is `parse.rs`).

use std::fmt;
use std::path::{Path, PathBuf};

use serde_value::Value;

use super::locate::Document;
use super::paths::join;
use super::spelling::near_limiter;
use super::tree::{echo, written, Format};
use super::wording::{clip, clip_field, explain, shorten, Mark};
use crate::algorithms::ConfigError;

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
/// A file with several faults is one error carrying them all, in file
/// order ([`ConfigFileError::errors`], at most
/// [`MAX_ERRORS`](super::MAX_ERRORS), and [`ConfigFileError::omitted`]
/// counts the rest): its accessors give the first, and its message shows
/// each on its own line. A syntax error stops the reading: it is the only
/// one.
///
/// Its `Debug` is its message, as `std::io::Error`'s and `anyhow`'s read:
/// what `?` in `main` prints (`Error: line 1: invalid …`).
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
#[derive(Clone, PartialEq)]
pub struct ConfigFileError {
    details: Box<Details>,
}

#[derive(Clone, PartialEq)]
struct Details {
    file: Option<PathBuf>,
    field: String,
    reason: String,
    line: Option<usize>,
    invalid: Option<ConfigError>,
    /// The file's other errors, after this one in file order.
    others: Vec<ConfigFileError>,
    /// How many errors were found beyond those kept.
    omitted: usize,
    /// Whether the search for more stopped at its bound.
    stopped: bool,
}

impl ConfigFileError {
    /// The (first) field at fault, as a dotted path in the file; empty if
    /// the fault is not in one field (a syntax error).
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
        for other in &mut self.details.others {
            other.details.file = Some(path.to_owned());
        }
        self
    }

    pub(super) fn new(field: String, reason: String, line: Option<usize>) -> Self {
        ConfigFileError {
            details: Box::new(Details {
                file: None,
                field: clip_field(&field),
                reason: clip(&reason),
                line,
                invalid: None,
                others: Vec::new(),
                omitted: 0,
                stopped: false,
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
        let document = Document::parse(text, format);
        let line = document.find(&field).line;
        ConfigFileError::out_of_range(
            &document,
            written(text, format).as_ref(),
            field,
            error.found(),
            error.allowed(),
            line,
        )
    }

    /// A value out of range: shown as the file wrote it (`"0s"`, not the
    /// `0ns` it is read as), or said to be the default if the file does
    /// not set it.
    fn out_of_range(
        document: &Document<'_>,
        tree: Option<&Value>,
        field: String,
        found: &str,
        allowed: &str,
        line: Option<usize>,
    ) -> Self {
        let (found, default) = if document.find(&field).whole {
            let echo = tree.and_then(|t| echo(t, &field));
            (echo.unwrap_or_else(|| found.to_owned()), "")
        } else {
            (found.to_owned(), " (the default; the file does not set it)")
        };
        let mut e = ConfigFileError::new(
            field,
            format!("found {found}{default}, expected {allowed}"),
            line,
        );
        e.details.invalid = Some(ConfigError::new(
            e.details.field.clone(),
            shorten(&found),
            allowed.to_owned(),
        ));
        e
    }

    /// The error serde gave as `message` at `path` (its own `line`, if
    /// any), in this module's words, for the file `document` (read as
    /// `tree`, if it could be).
    pub(crate) fn at(
        document: &Document<'_>,
        tree: Option<&Value>,
        format: Format,
        path: &str,
        message: &str,
        line: Option<usize>,
    ) -> Self {
        let mark = Mark::read(message);
        let (inner, reason) = mark.as_ref().map_or(("", message), |m| (m.path, m.reason));
        // serde_path_to_error writes `?` for a place it could not name (a
        // syntax error inside a table): name the table instead.
        let path = path.trim_end_matches(".?").trim_end_matches('?');
        let field = join(path, inner);
        if let Some((found, allowed)) = mark.as_ref().and_then(|m| m.range) {
            // A value out of range is checked once its whole table is read:
            // serde's position is the table's. The field's own line, if the
            // file wrote it.
            let line = document.find(&field).line;
            return ConfigFileError::out_of_range(document, tree, field, found, allowed, line);
        }
        let line = match format {
            // An error inside a policy table is reported by toml at the
            // table; look the field itself up.
            Format::Toml => document.find(&field).line.or(line),
            Format::Json => line.or(document.find(&field).line),
        };
        let mut reason = explain(reason, document, &field);
        let no_policy = reason == "missing field `policy`";
        if no_policy && field.starts_with("limiters.") && document.find("default.policy").whole {
            // A listed limiter is whole in its own table: the default is
            // for the names a file does not list.
            reason = format!(
                "found no `policy`, expected `[{field}.policy]`: `[default]` is for names the \
                 file does not list, and is not merged into a listed limiter"
            );
        }
        if let Some(name) = field.strip_prefix("limiters.").filter(|_| no_policy) {
            reason.push_str(&misspelled(document, name));
        }
        ConfigFileError::new(field, reason, line)
    }

    /// This error, with its reason now `reason` and its range error
    /// `invalid`.
    pub(crate) fn with_reason(mut self, reason: &str, invalid: ConfigError) -> Self {
        self.details.reason = clip(reason);
        self.details.invalid = Some(invalid);
        self
    }

    /// The first of `errors` (in the order given), carrying the others,
    /// how many more were found than kept, and whether the search for more
    /// `stopped` at its bound.
    pub(crate) fn all(
        mut errors: Vec<ConfigFileError>,
        omitted: usize,
        stopped: bool,
    ) -> Option<Self> {
        if errors.is_empty() {
            return None;
        }
        let mut first = errors.remove(0);
        first.details.others = errors;
        first.details.omitted = omitted;
        first.details.stopped = stopped && !first.details.others.is_empty();
        Some(first)
    }

    /// This error alone, without the others it carries.
    fn alone(&self) -> ConfigFileError {
        let mut e = self.clone();
        e.details.others = Vec::new();
        e.details.omitted = 0;
        e.details.stopped = false;
        e
    }

    /// Every error found in the file, each alone, in file order: this one
    /// first, then at most [`MAX_ERRORS`](super::MAX_ERRORS) − 1 others (see
    /// [`ConfigFileError::omitted`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::config::LimitersConfig;
    ///
    /// let err = LimitersConfig::from_toml(
    ///     "[limiters.a.policy]\npolicy = \"aimd\"\nbackof = 0.5\nmaxx = 3\n",
    /// )
    /// .unwrap_err();
    /// let fields: Vec<_> = err.errors().map(|e| (e.field().to_owned(), e.line())).collect();
    /// assert_eq!(
    ///     fields,
    ///     [
    ///         ("limiters.a.policy.backof".to_owned(), Some(3)),
    ///         ("limiters.a.policy.maxx".to_owned(), Some(4)),
    ///     ]
    /// );
    /// ```
    pub fn errors(&self) -> impl Iterator<Item = ConfigFileError> + '_ {
        std::iter::once(self.alone()).chain(self.details.others.iter().cloned())
    }

    /// How many more errors were found than [`ConfigFileError::errors`]
    /// gives (which gives at most [`MAX_ERRORS`](super::MAX_ERRORS)). The
    /// search is bounded (each error found costs a reading of the file, and
    /// a long file is read fewer times): the message says if it stopped
    /// before the end.
    pub fn omitted(&self) -> usize {
        self.details.omitted
    }
}

impl fmt::Display for ConfigFileError {
    /// The error on one line: `file:line: invalid `field`: reason`. A file
    /// with several errors shows each on its own line, in file order, and
    /// says how many more there are, if any.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_one(f)?;
        for other in &self.details.others {
            f.write_str("\n")?;
            other.fmt_one(f)?;
        }
        match self.details.omitted {
            0 => {}
            1 => f.write_str("\nand 1 more error")?,
            n => write!(f, "\nand {n} more errors")?,
        }
        if self.details.stopped {
            f.write_str("\n(the search for more errors stopped there: fix these and read again)")?;
        }
        Ok(())
    }
}

/// The message, as [`Display`](fmt::Display) writes it: what `?` in
/// `main` prints, rather than the fields of a struct.
impl fmt::Debug for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl ConfigFileError {
    fn fmt_one(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

/// Where the limiter `name`'s table lacks its policy, what else in the
/// file looks like it misspelled (`; is `[limiters.payment.policy]` on line
/// 4 meant for it? …`), or nothing.
fn misspelled(document: &Document<'_>, name: &str) -> String {
    let Some((table, line)) = near_limiter(document, name) else {
        return String::new();
    };
    let other = table
        .strip_prefix("limiters.")
        .map_or(table.as_str(), |t| t.strip_suffix(".policy").unwrap_or(t));
    let on_line = line.map(|l| format!(" on line {l}")).unwrap_or_default();
    format!(
        "; is `[{table}]`{on_line} meant for it? `{}` looks like a misspelling of `{}`",
        shorten(other),
        shorten(name)
    )
}

/// The message says everything (the range error's too, which
/// [`ConfigFileError::config_error`] hands out typed): no source.
impl std::error::Error for ConfigFileError {}

/// The most bytes a configuration text may hold: a file of ten thousand
/// limiters is a few hundred kilobytes, and everything read is held while it
/// is parsed and checked.
pub const MAX_FILE_BYTES: usize = 1 << 20;
