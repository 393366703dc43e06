//! What routing works with and decides: a caller's metadata (`UserMetadata`), a theme's fields
//! and a record's view of them (`ThemeFields`, `FieldsView`, `TopicFields`), and the routing result.

use super::RouterMode;
use crate::index::RecordFilter;
use crate::model::Metadata;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the caller knows about the user (request field `user_metadata`); every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserMetadata {
    pub role: Option<String>,
    pub product: Option<String>,
    pub platform: Option<String>,
}

/// The topic metadata fields of a theme; `None` means "any value".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ThemeFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) domain: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) section: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<String>,
}

/// `ThemeFields` borrowed from where they are kept (a theme, a routing hint): what matching reads,
/// without copying strings for every record matched.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FieldsView<'a> {
    pub(crate) domain: Option<&'a str>,
    pub(crate) section: Option<&'a str>,
    pub(crate) platform: Option<&'a str>,
    pub(crate) role: Option<&'a str>,
}

impl FieldsView<'_> {
    /// The fields as an owned `ThemeFields` (a routing result, a filter).
    pub(crate) fn to_fields(self) -> ThemeFields {
        ThemeFields {
            domain: self.domain.map(str::to_string),
            section: self.section.map(str::to_string),
            platform: self.platform.map(str::to_string),
            role: self.role.map(str::to_string),
        }
    }

    /// How many fields are set: the more, the more specific the theme.
    pub(crate) fn specificity(&self) -> usize {
        [self.domain, self.section, self.platform, self.role].iter().filter(|field| field.is_some()).count()
    }

    /// True when every set field equals the record's value (ASCII case-insensitive).
    pub(crate) fn matches(&self, meta: &Metadata) -> bool {
        let equal = |wanted: Option<&str>, actual: &str| {
            wanted.is_none_or(|wanted| wanted.eq_ignore_ascii_case(trimmed(actual)))
        };
        equal(self.domain, &meta.domain)
            && equal(self.section, &meta.section)
            && equal(self.platform, &meta.platform)
            && equal(self.role, &meta.role)
    }
}

impl ThemeFields {
    pub(crate) fn view(&self) -> FieldsView<'_> {
        FieldsView {
            domain: self.domain.as_deref(),
            section: self.section.as_deref(),
            platform: self.platform.as_deref(),
            role: self.role.as_deref(),
        }
    }

    /// True when the record is of another platform than the one this theme sets. A record of
    /// no platform (a page for every product) never conflicts; roles and sections never do (a
    /// role mentioned in a question is not the role asking it).
    pub(crate) fn conflicts(&self, meta: &Metadata) -> bool {
        let actual = trimmed(&meta.platform);
        self.platform.as_deref().is_some_and(|wanted| !actual.is_empty() && !wanted.eq_ignore_ascii_case(actual))
    }

    /// True when every set field equals the record's value (ASCII case-insensitive).
    pub(crate) fn matches(&self, meta: &Metadata) -> bool {
        self.view().matches(meta)
    }

    /// Narrows `filter` to this theme: every set field overwrites the filter's condition.
    pub fn apply_to(&self, filter: &mut RecordFilter) {
        for (wanted, condition) in [
            (&self.domain, &mut filter.domain),
            (&self.section, &mut filter.section),
            (&self.platform, &mut filter.platform),
            (&self.role, &mut filter.role),
        ] {
            if let Some(value) = wanted {
                *condition = Some(value.clone());
            }
        }
    }
}

/// One theme's wanted domain, section, platform and role as topic numbers of one index
/// (`index::features::TopicTable`): `None` any value, `Some(None)` a value no record has,
/// `Some(Some(n))` the value numbered `n`. Matching the `RecordFeatures::topics` of a record of
/// that index then compares four numbers, not four strings.
pub(crate) struct TopicFields([Option<Option<u32>>; 4]);

impl TopicFields {
    pub(crate) fn of(fields: FieldsView<'_>, table: &crate::index::features::TopicTable) -> Self {
        Self(
            [fields.domain, fields.section, fields.platform, fields.role]
                .map(|wanted| wanted.map(|value| table.number(value))),
        )
    }

    /// `FieldsView::matches` on the record's numbers.
    pub(crate) fn matches(&self, topics: &[u32; 4]) -> bool {
        self.0.iter().zip(topics).all(|(wanted, &actual)| wanted.is_none_or(|wanted| wanted == Some(actual)))
    }

    /// `ThemeFields::conflicts`: another platform than the one wanted, when the record has one.
    pub(crate) fn conflicts(&self, topics: &[u32; 4]) -> bool {
        let actual = topics[2];
        self.0[2].is_some_and(|wanted| actual != 0 && wanted != Some(actual))
    }
}

/// A stored metadata value without surrounding blanks. Stored values are normally trimmed: an
/// ASCII non-space at both ends needs no trim.
fn trimmed(value: &str) -> &str {
    let plain = |byte: Option<&u8>| byte.is_some_and(|b| b.is_ascii() && !b.is_ascii_whitespace());
    let bytes = value.as_bytes();
    if plain(bytes.first()) && plain(bytes.last()) {
        value
    } else {
        value.trim()
    }
}

/// The router's answer: the themes, the primary one, and whether to filter or to ask.
///
/// `themes` are ordered by score (best first, ties by priority then id); `primary_theme` is
/// `themes[0]`, or `None` when nothing matched or the two best scores are tied (the soft theme boost
/// then gives every one of the first themes the secondary amount). `hard_filter` is set only at very high confidence and then holds the primary theme's
/// fields; otherwise routing is a soft signal. `mode_used` is the mode that produced the answer
/// (`heuristic` when `llm` failed), and `degradation` says why it differs from the requested mode.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RoutingResult {
    pub themes: Vec<String>,
    pub primary_theme: Option<String>,
    pub scores: BTreeMap<String, f32>,
    pub requires_disambiguation: bool,
    pub mode_used: RouterMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hard_filter: Option<ThemeFields>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degradation: Option<String>,
    /// The themes the question itself (a keyword only one theme lists) or the user's metadata
    /// named (the LLM router: those it is sure of), best first.
    #[serde(skip)]
    pub(crate) named_themes: Vec<String>,
    /// Learned themes ranked by the question's words (no keyword named one): the best one's
    /// probability. `None` when the rules decided.
    #[serde(skip)]
    pub(crate) words_probability: Option<f32>,
}

impl RoutingResult {
    /// No themes, no filter: what mode `none` (or an empty themes list) produces.
    pub(crate) fn empty(mode_used: RouterMode) -> Self {
        Self {
            themes: Vec::new(),
            primary_theme: None,
            scores: BTreeMap::new(),
            requires_disambiguation: false,
            named_themes: Vec::new(),
            words_probability: None,
            mode_used,
            hard_filter: None,
            degradation: None,
        }
    }

    /// True when the best theme was named (`named_themes`); a question that names no theme may
    /// be ambiguous when its hits split.
    pub fn named(&self) -> bool {
        self.themes.first().is_some_and(|best| self.named_themes.contains(best))
    }

    /// `named`, by a keyword or the user's metadata (not by the question's words over learned
    /// themes' pages).
    pub(crate) fn named_by_rules(&self) -> bool {
        self.named() && self.words_probability.is_none()
    }
}
