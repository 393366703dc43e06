//! Per-record facts that do not change between requests, derived once when an index is loaded:
//! what boosting reads of a record besides its metadata values (lower-cased title and URL, URL
//! depth, the starts of the text's lines, the tags as group labels).

use crate::model::Record;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// How many boosting rules there are (`search::boosting::BoostRule::ORDER`).
pub(crate) const BOOST_RULES: usize = 10;

/// Longest line start kept per line; a marker longer than this is looked up in the text itself.
const LINE_HEAD_BYTES: usize = 16;

/// Derived facts of one record; `RecordFeatures::of_after` is the one place they are computed.
///
/// The fields every ranked candidate reads (its page number, topics, cached boost factors and whether
/// it has labels) come first and in this order (`repr(C)`), and the features of a level are kept
/// side by side starting on cache line boundaries (`align(64)`): those fields fill the first two
/// lines, so a candidate costs two loads from memory, not one per field. The rest fit a third
/// line (the lists as boxed slices, not `Vec`s): a record's features are 192 bytes, not 256.
#[derive(Debug, Clone, Default, PartialEq)]
#[repr(C, align(64))]
pub(crate) struct RecordFeatures {
    /// The place of the record's page (`meta.doc_id`) among its tenant's pages in doc id order,
    /// all levels alike, when an index set it: the cascade keys pages by it instead of hashing ids.
    pub(crate) page: Option<IdOrder>,
    /// The numbers (`TopicTable`) of the record's domain, section, platform and role (trimmed): what theme
    /// matching compares, instead of the strings.
    pub(crate) topics: [u32; 4],
    /// The factors of the boosting rules that read only the record and the boosting config,
    /// computed on the record's first boost under one config (`BoostCacheKey`) and reused by
    /// every later request: boosting then costs a few multiplications per candidate.
    boosts: OnceLock<(BoostCacheKey, [f32; BOOST_RULES])>,
    /// Whether `labels` is not empty (read without loading the list).
    labeled: bool,
    /// `url_depth(meta.url)`.
    pub(crate) url_depth: u32,
    /// `meta.tags` trimmed, lower-cased, sorted and deduplicated.
    labels: Box<[String]>,
    /// `meta.title` lower-cased (one copy for a page's records in a row: `of_after`).
    pub(crate) title_lower: Arc<str>,
    /// `meta.url` lower-cased (shared as `title_lower` is).
    pub(crate) url_lower: Arc<str>,
    /// The distinct starts of the text's lines (leading whitespace removed, at most
    /// `LINE_HEAD_BYTES` bytes cut at a character boundary), sorted, each followed by `\n`.
    line_heads: Box<str>,
    /// Bit `b` set when some line head starts with byte `b` (an empty head sets none).
    first_bytes: [u64; 4],
}

/// Topic values (a record's domain, section, platform, role; a theme's) as numbers, for one
/// loaded index and the refreshes built on it (`LoadedIndex::topics`): two values get the same
/// number exactly when they are equal ignoring ASCII case (the rule of `ThemeFields::matches`).
/// The empty value is 0. A number, once given, never changes; a search reads the numbers of the
/// index it searches, so no two indexes' numbers meet.
#[derive(Debug, Default)]
pub struct TopicTable(RwLock<FxHashMap<String, u32>>);

impl TopicTable {
    /// The number of a topic value, numbering it when it is new (records, at load).
    pub(crate) fn intern(&self, value: &str) -> u32 {
        if let Some(number) = self.number(value) {
            return number;
        }
        let key = value.to_ascii_lowercase();
        let mut table = self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let next = table.len() as u32 + 1;
        *table.entry(key).or_insert(next)
    }

    /// The number of a topic value when some record of the index has had it; `None`: none has.
    pub(crate) fn number(&self, value: &str) -> Option<u32> {
        if value.is_empty() {
            return Some(0);
        }
        let lowered;
        let key = if value.bytes().any(|byte| byte.is_ascii_uppercase()) {
            lowered = value.to_ascii_lowercase();
            lowered.as_str()
        } else {
            value
        };
        self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner()).get(key).copied()
    }
}

/// Names one boosting config for the lifetime of the process: whoever holds a key promises that
/// the config it stands for never changes (a `SearchService` makes one with its config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoostCacheKey(u64);

impl BoostCacheKey {
    /// A key no other config has.
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for BoostCacheKey {
    fn default() -> Self {
        Self::new()
    }
}

/// What `RecordFeatures::of_after` keeps of the record before: the values its features derived
/// from them, reused when the next record has the same.
pub(crate) struct Previous<'r> {
    record: &'r Record,
    title_lower: Arc<str>,
    url_lower: Arc<str>,
    topics: [u32; 4],
}

/// A place in an id order numbered once per loaded index (a tenant's pages by ascending doc id):
/// two places with the same `scope` (pointer-equal) compare by `number` exactly as by id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IdOrder {
    pub(crate) scope: Arc<()>,
    pub(crate) number: u32,
}

impl IdOrder {
    /// Whether `self` and `other` are numbered in the same scope.
    pub(crate) fn same_scope(&self, other: &IdOrder) -> bool {
        Arc::ptr_eq(&self.scope, &other.scope)
    }
}

impl RecordFeatures {
    /// The features of `record`, its topic values numbered in `topics` (its index's table).
    #[cfg(test)]
    pub(crate) fn of(record: &Record, topics: &TopicTable) -> Self {
        Self::of_after(record, topics, &mut None)
    }

    /// `of`, reusing what `previous` (the record this was last asked of) has in common with
    /// `record`, then remembering `record` in its place. Records in a row with the same title,
    /// URL or topic values (a page's sections or chunks, in id order) share the lower-cased
    /// strings and are numbered without looking the values up again.
    pub(crate) fn of_after<'r>(record: &'r Record, topics: &TopicTable, previous: &mut Option<Previous<'r>>) -> Self {
        let meta = &record.meta;
        let title_lower = match previous {
            Some(previous) if previous.record.meta.title == meta.title => Arc::clone(&previous.title_lower),
            _ => Arc::from(meta.title.to_lowercase()),
        };
        let url_lower = match previous {
            Some(previous) if previous.record.meta.url == meta.url => Arc::clone(&previous.url_lower),
            _ => Arc::from(meta.url.to_lowercase()),
        };
        let topic_values = |meta: &'r crate::model::Metadata| [&meta.domain, &meta.section, &meta.platform, &meta.role];
        let numbers = match previous {
            Some(previous) if topic_values(&previous.record.meta) == topic_values(meta) => previous.topics,
            _ => topic_values(meta).map(|value| topics.intern(value.trim())),
        };
        let mut labels: Vec<String> = meta.tags.iter().map(|tag| tag.trim().to_lowercase()).collect();
        labels.sort();
        labels.dedup();
        let mut heads: Vec<&str> = record.text.lines().map(|line| line_head(line.trim_start())).collect();
        heads.sort_unstable();
        heads.dedup();
        let mut line_heads = String::with_capacity(heads.iter().map(|head| head.len() + 1).sum());
        let mut first_bytes = [0u64; 4];
        for head in heads {
            if let Some(&byte) = head.as_bytes().first() {
                first_bytes[usize::from(byte / 64)] |= 1 << (byte % 64);
            }
            line_heads.push_str(head);
            line_heads.push('\n');
        }
        *previous = Some(Previous {
            record,
            title_lower: Arc::clone(&title_lower),
            url_lower: Arc::clone(&url_lower),
            topics: numbers,
        });
        Self {
            title_lower,
            url_lower,
            url_depth: url_depth(&meta.url),
            labeled: !labels.is_empty(),
            labels: labels.into_boxed_slice(),
            line_heads: line_heads.into_boxed_str(),
            first_bytes,
            page: None,
            topics: numbers,
            boosts: OnceLock::new(),
        }
    }

    /// `meta.tags` trimmed, lower-cased, sorted and deduplicated; `None` when there are none,
    /// known without loading the list.
    pub(crate) fn labels(&self) -> Option<&[String]> {
        self.labeled.then_some(&self.labels[..])
    }

    /// The record's config-only boost factors under the config `key` names: cached on first use;
    /// computed by `compute` (and not kept) when the record was first boosted under another key.
    pub(crate) fn config_boosts(
        &self,
        key: BoostCacheKey,
        compute: impl FnOnce() -> [f32; BOOST_RULES],
    ) -> [f32; BOOST_RULES] {
        if let Some((owner, factors)) = self.boosts.get() {
            if *owner == key {
                return *factors;
            }
        }
        let factors = compute();
        // Only the first config a record is boosted under is kept (a race may lose: no harm).
        let _ = self.boosts.set((key, factors));
        factors
    }

    /// Whether a line of the text, after its leading whitespace, starts with `marker`; `None` when
    /// the marker is longer than the kept line starts (the caller then reads the text).
    pub(crate) fn line_starts_with(&self, marker: &str) -> Option<bool> {
        if marker.len() > LINE_HEAD_BYTES || marker.contains('\n') {
            return None;
        }
        if let Some(&byte) = marker.as_bytes().first() {
            if self.first_bytes[usize::from(byte / 64)] & (1 << (byte % 64)) == 0 {
                return Some(false);
            }
        }
        Some(self.line_heads.split_terminator('\n').any(|head| head.starts_with(marker)))
    }
}

/// The first `LINE_HEAD_BYTES` bytes of `line`, cut back to a character boundary. A line starts
/// with a marker of at most that many bytes exactly when its head does.
fn line_head(line: &str) -> &str {
    if line.len() <= LINE_HEAD_BYTES {
        return line;
    }
    let mut end = LINE_HEAD_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// Number of non-empty path segments of `url` (scheme, host, query and fragment excluded).
pub(crate) fn url_depth(url: &str) -> u32 {
    let without_scheme =
        url.split_once("://").map(|(_, rest)| rest.split_once('/').map_or("", |(_, path)| path)).unwrap_or(url);
    let path = without_scheme.split(['?', '#']).next().unwrap_or("");
    path.split('/').filter(|segment| !segment.is_empty()).count() as u32
}

/// Asks the CPU to bring the two cache lines of `features` that a ranked candidate reads into its
/// cache, without waiting for them (a hint: no effect on what the program computes).
#[inline]
pub(crate) fn prefetch(features: &RecordFeatures) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let start = (features as *const RecordFeatures).cast::<i8>();
        // SAFETY: prefetching is a hint; it reads nothing and cannot fault, whatever the address.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(start);
            _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_numbers_ignore_ascii_case_and_a_missing_value_is_not_kept() {
        let table = TopicTable::default();
        assert_eq!(table.number("Topic-A"), None);
        let number = table.intern("TOPIC-a");
        // A value first missing reads its number once a record has it, in any ASCII case.
        for spelling in ["topic-a", "Topic-A", "TOPIC-A"] {
            assert_eq!(table.number(spelling), Some(number), "{spelling}");
        }
        let other = table.intern("topic-b");
        assert_ne!(other, number);
        assert_eq!(table.number("TOPIC-B"), Some(other));
        assert_eq!((table.number(""), table.intern("")), (Some(0), 0));
        // Another index's table numbers its own values.
        assert_eq!(TopicTable::default().number("topic-a"), None);
    }

    use crate::model::Metadata;

    fn record(text: &str, title: &str, url: &str, tags: &[&str]) -> Record {
        Record {
            id: "d".into(),
            meta: Metadata {
                title: title.into(),
                url: url.into(),
                tags: tags.iter().map(|t| t.to_string()).collect(),
                ..Metadata::default()
            },
            text: text.into(),
            embedding: Vec::new(),
        }
    }

    /// The definition the line heads stand for: some line, after leading whitespace, starts with it.
    fn scan(text: &str, marker: &str) -> bool {
        text.lines().map(str::trim_start).any(|line| line.starts_with(marker))
    }

    #[test]
    fn line_starts_agree_with_a_scan_of_the_text() {
        let texts = [
            "",
            "## Заголовок\nтекст",
            "  1. шаг\r\n\t• пункт",
            "ёёёёёёёёёёёёёёё длинная строка без маркеров",
            "abcdefghijklmnopqrstuvwxyz\n   ###",
            "первая\n\nвторая 2.",
        ];
        let markers = ["##", "###", "•", "1.", "2.", "ё", "ёёёёёёёё", "abcdefghijklmnop", "первая", " ", "x"];
        for text in texts {
            let features = RecordFeatures::of(&record(text, "", "", &[]), &TopicTable::default());
            for marker in markers {
                assert_eq!(features.line_starts_with(marker), Some(scan(text, marker)), "{text:?} / {marker:?}");
            }
            assert_eq!(features.line_starts_with("abcdefghijklmnopq"), None);
        }
    }

    /// Records in runs of equal and different titles, URLs and topic values: each record's
    /// features made after the one before are those it has alone, and a run shares one
    /// lower-cased title.
    #[test]
    fn features_made_in_a_row_are_each_records_own() {
        let records: Vec<Record> = (0..1_000)
            .map(|i| {
                let mut record = record(&format!("## Шаг {}\nтекст", i % 7), &format!("Страница {}", i / 5), "", &[]);
                record.meta.url = format!("https://Docs.example.com/P{}", i / 3).into();
                record.meta.platform = ["Windows", "windows", "Mac", ""][i / 4 % 4].into();
                record.meta.domain = format!("Area{}", i / 11 % 3).into();
                record
            })
            .collect();
        let (together, alone) = (TopicTable::default(), TopicTable::default());
        let mut previous = None;
        let made: Vec<RecordFeatures> =
            records.iter().map(|record| RecordFeatures::of_after(record, &together, &mut previous)).collect();
        for (features, record) in made.iter().zip(&records) {
            let own = RecordFeatures::of(record, &alone);
            let numbered = |table: &TopicTable, numbers: [u32; 4]| {
                let names = [&record.meta.domain, &record.meta.section, &record.meta.platform, &record.meta.role];
                names.map(|name| table.number(name.trim())).iter().zip(numbers).all(|(n, m)| *n == Some(m))
            };
            assert!(numbered(&together, features.topics) && numbered(&alone, own.topics), "{}", record.meta.platform);
            assert_eq!(RecordFeatures { topics: own.topics, ..features.clone() }, own);
        }
        assert!(Arc::ptr_eq(&made[5].title_lower, &made[9].title_lower));
        assert!(!Arc::ptr_eq(&made[9].title_lower, &made[10].title_lower));
    }

    #[test]
    fn a_records_features_take_three_cache_lines() {
        assert_eq!(std::mem::size_of::<RecordFeatures>(), 3 * 64);
    }

    #[test]
    fn lower_cased_fields_depth_and_labels() {
        let features = RecordFeatures::of(
            &record("", "Что Такое SDK", "https://Docs.example.com/A/b/?x#y", &[" B", "a", "b"]),
            &TopicTable::default(),
        );
        assert_eq!(&*features.title_lower, "что такое sdk");
        assert_eq!(&*features.url_lower, "https://docs.example.com/a/b/?x#y");
        assert_eq!(features.url_depth, 2);
        assert_eq!(features.labels(), Some(&["a".to_string(), "b".to_string()][..]));
    }

    #[test]
    fn the_fields_every_candidate_reads_fit_two_cache_lines() {
        assert_eq!(std::mem::align_of::<RecordFeatures>(), 64);
        let end = std::mem::offset_of!(RecordFeatures, labeled) + 1;
        assert!(end <= 128, "hot fields end at byte {end}");
        for offset in [
            std::mem::offset_of!(RecordFeatures, page),
            std::mem::offset_of!(RecordFeatures, topics),
            std::mem::offset_of!(RecordFeatures, boosts),
        ] {
            assert!(offset < std::mem::offset_of!(RecordFeatures, labeled));
        }
    }
}
