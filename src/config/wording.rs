//! An error's words: serde's wording put in ours (the value as written,
//! what is allowed), and names and values a hostile file could make huge
//! cut to a bounded length.

use super::locate::Document;

/// The most bytes of one name or value an error repeats: a longer one is
/// shown by its start and its length, so a hostile file cannot make an
/// error as large as itself.
const ECHO: usize = 64;

/// `s`, or its start and its length if it is longer than [`ECHO`].
pub(super) fn shorten(s: &str) -> String {
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
pub(super) fn clip(text: &str) -> String {
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
pub(super) fn clip_field(field: &str) -> String {
    if field.len() <= ECHO {
        return field.to_owned();
    }
    field.split('.').map(shorten).collect::<Vec<_>>().join(".")
}

/// serde's wording, in ours: `found <the value as written>, expected <what
/// is allowed>`.
pub(super) fn explain(reason: &str, document: &Document<'_>, field: &str) -> String {
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

/// An error found inside a buffered policy table, as a message that keeps
/// its path (and, for a value out of range, what was found and what is
/// allowed) so that the file loader can put it after the table's own path.
/// The parts are separated by a control character no file can put in a
/// field name.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Mark<'a> {
    pub(super) path: &'a str,
    pub(super) reason: &'a str,
    pub(super) range: Option<(&'a str, &'a str)>,
}

const SEPARATOR: char = '\u{1f}';

impl<'a> Mark<'a> {
    pub(super) fn new(path: &'a str, reason: &'a str) -> Self {
        Mark {
            path,
            reason,
            range: None,
        }
    }

    pub(super) fn with_range(mut self, found: &'a str, allowed: &'a str) -> Self {
        self.range = Some((found, allowed));
        self
    }

    /// The mark in `message`, if it is one.
    pub(super) fn read(message: &'a str) -> Option<Self> {
        let mut parts = message.strip_prefix(SEPARATOR)?.split(SEPARATOR);
        let path = parts.next()?;
        let reason = parts.next()?;
        let range = parts.next().zip(parts.next());
        Some(Mark {
            path,
            reason,
            range,
        })
    }
}

impl std::fmt::Display for Mark<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SEPARATOR}{}{SEPARATOR}{}", self.path, self.reason)?;
        if let Some((found, allowed)) = self.range {
            write!(f, "{SEPARATOR}{found}{SEPARATOR}{allowed}")?;
        }
        Ok(())
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
