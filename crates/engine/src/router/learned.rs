//! Themes learned from a tenant's own index, so a site nobody wrote a themes file for still gets
//! routing and disambiguation.
//!
//! - **Areas** come from the index's structure: the docs' `platform` when the mapping set one on
//!   some docs, else their `section` (which ingest takes from the first folder of a page's path
//!   when no mapping rule names it). An area needs `MIN_AREA_DOCS` docs, and a tenant needs two
//!   areas, or nothing is learned.
//! - **Vocabulary**: each area's distinctive words, weighed against the other areas: a word
//!   (by stem) that is on at least `MIN_WORD_DOCS` of the area's pages, on a larger share of
//!   them than of the other areas' pages by `MIN_RATE_RATIO`, and on few pages elsewhere. Product,
//!   OS, device, version and store names come out of this on their own, in the spelling the pages
//!   use (Latin or Cyrillic); the area's folder name is a keyword too.
//!
//! - **Routing** (`AreaWords`): every word of each area's pages, counted by pages, so a question
//!   that names no theme by a keyword is still routed by all of its words (naive Bayes; the
//!   keywords alone named VeiL's area for 0.496 of its questions, the pages' words for 0.872).
//!
//! Nothing here reads a question when learning: what is learned depends on the pages only.

use super::Theme;
use crate::model::Record;
use crate::text;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Fewest docs an area needs to become a theme.
pub(crate) const MIN_AREA_DOCS: usize = 3;
/// Fewest of an area's pages a word must be on to be one of its keywords.
pub(crate) const MIN_WORD_DOCS: usize = 2;
/// How many times more often (by share of pages) a keyword appears in its area than elsewhere.
pub(crate) const MIN_RATE_RATIO: f64 = 4.0;
/// Most keywords learned per area.
pub(crate) const MAX_KEYWORDS: usize = 40;

/// Which metadata field the learned areas stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AreaField {
    Platform,
    Section,
}

/// The themes learned from a tenant's docs (`docs`: doc-level records; `sections`: their
/// sections, whose text gives the vocabulary), and every word of their areas' pages for routing
/// (`AreaWords`, areas in the themes' order). No theme when the tenant has fewer than two areas.
pub(crate) fn learn_routing(docs: &[&Record], sections: &[&Record]) -> (Vec<Theme>, AreaWords) {
    let field =
        if docs.iter().any(|d| !d.meta.platform.trim().is_empty()) { AreaField::Platform } else { AreaField::Section };
    let area_of = |record: &Record| -> Option<String> {
        let value = match field {
            AreaField::Platform => record.meta.platform.trim(),
            AreaField::Section => record.meta.section.trim(),
        };
        (!value.is_empty()).then(|| value.to_string())
    };
    let frequencies = PageFrequencies::count(docs, sections, |doc| area_of(doc), MIN_AREA_DOCS);
    let vocabulary = frequencies.vocabulary();
    if vocabulary.len() < 2 {
        return (Vec::new(), AreaWords::default());
    }
    let mut area_docs: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for doc in docs {
        if let Some(area) = area_of(doc).filter(|a| vocabulary.contains_key(a)) {
            area_docs.entry(area).or_default().push(doc);
        }
    }
    let mut themes = Vec::new();
    for (area, members) in &area_docs {
        let mut keywords: Vec<String> = area_words(area);
        for word in vocabulary.get(area).into_iter().flatten() {
            if !keywords.contains(word) {
                keywords.push(word.clone());
            }
        }
        // Users write Latin names in Cyrillic («брокер», «коннект», «линукс»): each Latin
        // keyword also in its Cyrillic transliteration.
        let spelled: Vec<String> = keywords.iter().filter_map(|k| to_cyrillic(k)).collect();
        for word in spelled {
            if !keywords.contains(&word) {
                keywords.push(word);
            }
        }
        let display_name = area_title(area, members);
        let (platform, section) = match field {
            AreaField::Platform => (Some(area.clone()), None),
            AreaField::Section => (None, Some(area.clone())),
        };
        // The area's domain when all its pages share one: the theme then names two fields, as
        // a written product theme does, and labels its hits as specific.
        let domain = members
            .first()
            .map(|d| d.meta.domain.trim().to_string())
            .filter(|domain| !domain.is_empty() && members.iter().all(|d| d.meta.domain.trim() == domain))
            .unwrap_or_default();
        themes.push(Theme {
            id: format!("area_{}", area.to_lowercase().replace(|c: char| !c.is_alphanumeric(), "_")),
            display_name,
            domain,
            section,
            platform,
            role: None,
            description: format!("Learned from the index: {} pages of this area", members.len()),
            keywords,
            priority: 1.0,
        });
    }
    let areas: Vec<String> = area_docs.keys().cloned().collect();
    (themes, frequencies.area_words(&areas))
}

/// Each area's distinctive words (most distinctive first, at most `MAX_KEYWORDS`), for the
/// areas `area_of` gives at least `min_area_docs` of `docs`; `sections` give the pages' text.
pub(crate) fn area_vocabulary(
    docs: &[&Record],
    sections: &[&Record],
    area_of: impl Fn(&Record) -> Option<String>,
    min_area_docs: usize,
) -> BTreeMap<String, Vec<String>> {
    PageFrequencies::count(docs, sections, area_of, min_area_docs).vocabulary()
}

/// How many pages of each area hold each word (by stem), from the pages' titles, summaries and
/// sections.
struct PageFrequencies {
    /// Pages per area (areas with at least the minimum of docs).
    area_pages: BTreeMap<String, usize>,
    /// Pages per (area, word).
    df_area: HashMap<(String, String), usize>,
    /// Pages per word, areas or not.
    df_all: HashMap<String, usize>,
    total_pages: usize,
    /// Each stem's surface forms, counted (a keyword is named by its most frequent form).
    surface: HashMap<String, HashMap<String, usize>>,
}

impl PageFrequencies {
    fn count(
        docs: &[&Record],
        sections: &[&Record],
        area_of: impl Fn(&Record) -> Option<String>,
        min_area_docs: usize,
    ) -> Self {
        // Docs per area, and each doc's area.
        let mut area_pages: BTreeMap<String, usize> = BTreeMap::new();
        let mut doc_area: HashMap<&str, String> = HashMap::new();
        for doc in docs {
            if let Some(area) = area_of(doc) {
                doc_area.insert(doc.meta.doc_id.as_str(), area.clone());
                *area_pages.entry(area).or_default() += 1;
            }
        }
        area_pages.retain(|_, pages| *pages >= min_area_docs.max(1));
        let mut counts = Self {
            area_pages,
            df_area: HashMap::new(),
            df_all: HashMap::new(),
            total_pages: 0,
            surface: HashMap::new(),
        };
        if counts.area_pages.is_empty() {
            return counts;
        }
        // The words (stems) of each page, from its title, summary and sections. Pages outside
        // any area count as "elsewhere" for every area.
        let mut page_words: HashMap<&str, BTreeSet<String>> = HashMap::new();
        for doc in docs {
            let words = page_words.entry(doc.meta.doc_id.as_str()).or_default();
            add_words(&doc.meta.title, words, &mut counts.surface);
            add_words(&doc.meta.summary, words, &mut counts.surface);
        }
        for section in sections {
            if let Some(words) = page_words.get_mut(section.meta.doc_id.as_str()) {
                add_words(&section.meta.heading_path.join(" "), words, &mut counts.surface);
                add_words(&section.text, words, &mut counts.surface);
            }
        }
        counts.total_pages = page_words.len();
        for (doc_id, words) in page_words {
            let area = doc_area.get(doc_id).filter(|a| counts.area_pages.contains_key(a.as_str()));
            for word in words {
                if let Some(area) = area {
                    *counts.df_area.entry((area.clone(), word.clone())).or_default() += 1;
                }
                *counts.df_all.entry(word).or_default() += 1;
            }
        }
        counts
    }

    fn vocabulary(&self) -> BTreeMap<String, Vec<String>> {
        let mut vocabulary = BTreeMap::new();
        for (area, &in_pages) in &self.area_pages {
            let out_pages = self.total_pages.saturating_sub(in_pages).max(1);
            let mut scored: Vec<(f64, &str)> = self
                .df_area
                .iter()
                .filter(|((a, _), _)| a == area)
                .filter_map(|((_, word), &df_in)| {
                    let df_out = self.df_all.get(word).copied().unwrap_or(0).saturating_sub(df_in);
                    let rate_in = df_in as f64 / in_pages as f64;
                    let rate_out = (df_out as f64 + 0.5) / out_pages as f64;
                    // Distinctiveness counts most; how many pages say it, on a log scale, so the
                    // house style of one area (its frequent common words) does not crowd out its
                    // names. Latin words (product, OS, protocol names in Russian docs) count double.
                    let latin = if word.chars().all(|c| c.is_ascii_alphanumeric()) { 2.0 } else { 1.0 };
                    (df_in >= MIN_WORD_DOCS && rate_in / rate_out >= MIN_RATE_RATIO)
                        .then(|| (latin * (rate_in / rate_out).ln() * (1.0 + df_in as f64).ln(), word.as_str()))
                })
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
            let mut words: Vec<String> = Vec::new();
            for (_, stem) in scored.into_iter().take(MAX_KEYWORDS) {
                if let Some(form) = self.surface.get(stem).and_then(most_frequent) {
                    if !words.contains(&form) {
                        words.push(form);
                    }
                }
            }
            vocabulary.insert(area.clone(), words);
        }
        vocabulary
    }

    /// The areas' page frequencies of every word, for routing (`AreaWords`), areas in `areas` order.
    fn area_words(&self, areas: &[String]) -> AreaWords {
        let mut words: HashMap<String, Vec<u32>> = HashMap::new();
        for ((area, word), &pages) in &self.df_area {
            if let Some(slot) = areas.iter().position(|a| a == area) {
                words.entry(word.clone()).or_insert_with(|| vec![0; areas.len()])[slot] = clamp_u32(pages);
            }
        }
        let pages = areas.iter().map(|area| clamp_u32(self.area_pages.get(area).copied().unwrap_or(0))).collect();
        AreaWords { pages, words }
    }
}

fn clamp_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// Every word of each learned area's pages, counted by pages: routing by the whole vocabulary
/// rather than the few keywords of each theme. A question's areas are weighed by naive Bayes over
/// its words (each word's share of an area's pages, +0.5 smoothing; every area equally likely
/// beforehand). Its themes are the learned ones, in their order.
#[derive(Debug, Default)]
pub(crate) struct AreaWords {
    /// Pages per area.
    pages: Vec<u32>,
    /// Word (stem) → pages holding it, per area.
    words: HashMap<String, Vec<u32>>,
}

impl AreaWords {
    /// Each area's probability for `query`, in the areas' order; `None` when none of its words is
    /// on any area's page.
    pub(crate) fn posterior(&self, query: &str) -> Option<Vec<f64>> {
        let mut stems = BTreeSet::new();
        for_each_content_word(query, |_, stem| {
            stems.insert(stem);
        });
        let mut log_p = vec![0.0_f64; self.pages.len()];
        let mut known = false;
        for counts in stems.iter().filter_map(|stem| self.words.get(stem)) {
            known = true;
            for ((log_p, &df), &pages) in log_p.iter_mut().zip(counts).zip(&self.pages) {
                *log_p += ((f64::from(df) + 0.5) / (f64::from(pages) + 1.0)).ln();
            }
        }
        if !known {
            return None;
        }
        let top = log_p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = log_p.iter().map(|v| (v - top).exp()).sum();
        Some(log_p.iter().map(|v| (v - top).exp() / total).collect())
    }
}

/// Adds the content words of `text` to a page's stems and counts their surface forms.
fn add_words(text: &str, words: &mut BTreeSet<String>, surface: &mut HashMap<String, HashMap<String, usize>>) {
    for_each_content_word(text, |token, stem| {
        *surface.entry(stem.clone()).or_default().entry(token).or_default() += 1;
        words.insert(stem);
    });
}

/// Calls `each` with every content word of `text` (at least three characters, not a function
/// word, not a number) and its stem: what the areas are counted by, and what a question is
/// weighed by.
fn for_each_content_word(text: &str, mut each: impl FnMut(String, String)) {
    for token in text::tokenize(text) {
        if token.chars().count() < 3 || text::is_stopword(&token) || token.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let stem = text::stem(&token);
        each(token, stem);
    }
}

/// A Latin word of at least four letters spelled in Cyrillic the way Russian speakers say it
/// («broker» → «брокер», «linux» → «линукс», «connect» → «коннект»); `None` for other words.
/// The learned themes' Cyrillic keywords, and the lexical query's transliterations
/// (`search::transliteration`).
pub(crate) fn to_cyrillic(word: &str) -> Option<String> {
    if word.chars().count() < 4 || !word.chars().all(|c| c.is_ascii_lowercase()) {
        return None;
    }
    const PAIRS: [(&str, &str); 12] = [
        ("sh", "ш"),
        ("ch", "ч"),
        ("ph", "ф"),
        ("th", "т"),
        ("oo", "у"),
        ("ee", "и"),
        ("ck", "к"),
        ("qu", "кв"),
        ("x", "кс"),
        ("ya", "я"),
        ("yu", "ю"),
        ("ow", "оу"),
    ];
    let mut out = String::new();
    let mut rest = word;
    'outer: while !rest.is_empty() {
        for (latin, cyrillic) in PAIRS {
            if let Some(tail) = rest.strip_prefix(latin) {
                out.push_str(cyrillic);
                rest = tail;
                continue 'outer;
            }
        }
        let mut chars = rest.chars();
        let c = chars.next()?;
        out.push(match c {
            'a' => 'а',
            'b' => 'б',
            'c' => 'к',
            'd' => 'д',
            'e' => 'е',
            'f' => 'ф',
            'g' => 'г',
            'h' => 'х',
            'i' => 'и',
            'j' => 'д',
            'k' => 'к',
            'l' => 'л',
            'm' => 'м',
            'n' => 'н',
            'o' => 'о',
            'p' => 'п',
            'q' => 'к',
            'r' => 'р',
            's' => 'с',
            't' => 'т',
            'u' => 'у',
            'v' => 'в',
            'w' => 'в',
            'y' => 'и',
            'z' => 'з',
            _ => return None,
        });
        rest = chars.as_str();
    }
    Some(out)
}

/// The words of an area's own name ("adguard-for-android" → "android"; "broker" → "broker").
fn area_words(area: &str) -> Vec<String> {
    area.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3 && !text::is_stopword(w))
        .map(str::to_lowercase)
        .collect()
}

/// The most used surface form of a stem (ties: the shorter, then the first alphabetically).
fn most_frequent(forms: &HashMap<String, usize>) -> Option<String> {
    forms
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.len().cmp(&a.0.len())).then(b.0.cmp(a.0)))
        .map(|(form, _)| form.clone())
}

/// A display name for an area: the title of its shallowest page (its index page on most sites),
/// else the area's name.
fn area_title(area: &str, members: &[&Record]) -> String {
    members
        .iter()
        .min_by_key(|d| (d.meta.source.matches('/').count(), d.meta.source.len(), d.meta.source.clone()))
        .map(|d| d.meta.title.trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| area.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Metadata;

    fn doc(id: &str, section: &str, title: &str) -> Record {
        Record {
            id: id.into(),
            meta: Metadata {
                doc_id: id.into(),
                source: id.into(),
                section: section.into(),
                title: title.into(),
                ..Metadata::default()
            },
            text: Default::default(),
            embedding: vec![],
        }
    }

    fn section(doc_id: &str, text: &str) -> Record {
        Record {
            id: format!("{doc_id}#s1"),
            meta: Metadata { doc_id: doc_id.into(), section_id: Some(format!("{doc_id}#s1")), ..Metadata::default() },
            text: text.into(),
            embedding: vec![],
        }
    }

    /// Two areas of three pages each, and a page of none.
    fn two_areas() -> (Vec<Record>, Vec<Record>) {
        let docs = vec![
            doc("broker/index.md", "broker", "VeiL Broker"),
            doc("broker/install.md", "broker", "Установка брокера"),
            doc("broker/pools.md", "broker", "Пулы"),
            doc("connect/index.md", "connect", "VeiL Connect"),
            doc("connect/install.md", "connect", "Установка клиента"),
            doc("connect/thin.md", "connect", "Тонкие клиенты"),
            doc("index.md", "", "Документация"),
        ];
        let sections = vec![
            section("broker/index.md", "Брокер управляет пулами виртуальных машин. Установка на Astra Linux."),
            section("broker/install.md", "Установка брокера на Astra Linux: репозиторий и пулы."),
            section("broker/pools.md", "Пулы виртуальных машин брокера."),
            section("connect/index.md", "Клиент подключается к рабочему столу. Установка на Windows."),
            section("connect/install.md", "Установка клиента на Windows и тонкий клиент."),
            section("connect/thin.md", "Тонкий клиент подключается к рабочему столу."),
        ];
        (docs, sections)
    }

    #[test]
    fn areas_get_their_own_distinctive_words_and_shared_words_go_to_none() {
        let (docs, sections) = two_areas();
        let docs_ref: Vec<&Record> = docs.iter().collect();
        let sections_ref: Vec<&Record> = sections.iter().collect();
        let (themes, area_words) = learn_routing(&docs_ref, &sections_ref);
        assert_eq!(themes.len(), 2);
        let broker = themes.iter().find(|t| t.id == "area_broker").unwrap();
        let connect = themes.iter().find(|t| t.id == "area_connect").unwrap();
        assert_eq!(broker.section.as_deref(), Some("broker"));
        assert_eq!(broker.display_name, "VeiL Broker");
        for word in ["broker", "пулы", "astra"] {
            assert!(broker.keywords.iter().any(|k| text::stem(k) == text::stem(word)), "{word}: {:?}", broker.keywords);
        }
        for word in ["connect", "клиент", "windows"] {
            assert!(
                connect.keywords.iter().any(|k| text::stem(k) == text::stem(word)),
                "{word}: {:?}",
                connect.keywords
            );
        }
        // «установка» is on every area's pages: it names no area.
        for theme in &themes {
            assert!(!theme.keywords.iter().any(|k| text::stem(k) == text::stem("установка")), "{:?}", theme.keywords);
        }

        // Every word of the pages weighs the areas, in the themes' order, not only the keywords.
        let slot = |id: &str| themes.iter().position(|t| t.id == id).unwrap();
        let (broker, connect) = (slot("area_broker"), slot("area_connect"));
        let virtual_machines = area_words.posterior("где виртуальные машины").unwrap();
        assert!(virtual_machines[broker] > 0.8, "{virtual_machines:?}");
        let desktop = area_words.posterior("не подключается рабочий стол").unwrap();
        assert!(desktop[connect] > 0.8, "{desktop:?}");
        let shared = area_words.posterior("установка").unwrap();
        assert!((shared[broker] - shared[connect]).abs() < 0.2, "a word of both areas weighs neither: {shared:?}");
        assert!(area_words.posterior("совсем незнакомые слова").is_none());
    }

    /// A question with no theme's keyword is routed by the words of the areas' pages: «репозиторий»
    /// is on one broker page only, too few to be a keyword.
    #[test]
    fn learned_themes_route_a_question_no_keyword_names_by_their_pages_words() {
        let (docs, sections) = two_areas();
        let docs: Vec<&Record> = docs.iter().collect();
        let sections: Vec<&Record> = sections.iter().collect();
        let (themes, area_words) = learn_routing(&docs, &sections);
        assert!(!themes.iter().flat_map(|t| &t.keywords).any(|k| text::stem(k) == text::stem("репозиторий")));
        let config = super::super::RouterConfig::default();
        let question = "куда прописать репозиторий";
        let keywords_only = super::super::ThemeSet::new(themes.clone()).route_heuristic(question, None, &config);
        assert_eq!(keywords_only.primary_theme, None);
        let learned = super::super::ThemeSet::learned(themes, area_words);
        let routed = learned.route_heuristic(question, None, &config);
        assert_eq!(routed.primary_theme.as_deref(), Some("area_broker"));
        assert!(routed.hard_filter.is_none(), "page words never filter");
        assert!(routed.named_themes.is_empty(), "one page of three is not sure enough to name the area");
        // A keyword still decides when the question has one.
        let by_keyword = learned.route_heuristic("как обновить коннект", None, &config);
        assert_eq!(by_keyword.primary_theme.as_deref(), Some("area_connect"));
        assert_eq!(by_keyword.named_themes, ["area_connect"]);
    }

    #[test]
    fn latin_names_are_spelled_in_cyrillic_too() {
        assert_eq!(to_cyrillic("broker").as_deref(), Some("брокер"));
        assert_eq!(to_cyrillic("connect").as_deref(), Some("коннект"));
        assert_eq!(to_cyrillic("linux").as_deref(), Some("линукс"));
        assert_eq!(to_cyrillic("android").as_deref(), Some("андроид"));
        assert_eq!(to_cyrillic("ios"), None, "too short to guess");
        assert_eq!(to_cyrillic("брокер"), None);
    }

    #[test]
    fn one_area_or_tiny_areas_learn_nothing() {
        let docs =
            [doc("a/1.md", "a", "A"), doc("a/2.md", "a", "A2"), doc("a/3.md", "a", "A3"), doc("b/1.md", "b", "B")];
        let refs: Vec<&Record> = docs.iter().collect();
        assert!(learn_routing(&refs, &[]).0.is_empty());
    }
}
