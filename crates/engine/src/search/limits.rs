//! The limits of a request's fields, shared by the checks (`validate.rs`), the OpenAPI document
//! (`schema.rs`) and the service's other inputs: ids, tags, the tenant id, blank text.

use super::error::{Result, SearchError};

pub(crate) use crate::model::MAX_TENANT_ID_CHARS;
/// Longest accepted id list in a filter: each list the caller sends, and their union.
pub const MAX_ID_LIST: usize = 1000;
/// Longest accepted id (doc, section or chunk id), in characters.
pub(crate) const MAX_ID_CHARS: usize = 1024;
/// Most tags in `filters.tags`, and the longest tag (also `product`, `version`) in characters.
pub(crate) const MAX_TAGS: usize = 100;
pub const MAX_TAG_CHARS: usize = 200;

pub fn validate_tenant(tenant_id: &str) -> Result<()> {
    crate::model::validate_tenant_id(tenant_id).map_err(|message| SearchError::invalid("tenant_id", message))
}

/// Longest accepted `trace_id`, in characters.
pub(crate) const MAX_TRACE_ID_CHARS: usize = 256;

/// The characters that alone make a text blank: whitespace, control characters and invisible
/// format characters (zero-width spaces and joiners, direction marks, soft hyphens, variation
/// selectors, BOM, tag characters). [`is_blank`] and the OpenAPI document's `query` pattern
/// (`schema::query`) both read this table.
pub(crate) const BLANK_CHARS: [std::ops::RangeInclusive<char>; 18] = [
    '\u{0}'..='\u{20}',
    '\u{7F}'..='\u{A0}',
    '\u{AD}'..='\u{AD}',
    '\u{34F}'..='\u{34F}',
    '\u{61C}'..='\u{61C}',
    '\u{115F}'..='\u{1160}',
    '\u{1680}'..='\u{1680}',
    '\u{17B4}'..='\u{17B5}',
    '\u{180B}'..='\u{180F}',
    '\u{2000}'..='\u{200F}',
    '\u{2028}'..='\u{202F}',
    '\u{205F}'..='\u{206F}',
    '\u{3000}'..='\u{3000}',
    '\u{3164}'..='\u{3164}',
    '\u{FE00}'..='\u{FE0F}',
    '\u{FEFF}'..='\u{FEFF}',
    '\u{FFA0}'..='\u{FFA0}',
    '\u{E0000}'..='\u{E007F}',
];

/// Whether a text has nothing but [`BLANK_CHARS`].
pub fn is_blank(text: &str) -> bool {
    text.chars().all(is_blank_char)
}

/// Whether `c` is one of [`BLANK_CHARS`].
pub fn is_blank_char(c: char) -> bool {
    BLANK_CHARS.iter().any(|range| range.contains(&c))
}

/// Rejects a string longer than `max` characters without counting past the limit.
pub(crate) fn check_chars(field: &str, what: &str, value: &str, max: usize) -> Result<()> {
    if value.chars().nth(max).is_some() {
        return Err(SearchError::invalid(field, format!("{what} must be at most {max} characters")));
    }
    Ok(())
}

/// Checks an id (doc, section or chunk id) from a request: non-empty, at most `MAX_ID_CHARS`.
pub(crate) fn validate_id(field: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(SearchError::invalid(field, "must not be empty"));
    }
    check_chars(field, "an id", value, MAX_ID_CHARS)
}
