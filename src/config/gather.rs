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

use std::collections::BTreeMap;

use serde::de::{self, DeserializeOwned};
use serde_value::{DeserializerError, Value, ValueDeserializer};

use super::file::{ConfigFileError, Format};
use super::locate::Document;
use crate::algorithms::ConfigError;

/// The most errors a [`ConfigFileError`] carries; it says how many more it
/// found.
pub const MAX_ERRORS: usize = 20;

/// The most times a file is read again to find its next error.
const MAX_ROUNDS: usize = 3 * MAX_ERRORS;

/// The most bytes of text the rounds read in all: a file of 1 MiB is read
/// again at most 8 times (about a second, unoptimized).
const READ_BUDGET: usize = 8 << 20;

/// `text` as a tree of values, if it parses.
pub(crate) fn written(text: &str, format: Format) -> Option<Value> {
    match format {
        Format::Toml => toml::from_str(text).ok(),
        Format::Json => serde_json::from_str(text).ok(),
    }
}

/// The scalar at `field` of `tree` as a file writes it: a string quoted
/// (`"0s"`), a number or a boolean as it is. `None` for a table, an array
/// or a field not there.
pub(crate) fn echo(tree: &Value, field: &str) -> Option<String> {
    let steps = resolve(tree, field)?;
    Some(match node(tree, &steps)? {
        Value::String(s) => format!("{s:?}"),
        Value::Bool(b) => b.to_string(),
        Value::U8(n) => n.to_string(),
        Value::U16(n) => n.to_string(),
        Value::U32(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::I8(n) => n.to_string(),
        Value::I16(n) => n.to_string(),
        Value::I32(n) => n.to_string(),
        Value::I64(n) => n.to_string(),
        Value::F32(n) => format!("{n:?}"),
        Value::F64(n) => format!("{n:?}"),
        _ => return None,
    })
}

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

/// One step down a tree: a key of a table, or an element of an array.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The steps to `field` (a dotted path, `[i]` for an element) in `tree`,
/// if the tree holds it all. A key may itself hold dots
/// (`limiters.api.example.com`): the longest key the table has is taken.
fn resolve(tree: &Value, field: &str) -> Option<Vec<Step>> {
    let mut parts: Vec<Step> = Vec::new();
    for part in field.split('.').filter(|p| !p.is_empty()) {
        let (key, indices) = part.find('[').map_or((part, ""), |at| part.split_at(at));
        if !key.is_empty() {
            parts.push(Step::Key(key.to_owned()));
        }
        for index in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            parts.push(Step::Index(index.parse().ok()?));
        }
    }
    let mut steps = Vec::new();
    let mut at = tree;
    let mut rest = &parts[..];
    while let Some(first) = rest.first() {
        match (first, at) {
            (Step::Index(i), Value::Seq(items)) => {
                at = items.get(*i)?;
                steps.push(Step::Index(*i));
                rest = &rest[1..];
            }
            (Step::Key(_), Value::Map(table)) => {
                let keys: Vec<&str> = rest
                    .iter()
                    .map_while(|s| match s {
                        Step::Key(k) => Some(k.as_str()),
                        Step::Index(_) => None,
                    })
                    .collect();
                let (n, key, value) = (1..=keys.len()).rev().find_map(|n| {
                    let key = keys[..n].join(".");
                    table.get(&Value::String(key.clone())).map(|v| (n, key, v))
                })?;
                at = value;
                steps.push(Step::Key(key));
                rest = &rest[n..];
            }
            _ => return None,
        }
    }
    Some(steps)
}

fn node<'t>(tree: &'t Value, steps: &[Step]) -> Option<&'t Value> {
    steps.iter().try_fold(tree, |at, step| match (step, at) {
        (Step::Key(k), Value::Map(table)) => table.get(&Value::String(k.clone())),
        (Step::Index(i), Value::Seq(items)) => items.get(*i),
        _ => None,
    })
}

fn node_mut<'t>(tree: &'t mut Value, steps: &[Step]) -> Option<&'t mut Value> {
    steps.iter().try_fold(tree, |at, step| match (step, at) {
        (Step::Key(k), Value::Map(table)) => table.get_mut(&Value::String(k.clone())),
        (Step::Index(i), Value::Seq(items)) => items.get_mut(*i),
        _ => None,
    })
}

/// Take the key at the end of `steps` out of its table; false if it is not
/// a key of a table that holds it.
fn remove(tree: &mut Value, steps: &[Step]) -> bool {
    let Some((Step::Key(key), parent)) = steps.split_last() else {
        return false;
    };
    match node_mut(tree, parent) {
        Some(Value::Map(table)) => table.remove(&Value::String(key.clone())).is_some(),
        _ => false,
    }
}

/// The limiter table `field` is in (`limiters.<name>` or `default`), as
/// steps, if `tree` holds it.
fn unit(tree: &Value, field: &str) -> Option<Vec<Step>> {
    let Value::Map(root) = tree else {
        return None;
    };
    let (head, rest) = field.split_once('.').unwrap_or((field, ""));
    match head {
        "default" => root
            .contains_key(&Value::String("default".to_owned()))
            .then(|| vec![Step::Key("default".to_owned())]),
        "limiters" => {
            let limiters = match root.get(&Value::String("limiters".to_owned())) {
                Some(Value::Map(limiters)) => limiters,
                _ => return None,
            };
            let name = longest_name(limiters, rest)?;
            Some(vec![Step::Key("limiters".to_owned()), Step::Key(name)])
        }
        _ => None,
    }
}

/// The longest dotted start of `rest` that `table` has as a key.
fn longest_name(table: &BTreeMap<Value, Value>, rest: &str) -> Option<String> {
    let parts: Vec<&str> = rest.split('.').collect();
    (1..=parts.len()).rev().find_map(|n| {
        let name = parts[..n].join(".");
        let name = name.split('[').next().unwrap_or_default().to_owned();
        table
            .contains_key(&Value::String(name.clone()))
            .then_some(name)
    })
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
