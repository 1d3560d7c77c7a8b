//! Where a field sits in a configuration file's text: its line, whether the
//! file wrote it at all, the keys of a table, and (for JSON, which serde
//! takes without complaint) a key written twice.
//!
//! A field is a dotted path with `[i]` for array elements
//! (`limiters.search.policy.members[0].limit`), as [`ConfigFileError`]
//! names it.
//!
//! [`ConfigFileError`]: super::ConfigFileError

use std::collections::HashSet;

use toml::de::{DeArray, DeTable, DeValue};

use super::file::Format;

/// A parsed file, kept to answer questions about its fields.
pub(crate) enum Document<'a> {
    Toml(DeTable<'a>, &'a str),
    Json(JsonIndex),
    /// Text that does not parse: nothing is known.
    Unknown,
}

/// What a lookup of a field found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Found {
    /// The line (from 1) of the deepest part of the field the file holds.
    pub(crate) line: Option<usize>,
    /// Whether the file holds the whole field (not only a table above it).
    pub(crate) whole: bool,
}

impl<'a> Document<'a> {
    pub(crate) fn parse(text: &'a str, format: Format) -> Self {
        match format {
            Format::Toml => match DeTable::parse(text) {
                Ok(root) => Document::Toml(root.into_inner(), text),
                Err(_) => Document::Unknown,
            },
            Format::Json => match JsonIndex::new(text) {
                Some(index) => Document::Json(index),
                None => Document::Unknown,
            },
        }
    }

    /// Where `field` is, as far as the file holds it.
    pub(crate) fn find(&self, field: &str) -> Found {
        match self {
            Document::Toml(root, text) => toml_find(root, text, field),
            Document::Json(index) => index.find(field),
            Document::Unknown => Found::default(),
        }
    }

    /// The keys of the table at `field`, in the order written.
    pub(crate) fn keys(&self, field: &str) -> Vec<String> {
        match self {
            Document::Toml(root, _) => {
                // `None` is the root table.
                let mut current: Option<&DeValue<'_>> = None;
                for segment in segments(field).unwrap_or_default() {
                    let next = match (segment, current) {
                        (Segment::Key(k), None) => root.get(k),
                        (Segment::Key(k), Some(DeValue::Table(t))) => t.get(k),
                        (Segment::Index(i), Some(DeValue::Array(a))) => a.get(i),
                        _ => None,
                    };
                    let Some(next) = next else {
                        return Vec::new();
                    };
                    current = Some(next.get_ref());
                }
                let table = match current {
                    None => root,
                    Some(DeValue::Table(t)) => t,
                    Some(_) => return Vec::new(),
                };
                table.keys().map(|k| k.get_ref().to_string()).collect()
            }
            Document::Json(index) => index.keys(field),
            Document::Unknown => Vec::new(),
        }
    }
}

pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[derive(Clone, Copy)]
enum Segment<'f> {
    Key(&'f str),
    Index(usize),
}

fn segments(field: &str) -> Option<Vec<Segment<'_>>> {
    let mut out = Vec::new();
    for part in field.split('.').filter(|p| !p.is_empty()) {
        let (key, indices) = match part.find('[') {
            Some(at) => (&part[..at], &part[at..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Segment::Key(key));
        }
        for index in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            out.push(Segment::Index(index.parse().ok()?));
        }
    }
    Some(out)
}

fn toml_find(root: &DeTable<'_>, text: &str, field: &str) -> Found {
    let Some(segments) = segments(field) else {
        return Found::default();
    };
    let mut table: Option<&DeTable<'_>> = Some(root);
    let mut array: Option<&DeArray<'_>> = None;
    let mut found: Option<usize> = None;
    let mut rest = &segments[..];
    while let Some(segment) = rest.first() {
        let value = match (segment, table, array) {
            (Segment::Index(i), _, Some(items)) => {
                let Some(item) = items.get(*i) else { break };
                rest = &rest[1..];
                found = Some(item.span().start);
                item
            }
            (Segment::Key(_), Some(t), _) => {
                // A key may itself contain dots (`"api.example.com"`): take
                // the longest run of segments that is a key here.
                let keys: Vec<&str> = rest
                    .iter()
                    .map_while(|s| match s {
                        Segment::Key(k) => Some(*k),
                        Segment::Index(_) => None,
                    })
                    .collect();
                let hit = (1..=keys.len()).rev().find_map(|n| {
                    let name = keys[..n].join(".");
                    t.get_key_value(name.as_str())
                        .map(|(k, v)| (n, k.span().start, v))
                });
                let Some((n, at, v)) = hit else { break };
                rest = &rest[n..];
                found = Some(at);
                v
            }
            _ => break,
        };
        match value.get_ref() {
            DeValue::Table(t) => {
                table = Some(t);
                array = None;
            }
            DeValue::Array(a) => {
                table = None;
                array = Some(a);
            }
            _ => {
                table = None;
                array = None;
            }
        }
    }
    Found {
        line: found.map(|at| line_of(text, at)),
        whole: rest.is_empty() && !segments.is_empty(),
    }
}

/// Every key and array element of a JSON text, by path, with its line; and
/// the first key an object repeats.
pub(crate) struct JsonIndex {
    /// `(path, line)`, in the order written.
    entries: Vec<(String, usize)>,
    /// The first repeated key: its path and the line of the repeat.
    duplicate: Option<(String, usize)>,
}

enum Frame {
    Object {
        path: String,
        seen: HashSet<String>,
        key: Option<String>,
    },
    Array {
        path: String,
        index: usize,
    },
}

impl JsonIndex {
    /// Index `text`; `None` if it is not well-formed enough to walk (serde
    /// reports why).
    fn new(text: &str) -> Option<Self> {
        let mut entries = Vec::new();
        let mut duplicate = None;
        let mut stack: Vec<Frame> = Vec::new();
        let mut line = 1;
        let mut chars = text.chars().peekable();
        // The path of the value about to start, where a frame says.
        let value_path =
            |stack: &mut Vec<Frame>, entries: &mut Vec<(String, usize)>, line| match stack
                .last_mut()
            {
                Some(Frame::Object { path, key, .. }) => {
                    key.take().map(|k| join_key(path, &k)).unwrap_or_default()
                }
                Some(Frame::Array { path, index }) => {
                    let p = format!("{path}[{index}]");
                    entries.push((p.clone(), line));
                    p
                }
                None => String::new(),
            };
        while let Some(c) = chars.next() {
            match c {
                '\n' => line += 1,
                '{' => {
                    let path = value_path(&mut stack, &mut entries, line);
                    stack.push(Frame::Object {
                        path,
                        seen: HashSet::new(),
                        key: None,
                    });
                }
                '[' => {
                    let path = value_path(&mut stack, &mut entries, line);
                    stack.push(Frame::Array { path, index: 0 });
                }
                '}' | ']' => {
                    stack.pop()?;
                }
                ',' => {
                    if let Some(Frame::Array { index, .. }) = stack.last_mut() {
                        *index += 1;
                    }
                }
                '"' => {
                    let mut s = String::new();
                    loop {
                        match chars.next()? {
                            '"' => break,
                            '\\' => match chars.next()? {
                                'n' => s.push('\n'),
                                't' => s.push('\t'),
                                'u' => {
                                    let hex: String = (0..4).filter_map(|_| chars.next()).collect();
                                    let code = u32::from_str_radix(&hex, 16).ok()?;
                                    s.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                                }
                                other => s.push(other),
                            },
                            '\n' => {
                                line += 1;
                                s.push('\n');
                            }
                            other => s.push(other),
                        }
                    }
                    // A key is a string followed by a colon.
                    while chars.peek().is_some_and(|c| c.is_whitespace()) {
                        if chars.next() == Some('\n') {
                            line += 1;
                        }
                    }
                    let is_key = chars.peek() == Some(&':');
                    match stack.last_mut() {
                        Some(Frame::Object { path, seen, key }) if is_key => {
                            let full = join_key(path, &s);
                            if !seen.insert(s.clone()) && duplicate.is_none() {
                                duplicate = Some((full.clone(), line));
                            }
                            entries.push((full, line));
                            *key = Some(s);
                        }
                        _ => {
                            value_path(&mut stack, &mut entries, line);
                        }
                    }
                }
                c if c.is_whitespace() || c == ':' => {}
                _ => {
                    // A number, `true`, `false` or `null`: one scalar value.
                    value_path(&mut stack, &mut entries, line);
                    while chars
                        .peek()
                        .is_some_and(|c| !matches!(c, ',' | '}' | ']') && !c.is_whitespace())
                    {
                        chars.next();
                    }
                }
            }
        }
        Some(JsonIndex { entries, duplicate })
    }

    fn find(&self, field: &str) -> Found {
        let mut probe = field.to_owned();
        let mut whole = true;
        loop {
            if let Some((_, line)) = self.entries.iter().find(|(p, _)| *p == probe) {
                return Found {
                    line: Some(*line),
                    whole: whole && !field.is_empty(),
                };
            }
            whole = false;
            match probe.rfind(['.', '[']) {
                Some(at) => probe.truncate(at),
                None => return Found::default(),
            }
        }
    }

    fn keys(&self, field: &str) -> Vec<String> {
        let prefix = if field.is_empty() {
            String::new()
        } else {
            format!("{field}.")
        };
        self.entries
            .iter()
            .filter_map(|(p, _)| p.strip_prefix(&prefix))
            .filter(|rest| !rest.contains(['.', '[']))
            .map(str::to_owned)
            .collect()
    }

    /// The first key an object repeats, and the line of the repeat.
    pub(crate) fn duplicate(&self) -> Option<&(String, usize)> {
        self.duplicate.as_ref()
    }
}

fn join_key(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = r#"{
  "limiters": {
    "search": {
      "policy": {
        "policy": "stack",
        "members": [
          { "policy": "fixed", "limit": 3 },
          { "policy": "aimd",
            "backoff": 0.5 }
        ]
      }
    }
  }
}"#;

    #[test]
    fn json_fields_have_lines() {
        let doc = Document::parse(JSON, Format::Json);
        let at = |f: &str| doc.find(f);
        assert_eq!(
            at("limiters.search.policy.members[1].backoff").line,
            Some(9)
        );
        assert!(at("limiters.search.policy.members[1].backoff").whole);
        assert_eq!(at("limiters.search.policy.members[0].limit").line, Some(7));
        // Not written: the deepest part that is.
        let max = at("limiters.search.policy.members[1].max");
        assert_eq!(
            max,
            Found {
                line: Some(8),
                whole: false
            }
        );
        assert_eq!(
            doc.keys("limiters.search.policy"),
            vec!["policy".to_owned(), "members".to_owned()]
        );
    }

    #[test]
    fn json_duplicate_keys_are_found_with_their_line() {
        let Document::Json(index) =
            Document::parse("{\"a\": 1,\n \"b\": {\"c\": 1,\n \"c\": 2}}", Format::Json)
        else {
            panic!("parses")
        };
        assert_eq!(index.duplicate(), Some(&("b.c".to_owned(), 3)));
        let Document::Json(index) =
            Document::parse(r#"{"a": {"c": 1}, "b": {"c": 2}}"#, Format::Json)
        else {
            panic!("parses")
        };
        assert_eq!(index.duplicate(), None, "the same key in two objects");
    }

    #[test]
    fn toml_fields_have_lines_and_say_if_written() {
        let text = "[limiters.a.policy]\npolicy = \"breaker\"\nwindow.count = { calls = 0 }\n";
        let doc = Document::parse(text, Format::Toml);
        let calls = doc.find("limiters.a.policy.window.count.calls");
        assert_eq!(
            calls,
            Found {
                line: Some(3),
                whole: true
            }
        );
        let max = doc.find("limiters.a.policy.max");
        assert_eq!(
            max,
            Found {
                line: Some(1),
                whole: false
            }
        );
        assert_eq!(
            doc.keys("limiters.a.policy.window"),
            vec!["count".to_owned()]
        );
    }
}
