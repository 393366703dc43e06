//! Metadata conditions: clauses over a record's topic and location fields, joined by AND or OR
//! and nested. They narrow a `RecordFilter` beyond its equality filters (the Dify External
//! Knowledge API's `metadata_condition` and a knowledge base's fixed filter compile to one), and
//! they are checked on the replica, record by record, like every other filter: a condition never
//! widens a search.

use crate::model::Metadata;
use std::cmp::Ordering;

/// A record field a condition may test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Product,
    Version,
    Tags,
    Domain,
    Section,
    Platform,
    Role,
    PageType,
    Source,
    Url,
    DocId,
    /// The page's title (Dify's built-in `document_name`).
    Title,
    /// When the record was indexed (RFC 3339): the one date field (`before` / `after`).
    IndexedAt,
}

impl Field {
    pub const ALL: [Field; 13] = [
        Field::Product,
        Field::Version,
        Field::Tags,
        Field::Domain,
        Field::Section,
        Field::Platform,
        Field::Role,
        Field::PageType,
        Field::Source,
        Field::Url,
        Field::DocId,
        Field::Title,
        Field::IndexedAt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Field::Product => "product",
            Field::Version => "version",
            Field::Tags => "tags",
            Field::Domain => "domain",
            Field::Section => "section",
            Field::Platform => "platform",
            Field::Role => "role",
            Field::PageType => "page_type",
            Field::Source => "source",
            Field::Url => "url",
            Field::DocId => "doc_id",
            Field::Title => "title",
            Field::IndexedAt => "indexed_at",
        }
    }

    pub fn parse(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|field| field.name() == name)
    }

    /// The field's values on `meta`: one for a scalar field, the tags for `tags`.
    fn values(self, meta: &Metadata) -> Values<'_> {
        let scalar = match self {
            Field::Tags => return Values::Many(&meta.tags),
            Field::Product => meta.product.as_str(),
            Field::Version => &meta.version,
            Field::Domain => &meta.domain,
            Field::Section => &meta.section,
            Field::Platform => &meta.platform,
            Field::Role => &meta.role,
            Field::PageType => &meta.page_type,
            Field::Source => &meta.source,
            Field::Url => &meta.url,
            Field::DocId => &meta.doc_id,
            Field::Title => &meta.title,
            Field::IndexedAt => &meta.indexed_at,
        };
        Values::One(scalar)
    }
}

enum Values<'a> {
    One(&'a str),
    Many(&'a [String]),
}

/// How a numeric comparison orders two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Equal,
    NotEqual,
    Greater,
    Less,
    GreaterOrEqual,
    LessOrEqual,
}

impl Comparison {
    fn holds(self, ordering: Ordering) -> bool {
        match self {
            Comparison::Equal => ordering == Ordering::Equal,
            Comparison::NotEqual => ordering != Ordering::Equal,
            Comparison::Greater => ordering == Ordering::Greater,
            Comparison::Less => ordering == Ordering::Less,
            Comparison::GreaterOrEqual => ordering != Ordering::Less,
            Comparison::LessOrEqual => ordering != Ordering::Greater,
        }
    }
}

/// A number as the records hold it: a version (`7.15.2`, compared part by part, so `7.10` > `7.9`)
/// on the `version` field, a decimal number elsewhere.
#[derive(Debug, Clone, PartialEq)]
pub enum Number {
    Version(Vec<u64>),
    Decimal(f64),
}

impl Number {
    /// `text` read the way `field` compares: a version on `version` (else a decimal), a decimal
    /// elsewhere (else a version); `None` when it is neither.
    pub fn parse(field: Field, text: &str) -> Option<Number> {
        let text = text.trim();
        let version = || {
            let digits = text.strip_prefix(['v', 'V']).unwrap_or(text);
            let parts: Option<Vec<u64>> = digits.split('.').map(|part| part.parse().ok()).collect();
            parts.filter(|parts| !parts.is_empty()).map(Number::Version)
        };
        let decimal = || text.parse::<f64>().ok().filter(|n| n.is_finite()).map(Number::Decimal);
        if field == Field::Version {
            version().or_else(decimal)
        } else {
            decimal().or_else(version)
        }
    }

    /// A version or a number as a condition may write it: `[vV]?d+(.d+)*`, at most 18 digits a
    /// part (so that every part fits). `parse` reads every such text.
    pub fn is_version_text(text: &str) -> bool {
        let digits = text.strip_prefix(['v', 'V']).unwrap_or(text);
        digits.split('.').all(|part| (1..=18).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit()))
    }

    /// A JSON number as a condition on `field`: a version when it reads as one there (`7.5`), a
    /// decimal otherwise (which no version equals or orders against: such a clause matches nothing).
    pub fn of_json(field: Field, number: &serde_json::Number) -> Number {
        Number::parse(field, &number.to_string())
            .unwrap_or_else(|| Number::Decimal(number.as_f64().unwrap_or(f64::NAN)))
    }

    fn compare(&self, other: &Number) -> Option<Ordering> {
        match (self, other) {
            (Number::Version(a), Number::Version(b)) => {
                let length = a.len().max(b.len());
                let part = |parts: &Vec<u64>, i: usize| parts.get(i).copied().unwrap_or(0);
                Some((0..length).map(|i| part(a, i).cmp(&part(b, i))).find(|o| o.is_ne()).unwrap_or(Ordering::Equal))
            }
            (Number::Decimal(a), Number::Decimal(b)) => a.partial_cmp(b),
            _ => None,
        }
    }
}

/// What a clause checks of a field. Text needles of the `contains` family are lower-case
/// (those tests ignore case); `is` and `in` compare exactly.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    Contains(String),
    NotContains(String),
    StartsWith(String),
    EndsWith(String),
    Is(String),
    IsNot(String),
    In(ValueList),
    NotIn(ValueList),
    Empty,
    NotEmpty,
    Compare(Comparison, Number),
    /// Strictly before / after an instant, in Unix seconds.
    Before(i64),
    After(i64),
}

/// The values of an `in` / `not in` test, in a hash set built once when the condition is read,
/// so a record is checked with one hash and one comparison whatever the list's length (a
/// request's conditions × values × records is the CPU an attacker could ask for; a binary search
/// of a sorted list would still spend most of a search of Dify's 64 lists of 1,000 values in
/// string comparisons). The hasher is the standard library's keyed SipHash: the values come from the
/// caller, and an unkeyed hash would let them collide on purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueList(std::collections::HashSet<String>);

impl ValueList {
    pub fn new(values: Vec<String>) -> Self {
        Self(values.into_iter().collect())
    }

    pub(crate) fn contains(&self, value: &str) -> bool {
        self.0.contains(value)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// How a condition joins its clauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Logic {
    #[default]
    All,
    Any,
}

/// One clause: a test of a field, or a nested condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Clause {
    Field(Field, Test),
    Group(MetadataCondition),
}

/// Clauses joined by `logic`. No clause matches every record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetadataCondition {
    pub logic: Logic,
    pub clauses: Vec<Clause>,
}

impl MetadataCondition {
    pub fn all(clauses: Vec<Clause>) -> Self {
        Self { logic: Logic::All, clauses }
    }

    pub(crate) fn matches(&self, meta: &Metadata) -> bool {
        if self.clauses.is_empty() {
            return true;
        }
        let holds = |clause: &Clause| match clause {
            Clause::Field(field, test) => field_matches(*field, test, meta),
            Clause::Group(group) => group.matches(meta),
        };
        match self.logic {
            Logic::All => self.clauses.iter().all(holds),
            Logic::Any => self.clauses.iter().any(holds),
        }
    }
}

/// A scalar field passes a test on its value; `tags` passes a positive test when some tag does,
/// and a negative one (`not contains`, `is not`, `not in`) when no tag passes its positive twin.
fn field_matches(field: Field, test: &Test, meta: &Metadata) -> bool {
    match field.values(meta) {
        Values::One(value) => value_matches(field, test, value),
        Values::Many(tags) => match test {
            Test::Empty => tags.is_empty(),
            Test::NotEmpty => !tags.is_empty(),
            Test::NotContains(needle) => {
                !tags.iter().any(|tag| value_matches(field, &Test::Contains(needle.clone()), tag))
            }
            Test::IsNot(wanted) => !tags.iter().any(|tag| tag == wanted),
            Test::NotIn(list) => !tags.iter().any(|tag| list.contains(tag)),
            _ => tags.iter().any(|tag| value_matches(field, test, tag)),
        },
    }
}

fn value_matches(field: Field, test: &Test, value: &str) -> bool {
    match test {
        Test::Contains(needle) => value.to_lowercase().contains(needle.as_str()),
        Test::NotContains(needle) => !value.to_lowercase().contains(needle.as_str()),
        Test::StartsWith(needle) => value.to_lowercase().starts_with(needle.as_str()),
        Test::EndsWith(needle) => value.to_lowercase().ends_with(needle.as_str()),
        Test::Is(wanted) => value == wanted,
        Test::IsNot(wanted) => value != wanted,
        Test::In(list) => list.contains(value),
        Test::NotIn(list) => !list.contains(value),
        Test::Empty => value.is_empty(),
        Test::NotEmpty => !value.is_empty(),
        // A record whose field is not a number satisfies no comparison (also not `≠`).
        Test::Compare(comparison, wanted) => Number::parse(field, value)
            .and_then(|number| number.compare(wanted))
            .is_some_and(|ordering| comparison.holds(ordering)),
        Test::Before(instant) => unix_seconds(value).is_some_and(|at| at < *instant),
        Test::After(instant) => unix_seconds(value).is_some_and(|at| at > *instant),
    }
}

/// An instant as Unix seconds: a number of seconds, `YYYY-MM-DD`, or an RFC 3339 date-time
/// (`YYYY-MM-DDTHH:MM[:SS[.fff]]` with `Z`, an offset `±HH:MM`, or none for UTC; a space may stand
/// for the `T`). `None` when `text` is none of these.
pub fn unix_seconds(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return seconds.is_finite().then_some(seconds.floor() as i64);
    }
    let number = |part: &str, digits: usize| -> Option<i64> {
        (part.len() == digits && part.bytes().all(|b| b.is_ascii_digit())).then(|| part.parse().ok()).flatten()
    };
    let (date, time) = match text.find(['T', 't', ' ']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let (year, month, day) = (number(parts.next()?, 4)?, number(parts.next()?, 2)?, number(parts.next()?, 2)?);
    if parts.next().is_some() || !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
        return None;
    }
    let mut seconds = days_from_civil(year, month, day) * 86_400;
    if let Some(time) = time {
        let (clock, offset) = match time.find(['Z', 'z', '+', '-']) {
            Some(at) => (&time[..at], &time[at..]),
            None => (time, ""),
        };
        let mut fields = clock.split(':');
        let hour = number(fields.next()?, 2)?;
        let minute = number(fields.next()?, 2)?;
        let second = match fields.next() {
            Some(second) => number(second.split('.').next()?, 2)?,
            None => 0,
        };
        if fields.next().is_some() || hour > 23 || minute > 59 || second > 60 {
            return None;
        }
        seconds += hour * 3600 + minute * 60 + second;
        seconds -= match offset {
            "" | "Z" | "z" => 0,
            _ => {
                let sign = if offset.starts_with('-') { -1 } else { 1 };
                let (hours, minutes) = offset[1..].split_once(':')?;
                sign * (number(hours, 2)? * 3600 + number(minutes, 2)? * 60)
            }
        };
    }
    Some(seconds)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Metadata {
        Metadata {
            tenant_id: "t".into(),
            doc_id: "docs/win/install".into(),
            product: "AdGuard".into(),
            version: "7.15.2".into(),
            tags: vec!["windows".into(), "setup".into()],
            platform: "windows".into(),
            url: "https://example.com/kb/ru/win/install".into(),
            indexed_at: "2026-03-01T10:00:00Z".into(),
            ..Metadata::default()
        }
    }

    fn clause(field: Field, test: Test) -> MetadataCondition {
        MetadataCondition::all(vec![Clause::Field(field, test)])
    }

    #[test]
    fn text_tests_ignore_case_and_equality_is_exact() {
        let m = meta();
        assert!(clause(Field::Product, Test::Contains("guar".into())).matches(&m));
        assert!(!clause(Field::Product, Test::NotContains("guar".into())).matches(&m));
        assert!(clause(Field::Url, Test::StartsWith("https://".into())).matches(&m));
        assert!(clause(Field::DocId, Test::EndsWith("/install".into())).matches(&m));
        assert!(clause(Field::Product, Test::Is("AdGuard".into())).matches(&m));
        assert!(!clause(Field::Product, Test::Is("adguard".into())).matches(&m));
        assert!(clause(Field::Platform, Test::In(ValueList::new(vec!["windows".into(), "mac".into()]))).matches(&m));
        assert!(!clause(Field::Platform, Test::NotIn(ValueList::new(vec!["windows".into()]))).matches(&m));
        // Unsorted, repeated values: each distinct value kept once, every one found.
        let many: Vec<String> =
            (0..1000).rev().map(|n| format!("v{n}")).chain(["windows".into(), "v7".into()]).collect();
        assert_eq!(ValueList::new(many.clone()).len(), 1001);
        assert!(clause(Field::Platform, Test::In(ValueList::new(many.clone()))).matches(&m));
        assert!(!clause(Field::Platform, Test::NotIn(ValueList::new(many))).matches(&m));
        assert!(clause(Field::Role, Test::Empty).matches(&m));
        assert!(!clause(Field::Role, Test::NotEmpty).matches(&m));
    }

    #[test]
    fn tags_pass_a_positive_test_on_any_tag_and_a_negative_one_on_none() {
        let m = meta();
        assert!(clause(Field::Tags, Test::Is("setup".into())).matches(&m));
        assert!(!clause(Field::Tags, Test::IsNot("setup".into())).matches(&m));
        assert!(clause(Field::Tags, Test::IsNot("mac".into())).matches(&m));
        assert!(!clause(Field::Tags, Test::NotContains("WIN".to_lowercase())).matches(&m));
        assert!(!clause(Field::Tags, Test::Empty).matches(&m));
    }

    #[test]
    fn versions_compare_part_by_part_and_non_numbers_satisfy_no_comparison() {
        let m = meta();
        let version = |comparison, text: &str| {
            clause(Field::Version, Test::Compare(comparison, Number::parse(Field::Version, text).unwrap())).matches(&m)
        };
        assert!(version(Comparison::Greater, "7.9"));
        assert!(version(Comparison::Less, "7.16"));
        assert!(version(Comparison::Equal, "7.15.2.0"));
        assert!(version(Comparison::GreaterOrEqual, "7.15.2"));
        assert!(version(Comparison::LessOrEqual, "v8"));
        assert!(!version(Comparison::NotEqual, "7.15.2"));
        let on_product = Test::Compare(Comparison::NotEqual, Number::Decimal(1.0));
        assert!(!clause(Field::Product, on_product).matches(&m), "`AdGuard` is not a number");
    }

    #[test]
    fn dates_parse_in_the_accepted_forms() {
        assert_eq!(unix_seconds("1970-01-01"), Some(0));
        assert_eq!(unix_seconds("2026-03-01T10:00:00Z"), Some(1_772_359_200));
        assert_eq!(unix_seconds("2026-03-01 12:00:00+02:00"), Some(1_772_359_200));
        assert_eq!(unix_seconds("2026-03-01T10:00"), Some(1_772_359_200));
        assert_eq!(unix_seconds("1772359200"), Some(1_772_359_200));
        for bad in ["2026-02-30", "2026-13-01", "yesterday", "2026-03-01T25:00", ""] {
            assert_eq!(unix_seconds(bad), None, "{bad}");
        }
        let m = meta();
        assert!(clause(Field::IndexedAt, Test::After(unix_seconds("2026-01-01").unwrap())).matches(&m));
        assert!(!clause(Field::IndexedAt, Test::Before(unix_seconds("2026-03-01").unwrap())).matches(&m));
    }

    #[test]
    fn logic_joins_clauses_and_groups_nest() {
        let m = meta();
        let yes = Clause::Field(Field::Platform, Test::Is("windows".into()));
        let no = Clause::Field(Field::Platform, Test::Is("mac".into()));
        assert!(!MetadataCondition::all(vec![yes.clone(), no.clone()]).matches(&m));
        let any = MetadataCondition { logic: Logic::Any, clauses: vec![yes.clone(), no.clone()] };
        assert!(any.matches(&m));
        assert!(MetadataCondition::all(vec![yes, Clause::Group(any)]).matches(&m));
        assert!(MetadataCondition::default().matches(&m), "no clause matches every record");
    }
}
