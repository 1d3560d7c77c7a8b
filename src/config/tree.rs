//! A file as written: its format, the tree of values it parses to, and
//! the steps down that tree to a field named by its dotted path
//! (`limiters.search.policy.members[0].limit`).

use std::collections::BTreeMap;

use serde_value::Value;

/// The two formats a configuration file may be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Toml,
    Json,
}

/// `text` as a tree of values, if it parses.
pub(super) fn written(text: &str, format: Format) -> Option<Value> {
    match format {
        Format::Toml => toml::from_str(text).ok(),
        Format::Json => serde_json::from_str(text).ok(),
    }
}

/// The scalar at `field` of `tree` as a file writes it: a string quoted
/// (`"0s"`), a number or a boolean as it is. `None` for a table, an array
/// or a field not there.
pub(super) fn echo(tree: &Value, field: &str) -> Option<String> {
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

/// One step down a tree: a key of a table, or an element of an array.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Step {
    Key(String),
    Index(usize),
}

/// The steps to `field` (a dotted path, `[i]` for an element) in `tree`,
/// if the tree holds it all. A key may itself hold dots
/// (`limiters.api.example.com`): the longest key the table has is taken.
pub(super) fn resolve(tree: &Value, field: &str) -> Option<Vec<Step>> {
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

pub(super) fn node_mut<'t>(tree: &'t mut Value, steps: &[Step]) -> Option<&'t mut Value> {
    steps.iter().try_fold(tree, |at, step| match (step, at) {
        (Step::Key(k), Value::Map(table)) => table.get_mut(&Value::String(k.clone())),
        (Step::Index(i), Value::Seq(items)) => items.get_mut(*i),
        _ => None,
    })
}

/// Take the key at the end of `steps` out of its table; false if it is not
/// a key of a table that holds it.
pub(super) fn remove(tree: &mut Value, steps: &[Step]) -> bool {
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
pub(super) fn unit(tree: &Value, field: &str) -> Option<Vec<Step>> {
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
