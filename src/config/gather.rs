//! Every error of a file at once, in file order.
//!
//! serde stops at the first error. To find the next, the file is read into
//! a tree of values, the field at fault is taken out of it, and the tree is
//! read again, until it reads (and passes its checks) or nothing more can
//! be taken out. A field that cannot be taken out on its own (a table with
//! no `policy`, a policy's name, a value the file does not set) takes its
//! limiter's whole table (`limiters.<name>` or `default`) with it: limiters
//! are independent, so the others are still read. Once something was taken
//! out of a limiter's table, an error there about a value the file does not
//! set may be one the taking out caused, and is not reported.
//!
//! Each round reads the whole tree again: the rounds are bounded
//! ([`MAX_ROUNDS`], and fewer for a long file: [`READ_BUDGET`] bytes read
//! in all), and so is the count of errors kept ([`MAX_ERRORS`]). A search
//! stopped by its bound says so.

use serde::de::{self, DeserializeOwned};
use serde_value::{DeserializerError, Value, ValueDeserializer};

use super::file::ConfigFileError;
use super::locate::Document;
use super::tree::{echo, node_mut, remove, resolve, unit, written, Format, Step};
use crate::algorithms::ConfigError;

/// The most errors a [`ConfigFileError`] carries; it says how many more it
/// found.
pub const MAX_ERRORS: usize = 20;

/// The most times a file is read again to find its next error.
const MAX_ROUNDS: usize = 3 * MAX_ERRORS;

/// The most bytes of text the rounds read in all: a file of 1 MiB is read
/// again at most 8 times (about a second, unoptimized).
const READ_BUDGET: usize = 8 << 20;

/// Every error of `text` (read as `T`, then `check`ed), `first` (the
/// first serde met) among them, in file order.
pub(crate) fn all<T, F>(
    text: &str,
    format: Format,
    first: ConfigFileError,
    check: &F,
) -> ConfigFileError
where
    T: DeserializeOwned,
    F: Fn(&T) -> Result<(), ConfigFileError>,
{
    // A syntax error (or a file too large): nothing else can be read.
    if first.field().is_empty() {
        return first;
    }
    let Some(original) = written(text, format) else {
        return first;
    };
    let document = Document::parse(text, format);
    let mut tree = original.clone();
    let mut found = vec![first.clone()];
    let mut touched: Vec<Vec<Step>> = Vec::new();
    let mut taken: Vec<String> = Vec::new();
    let mut current = first;
    let rounds = (READ_BUDGET / text.len().max(1)).clamp(1, MAX_ROUNDS);
    let mut stopped = true;
    for _ in 0..rounds {
        if !take_out(&mut tree, current.field(), &mut touched) {
            stopped = false;
            break;
        }
        taken.push(current.field().to_owned());
        match read::<T, F>(&tree, &original, &document, format, check) {
            Ok(()) => {
                stopped = false;
                break;
            }
            Err(next) => {
                // A file emptied by taking out (`configures nothing`), or a
                // fault of the whole file: nothing more to learn.
                if next.field().is_empty() {
                    stopped = false;
                    break;
                }
                // Caused by a taking out: a value the file does not set, in
                // a limiter's table something was taken out of; or a table
                // something was taken out of (`missing field`).
                let written = document.find(next.field()).whole;
                let caused = (!written
                    && unit(&tree, next.field()).is_some_and(|u| touched.contains(&u)))
                    || taken.iter().any(|t| within(t, next.field()));
                let repeated = found
                    .iter()
                    .any(|e| e.field() == next.field() && e.reason() == next.reason());
                if !caused && !repeated {
                    found.push(next.clone());
                }
                current = next;
            }
        }
    }
    let mut found: Vec<ConfigFileError> = found
        .into_iter()
        .map(|e| field_range::<T, F>(e, &original, &taken, &document, format, check))
        .collect();
    // File order; an error with no line (none known) last.
    found.sort_by_key(|e| e.line().unwrap_or(usize::MAX));
    let omitted = found.len().saturating_sub(MAX_ERRORS);
    found.truncate(MAX_ERRORS);
    ConfigFileError::all(found, omitted, stopped).unwrap_or_else(ConfigFileError::empty)
}

/// Read `tree` as `T` and check it: its first error, if any.
fn read<T, F>(
    tree: &Value,
    original: &Value,
    document: &Document<'_>,
    format: Format,
    check: &F,
) -> Result<(), ConfigFileError>
where
    T: DeserializeOwned,
    F: Fn(&T) -> Result<(), ConfigFileError>,
{
    let deserializer = ValueDeserializer::<DeserializerError>::new(tree.clone());
    match serde_path_to_error::deserialize::<_, T>(deserializer) {
        Ok(value) => check(&value),
        Err(e) => {
            let path = e.path().to_string();
            // serde's own wording, as the first error has it.
            let message = e.into_inner().into_error::<de::value::Error>().to_string();
            Err(ConfigFileError::at(
                document,
                Some(original),
                format,
                &path,
                &message,
                None,
            ))
        }
    }
}

/// A whole number refused by its type (`min = -3` for a `u32`) is said to
/// be out of the field's own range, not the type's: the field is read
/// again at each end of its type, and the range its own check then names
/// is the one given. The fields `taken` out to find the file's other
/// errors are left out of that reading, so that one of them checked first
/// does not hide the field's own range.
fn field_range<T, F>(
    error: ConfigFileError,
    original: &Value,
    taken: &[String],
    document: &Document<'_>,
    format: Format,
    check: &F,
) -> ConfigFileError
where
    T: DeserializeOwned,
    F: Fn(&T) -> Result<(), ConfigFileError>,
{
    let Some(top) = type_top(error.reason()) else {
        return error;
    };
    let Some(found) = echo(original, error.field()) else {
        return error;
    };
    let mut others = original.clone();
    let mut touched = Vec::new();
    for other in taken.iter().filter(|t| *t != error.field()) {
        take_out(&mut others, other, &mut touched);
    }
    let Some(steps) = resolve(&others, error.field()) else {
        return error;
    };
    for end in [0, top] {
        let mut tree = others.clone();
        if let Some(slot) = node_mut(&mut tree, &steps) {
            *slot = Value::U64(end);
        }
        let Err(at_end) = read::<T, F>(&tree, original, document, format, check) else {
            continue;
        };
        if at_end.field() != error.field() {
            continue;
        }
        if let Some(range) = at_end.config_error() {
            let allowed = range.allowed().to_owned();
            let reason = format!("found {found}, expected {allowed}");
            let invalid = ConfigError::new(error.field().to_owned(), found, allowed);
            return error.with_reason(&reason, invalid);
        }
    }
    error
}

/// Whether `inner` is `outer` or a field inside it.
fn within(inner: &str, outer: &str) -> bool {
    inner
        .strip_prefix(outer)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The largest value of the unsigned type a reason says was expected
/// (`found -3, expected a whole number in [0, 4294967295]`), if the value
/// found is a number.
fn type_top(reason: &str) -> Option<u64> {
    let (found, expected) = reason.strip_prefix("found ")?.split_once(", expected ")?;
    found.parse::<f64>().ok()?;
    let top = expected
        .strip_prefix("a whole number in [0, ")?
        .strip_suffix(']')?;
    top.parse().ok()
}

/// Take the field at fault out of `tree`, so that reading it again meets
/// the next error: the field itself where it is a key of its own (not a
/// policy's name, whose table would then read as another error, and not an
/// array's element, whose taking out would renumber the others), else its
/// limiter's whole table. False if nothing could be taken out.
fn take_out(tree: &mut Value, field: &str, touched: &mut Vec<Vec<Step>>) -> bool {
    let unit = unit(tree, field);
    let alone = resolve(tree, field).filter(|steps| {
        let is_key = matches!(steps.last(), Some(Step::Key(k)) if k != "policy");
        let is_unit = unit.as_ref().is_some_and(|u| u.len() >= steps.len());
        is_key && !is_unit
    });
    if let Some(steps) = alone {
        if remove(tree, &steps) {
            if let Some(unit) = unit {
                if !touched.contains(&unit) {
                    touched.push(unit);
                }
            }
            return true;
        }
    }
    match unit {
        Some(unit) => remove(tree, &unit),
        None => match resolve(tree, field) {
            // A key outside any limiter (`limiter` for `limiters`).
            Some(steps) if !steps.is_empty() => remove(tree, &steps),
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_refusal_names_the_top_of_its_type() {
        assert_eq!(
            type_top("found -3, expected a whole number in [0, 4294967295]"),
            Some(4_294_967_295)
        );
        assert_eq!(type_top("found \"x\", expected a number"), None);
    }

    #[test]
    fn a_field_is_resolved_through_dotted_names_and_taken_out() {
        let mut tree: Value = toml::from_str(
            "[limiters.\"api.example.com\".policy]\npolicy = \"aimd\"\nbackoff = 2.0\n",
        )
        .unwrap();
        let field = "limiters.api.example.com.policy.backoff";
        assert_eq!(echo(&tree, field).as_deref(), Some("2.0"));
        assert_eq!(
            unit(&tree, field),
            Some(vec![
                Step::Key("limiters".to_owned()),
                Step::Key("api.example.com".to_owned())
            ])
        );
        let mut touched = Vec::new();
        assert!(take_out(&mut tree, field, &mut touched));
        assert_eq!(resolve(&tree, field), None);
        assert_eq!(touched.len(), 1);
        // A policy's name takes its limiter's table with it.
        assert!(take_out(
            &mut tree,
            "limiters.api.example.com.policy.policy",
            &mut touched
        ));
        assert_eq!(unit(&tree, field), None);
    }
}
