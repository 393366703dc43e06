//! The OpenAPI schemas of request fields whose rules are the validation's constants, for
//! `#[schema(schema_with = …)]` on the request types (utoipa's own validation attributes take
//! only literals): the document states each rule from the constant or character table the
//! validation checks, so the two cannot drift apart. A JSON Schema `pattern` cannot portably name
//! characters beyond U+FFFF, so a character class built here leaves those ranges out (the schema
//! is then a little more permissive than the validation, never less).

use super::limits::{
    BLANK_CHARS, MAX_ID_CHARS, MAX_ID_LIST, MAX_TAGS, MAX_TAG_CHARS, MAX_TENANT_ID_CHARS, MAX_TRACE_ID_CHARS,
};
use std::ops::RangeInclusive;
use utoipa::openapi::schema::{
    Array, ArrayBuilder, KnownFormat, Object, ObjectBuilder, SchemaFormat, SchemaType, Type,
};

/// `char::is_whitespace` (Unicode White_Space) as ranges: what `str::trim` removes.
pub(crate) const WHITESPACE_CHARS: [RangeInclusive<char>; 10] = [
    '\t'..='\r',
    ' '..=' ',
    '\u{85}'..='\u{85}',
    '\u{A0}'..='\u{A0}',
    '\u{1680}'..='\u{1680}',
    '\u{2000}'..='\u{200A}',
    '\u{2028}'..='\u{2029}',
    '\u{202F}'..='\u{202F}',
    '\u{205F}'..='\u{205F}',
    '\u{3000}'..='\u{3000}',
];

/// A pattern matching a text that holds one character outside `chars` (ranges beyond U+FFFF are
/// left out: see the module docs).
pub(crate) fn not_only(chars: &[RangeInclusive<char>]) -> String {
    let mut class = String::from("[^");
    for range in chars.iter().filter(|range| u32::from(*range.end()) <= 0xFFFF) {
        class.push_str(&format!("\\u{:04x}", u32::from(*range.start())));
        if range.start() != range.end() {
            class.push_str(&format!("-\\u{:04x}", u32::from(*range.end())));
        }
    }
    class.push(']');
    class
}

/// `model::validate_tenant_id`'s rule as a pattern.
pub fn tenant_id_pattern() -> String {
    format!("^[A-Za-z0-9._-]{{1,{MAX_TENANT_ID_CHARS}}}$")
}

fn string(nullable: bool) -> ObjectBuilder {
    let schema_type =
        if nullable { SchemaType::from_iter([Type::String, Type::Null]) } else { SchemaType::Type(Type::String) };
    ObjectBuilder::new().schema_type(schema_type)
}

/// A tenant id (`model::validate_tenant_id`).
pub fn tenant_id() -> Object {
    string(false).pattern(Some(tenant_id_pattern())).build()
}

/// A query: not blank as `is_blank` counts it. Its length limit is this deployment's
/// (`RETR_MAX_QUERY_CHARS`), added to the served document.
pub fn query() -> Object {
    string(false).min_length(Some(1)).pattern(Some(not_only(&BLANK_CHARS))).build()
}

/// An id that must not be empty or whitespace (`str::trim`), at most `MAX_ID_CHARS` characters.
pub fn id() -> Object {
    string(false).min_length(Some(1)).max_length(Some(MAX_ID_CHARS)).pattern(Some(not_only(&WHITESPACE_CHARS))).build()
}

/// `doc_ids` / `section_ids` (`search::id_list`): at most `MAX_ID_LIST` non-empty ids of at most
/// `MAX_ID_CHARS` characters; `null` is absent.
pub(crate) fn id_list() -> Array {
    let id = string(false).min_length(Some(1)).max_length(Some(MAX_ID_CHARS));
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(id)
        .max_items(Some(MAX_ID_LIST))
        .build()
}

/// `filters.tags` (`search::tag_list`): at most `MAX_TAGS` tags of at most `MAX_TAG_CHARS`.
pub(crate) fn tags() -> Array {
    ArrayBuilder::new().items(string(false).max_length(Some(MAX_TAG_CHARS))).max_items(Some(MAX_TAGS)).build()
}

/// `filters.product` / `filters.version`: at most `MAX_TAG_CHARS` characters; `null` is absent.
pub(crate) fn tag_value() -> Object {
    string(true).max_length(Some(MAX_TAG_CHARS)).build()
}

/// `trace_id`: at most `MAX_TRACE_ID_CHARS` characters; `null` is absent.
pub(crate) fn trace_id() -> Object {
    string(true).max_length(Some(MAX_TRACE_ID_CHARS)).build()
}

/// `query_embedding`: numbers an `f32` holds; `null` is absent. Its length is the index's
/// dimension, added to the served document.
pub(crate) fn query_embedding() -> Array {
    let component = ObjectBuilder::new()
        .schema_type(Type::Number)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Float)))
        .minimum(Some(-f64::from(f32::MAX)))
        .maximum(Some(f64::from(f32::MAX)));
    ArrayBuilder::new().schema_type(SchemaType::from_iter([Type::Array, Type::Null])).items(component).build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(chars: &[RangeInclusive<char>], c: char) -> bool {
        chars.iter().any(|range| range.contains(&c))
    }

    #[test]
    fn the_whitespace_table_is_rusts() {
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(within(&WHITESPACE_CHARS, c), c.is_whitespace(), "{:04x}", u32::from(c));
        }
    }

    #[test]
    fn the_blank_table_is_whitespace_controls_and_invisible_format_characters() {
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let invisible = matches!(c,
                '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
                | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
                | '\u{E0000}'..='\u{E007F}');
            let blank = c.is_whitespace() || c.is_control() || invisible;
            assert_eq!(within(&BLANK_CHARS, c), blank, "{:04x}", u32::from(c));
        }
    }

    /// utoipa's `minimum`/`maximum` take literals: each is the constant the validation checks.
    #[test]
    fn the_types_literal_limits_are_the_constants() {
        use crate::search::settings::{RuntimeSettings, MAX_RESULTS_CAP, MAX_TOPK_PER_DOC, MAX_TOP_K};
        use crate::search::SearchRequest;
        use utoipa::PartialSchema;
        let runtime = serde_json::to_value(RuntimeSettings::schema()).unwrap();
        for (field, low, high) in [
            ("max_results", 1, MAX_RESULTS_CAP),
            ("doc_top_k", 1, MAX_TOP_K),
            ("section_top_k", 1, MAX_TOP_K),
            ("chunk_top_k", 1, MAX_TOP_K),
            ("topk_per_doc", 1, MAX_TOPK_PER_DOC),
            ("min_docs", 0, MAX_TOP_K),
            ("rerank_top_n", 1, MAX_TOP_K),
        ] {
            let property = &runtime["properties"][field];
            assert_eq!((&property["minimum"], &property["maximum"]), (&low.into(), &high.into()), "{field}");
        }
        let search = serde_json::to_value(SearchRequest::schema()).unwrap();
        for (field, high) in
            [("doc_top_k", MAX_TOP_K), ("section_top_k", MAX_TOP_K), ("topk_per_doc", MAX_TOPK_PER_DOC)]
        {
            let property = &search["properties"][field];
            assert_eq!((&property["minimum"], &property["maximum"]), (&1.into(), &high.into()), "{field}");
        }
        assert_eq!(search["properties"]["max_results"]["maximum"], i64::MAX);
    }

    #[test]
    fn a_class_names_every_range_up_to_u_ffff() {
        assert_eq!(not_only(&['\t'..='\r', ' '..=' ', '\u{E0000}'..='\u{E007F}']), "[^\\u0009-\\u000d\\u0020]");
        assert!(not_only(&BLANK_CHARS).contains("\\u3164"));
    }
}
