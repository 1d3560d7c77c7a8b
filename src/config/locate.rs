//! Where a field sits in a configuration file's text: its line, whether the
//! file wrote it at all, the keys of a table, and (for JSON, which serde
//! takes without complaint) a key written twice.
//!
//! A field is a dotted path with `[i]` for array elements
//! (`limiters.search.policy.members[0].limit`), as [`ConfigFileError`]
//! names it.
//!
//! [`ConfigFileError`]: super::ConfigFileError

use std::collections::{HashMap, HashSet};

use toml::de::{DeArray, DeTable, DeValue};

use super::tree::Format;

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

/// A key may itself contain dots (`"api.example.com"`): the longest run
/// of the key segments at the start of `rest`, joined, that `lookup`
/// finds, with how many segments it took.
fn longest_key<T>(
    rest: &[Segment<'_>],
    mut lookup: impl FnMut(&str) -> Option<T>,
) -> Option<(usize, T)> {
    let keys: Vec<&str> = rest
        .iter()
        .map_while(|s| match s {
            Segment::Key(k) => Some(*k),
            Segment::Index(_) => None,
        })
        .collect();
    (1..=keys.len())
        .rev()
        .find_map(|n| lookup(&keys[..n].join(".")).map(|found| (n, found)))
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
                let hit = longest_key(rest, |name| {
                    t.get_key_value(name).map(|(k, v)| (k.span().start, v))
                });
                let Some((n, (at, v))) = hit else { break };
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

/// Every key and array element of a JSON text, with its line; and the
/// first key an object repeats.
///
/// Each key and element is one [`Node`]: its parent, its own name and its
/// line, so the index costs memory linear in the text whatever its depth
/// (a path string per node would cost the depth again for every node: 30 KB
/// of `[` once took 2.75 GB). A field's path is walked from the root when
/// asked for. Nesting deeper than [`MAX_DEPTH`] is not indexed: serde_json
/// refuses it too, and says where.
pub(crate) struct JsonIndex {
    /// In the order written.
    nodes: Vec<Node>,
    /// The first node of each name under each parent (`None`: the root).
    children: HashMap<(Option<usize>, Name), usize>,
    /// The first repeated key: its node and the line of the repeat.
    duplicate: Option<(usize, usize)>,
}

/// How deep a JSON text may nest before the index gives up: serde_json's
/// own recursion limit.
pub(crate) const MAX_DEPTH: usize = 128;

/// A key or an array element of a JSON text.
struct Node {
    parent: Option<usize>,
    name: Name,
    line: usize,
}

/// A node's name within its parent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Name {
    Key(Box<str>),
    Index(usize),
}

enum Frame {
    Object {
        /// The node whose value this object is (`None`: the root).
        node: Option<usize>,
        seen: HashSet<Box<str>>,
        /// The key just read, whose value comes next.
        key: Option<usize>,
    },
    Array {
        node: Option<usize>,
        index: usize,
    },
}

impl JsonIndex {
    /// Index `text`; `None` if it is not well-formed enough to walk (serde
    /// reports why) or nests deeper than [`MAX_DEPTH`].
    fn new(text: &str) -> Option<Self> {
        let mut index = JsonIndex {
            nodes: Vec::new(),
            children: HashMap::new(),
            duplicate: None,
        };
        let mut stack: Vec<Frame> = Vec::new();
        let mut line = 1;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\n' => line += 1,
                '{' | '[' => {
                    if stack.len() >= MAX_DEPTH {
                        return None;
                    }
                    let node = index.value_node(&mut stack, line);
                    stack.push(if c == '{' {
                        Frame::Object {
                            node,
                            seen: HashSet::new(),
                            key: None,
                        }
                    } else {
                        Frame::Array { node, index: 0 }
                    });
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
                        Some(Frame::Object { node, seen, key }) if is_key => {
                            let name: Box<str> = s.into();
                            let repeated = !seen.insert(name.clone());
                            let id = index.push(*node, Name::Key(name), line);
                            if repeated && index.duplicate.is_none() {
                                index.duplicate = Some((id, line));
                            }
                            *key = Some(id);
                        }
                        _ => {
                            index.value_node(&mut stack, line);
                        }
                    }
                }
                c if c.is_whitespace() || c == ':' => {}
                _ => {
                    // A number, `true`, `false` or `null`: one scalar value.
                    index.value_node(&mut stack, line);
                    while chars
                        .peek()
                        .is_some_and(|c| !matches!(c, ',' | '}' | ']') && !c.is_whitespace())
                    {
                        chars.next();
                    }
                }
            }
        }
        Some(index)
    }

    /// A node written at `line` under `parent`.
    fn push(&mut self, parent: Option<usize>, name: Name, line: usize) -> usize {
        let id = self.nodes.len();
        self.children.entry((parent, name.clone())).or_insert(id);
        self.nodes.push(Node { parent, name, line });
        id
    }

    /// The node of the value about to start, where the innermost frame
    /// says: the key just read, or the array's next element.
    fn value_node(&mut self, stack: &mut [Frame], line: usize) -> Option<usize> {
        match stack.last_mut() {
            Some(Frame::Object { key, .. }) => key.take(),
            Some(Frame::Array { node, index }) => {
                let (parent, i) = (*node, *index);
                Some(self.push(parent, Name::Index(i), line))
            }
            None => None,
        }
    }

    /// The deepest node on the way to `field`, and whether it is the whole
    /// of it. A key may itself contain dots (`"api.example.com"`): the
    /// longest run of segments that is a key is taken.
    fn walk(&self, field: &str) -> (Option<usize>, bool) {
        let Some(segments) = segments(field) else {
            return (None, false);
        };
        let mut at: Option<usize> = None;
        let mut rest = &segments[..];
        while let Some(segment) = rest.first() {
            let hit = match segment {
                Segment::Index(i) => self.children.get(&(at, Name::Index(*i))).map(|&id| (1, id)),
                Segment::Key(_) => longest_key(rest, |name| {
                    self.children.get(&(at, Name::Key(name.into()))).copied()
                }),
            };
            let Some((n, id)) = hit else { break };
            rest = &rest[n..];
            at = Some(id);
        }
        (at, rest.is_empty() && !segments.is_empty())
    }

    fn find(&self, field: &str) -> Found {
        let (at, whole) = self.walk(field);
        Found {
            line: at.map(|id| self.nodes[id].line),
            whole: whole && !field.is_empty(),
        }
    }

    fn keys(&self, field: &str) -> Vec<String> {
        let parent = if field.is_empty() {
            None
        } else {
            match self.walk(field) {
                (Some(id), true) => Some(id),
                _ => return Vec::new(),
            }
        };
        self.nodes
            .iter()
            .filter(|n| n.parent == parent)
            .filter_map(|n| match &n.name {
                Name::Key(k) => Some(k.to_string()),
                Name::Index(_) => None,
            })
            .collect()
    }

    /// The first key an object repeats, by its path, and the line of the
    /// repeat.
    pub(crate) fn duplicate(&self) -> Option<(String, usize)> {
        let (id, line) = self.duplicate?;
        Some((self.path(id), line))
    }

    /// The path of node `id`, as a [`ConfigFileError`](super::ConfigFileError)
    /// names a field.
    fn path(&self, id: usize) -> String {
        let mut names = Vec::new();
        let mut at = Some(id);
        while let Some(node) = at.map(|i| &self.nodes[i]) {
            names.push(&node.name);
            at = node.parent;
        }
        let mut path = String::new();
        for name in names.iter().rev() {
            match name {
                Name::Key(k) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                }
                Name::Index(i) => path.push_str(&format!("[{i}]")),
            }
        }
        path
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
        assert_eq!(index.duplicate(), Some(("b.c".to_owned(), 3)));
        let Document::Json(index) =
            Document::parse(r#"{"a": {"c": 1}, "b": {"c": 2}}"#, Format::Json)
        else {
            panic!("parses")
        };
        assert_eq!(index.duplicate(), None, "the same key in two objects");
    }

    #[test]
    fn json_keys_with_dots_and_repeats_inside_arrays_are_named_by_their_path() {
        let text = "{\"limiters\": {\"api.example.com\": {\"policy\":\n {\"members\": [{\"limit\": 1,\n \"limit\": 2}]}}}}";
        let Document::Json(index) = Document::parse(text, Format::Json) else {
            panic!("parses")
        };
        assert_eq!(
            index.duplicate(),
            Some((
                "limiters.api.example.com.policy.members[0].limit".to_owned(),
                3
            ))
        );
        let found = index.find("limiters.api.example.com.policy.members[0].limit");
        assert_eq!(
            found,
            Found {
                line: Some(2),
                whole: true
            }
        );
        assert_eq!(
            index.find("limiters.api.example.com.policy.members[3]"),
            Found {
                line: Some(2),
                whole: false
            }
        );
        assert_eq!(index.keys("limiters"), vec!["api.example.com".to_owned()]);
        // Deeper than serde_json reads: not indexed.
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert!(matches!(
            Document::parse(&deep, Format::Json),
            Document::Unknown
        ));
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
