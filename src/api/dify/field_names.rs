//! The metadata field names a Dify condition or a knowledge base's filter may use: ours (the
//! index's `Field`s) and Dify's built-in ones, with the field each means here. The condition
//! compiler (`condition.rs`) and the knowledge bases file (`knowledge.rs`) both read them; this
//! file imports no HTTP type, so `AppState`, which holds the knowledge bases, depends on no handler.

use retrieval_engine::condition::Field;

/// Dify's built-in metadata names and the field each means here (`None`: no counterpart).
const DIFY_NAMES: [(&str, Option<Field>); 4] = [
    ("document_name", Some(Field::Title)),
    ("upload_date", Some(Field::IndexedAt)),
    ("last_update_date", Some(Field::IndexedAt)),
    ("uploader", None),
];

/// Longest metadata field name, in characters: Dify's own limit on a metadata name.
pub(super) const MAX_NAME_CHARS: usize = 255;

/// What a condition's name refers to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Target {
    Field(Field),
    /// A field no record has: Dify's `uploader`, or a metadata field a Dify user defined.
    Absent,
}

/// The field `name` means; a name that is none of ours is a field no record has. `Err`: not a
/// field name at all.
pub(super) fn target(name: &str) -> Result<Target, String> {
    if let Some((_, field)) = DIFY_NAMES.iter().find(|(dify, _)| *dify == name) {
        return Ok(field.map_or(Target::Absent, Target::Field));
    }
    if let Some(field) = Field::parse(name) {
        return Ok(Target::Field(field));
    }
    if name.is_empty() || name.chars().nth(MAX_NAME_CHARS).is_some() || name.chars().any(char::is_control) {
        return Err(format!(
            "name: a metadata field name is 1 to {MAX_NAME_CHARS} characters without control characters"
        ));
    }
    Ok(Target::Absent)
}

/// Every name of a field the records have (and Dify's names of them; `None`: no record has it).
pub(super) fn all_names() -> impl Iterator<Item = (&'static str, Option<Field>)> {
    Field::ALL.into_iter().map(|field| (field.name(), Some(field))).chain(DIFY_NAMES)
}

pub(super) fn is_date(field: Option<Field>) -> bool {
    field == Some(Field::IndexedAt)
}

/// The names the numeric comparisons apply to (every scalar field but the date).
pub(super) fn number_names() -> Vec<&'static str> {
    all_names().filter(|(_, field)| !matches!(field, Some(Field::Tags | Field::IndexedAt))).map(|(n, _)| n).collect()
}

pub(super) fn unknown_field(name: &str) -> String {
    let names: Vec<&str> = all_names().map(|(name, _)| name).collect();
    format!("unsupported metadata field {name:?}; the fields are {}", names.join(", "))
}
