//! Parsing a file: the first error serde meets, named by its path and
//! line and put in this module's words, then every other (see
//! [`gather`]).

use super::file::{ConfigFileError, MAX_FILE_BYTES};
use super::gather;
use super::locate::{line_of, Document};
use super::tree::{written, Format};
use serde::de::DeserializeOwned;

/// Parse `text`; every error of it, in file order (see [`gather`]).
pub(crate) fn parse<T: DeserializeOwned>(text: &str, format: Format) -> Result<T, ConfigFileError> {
    parse_checked(text, format, |_: &T| Ok(()))
}

/// Parse `text` and `check` what it reads; every error of either, in file
/// order (see [`gather`]).
pub(crate) fn parse_checked<T, F>(
    text: &str,
    format: Format,
    check: F,
) -> Result<T, ConfigFileError>
where
    T: DeserializeOwned,
    F: Fn(&T) -> Result<(), ConfigFileError>,
{
    if text.len() > MAX_FILE_BYTES {
        return Err(ConfigFileError::too_large(text.len() as u64));
    }
    let first = match first_error::<T>(text, format) {
        Ok(value) => match check(&value) {
            Ok(()) => return Ok(value),
            Err(e) => e,
        },
        Err(e) => e,
    };
    Err(gather::all(text, format, first, &check))
}

/// Parse `text`, naming the field of the first error by its path.
fn first_error<T: DeserializeOwned>(text: &str, format: Format) -> Result<T, ConfigFileError> {
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
    let document = Document::parse(text, format);
    Err(ConfigFileError::at(
        &document,
        written(text, format).as_ref(),
        format,
        &path,
        &message,
        line,
    ))
}
