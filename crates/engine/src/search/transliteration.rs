//! Transliteration-aware lexical matching, learned from a tenant's own pages.
//!
//! Users write Latin product and OS names in Cyrillic («сафари», «линукс», «брокер») where the
//! pages write them in Latin, and the other way round. From the words of a tenant's pages this
//! learns, for every Latin word of at least four letters, its Cyrillic spelling
//! (`router::learned::to_cyrillic`, stemmed as a Russian query word is): a query term equal to
//! that spelling also asks BM25 for the Latin word's term, unless the pages hold the Latin word
//! in fewer records than `min_latin_ratio` × those of the Cyrillic word (then the query word is
//! a Russian word the pages use themselves: «тип», «компании»). The reverse direction: a Latin
//! query word whose Cyrillic spelling is a term of the pages also asks for that term. Nothing
//! here is written for a site: the map comes from the pages and the generic spelling rules.

use crate::model::Record;
use crate::router::learned::to_cyrillic;
use crate::search::boosting_config::TransliterationConfig;
use crate::text;
use std::collections::{BTreeSet, HashMap, HashSet};

/// What a tenant's pages teach about spelling Latin words in Cyrillic.
#[derive(Debug, Default)]
pub(crate) struct Transliterations {
    /// The Russian stem of a Latin word's Cyrillic spelling → the Latin words spelled so.
    to_latin: HashMap<String, Vec<LatinWord>>,
    /// Every Cyrillic term of the pages → how many records hold it.
    cyrillic: HashMap<String, usize>,
}

/// A Latin term of the pages, with what the guards of `expand` read.
#[derive(Debug, Clone, PartialEq)]
struct LatinWord {
    term: String,
    /// Records holding the term.
    records: usize,
    /// Letters of its longest written form.
    letters: usize,
}

impl Transliterations {
    /// Learns from `records` (a tenant's docs and sections): their titles and texts, the words
    /// BM25 indexes.
    pub(crate) fn learn<'a>(records: impl IntoIterator<Item = &'a Record>) -> Self {
        // Each distinct token's term (a Latin token's spellings are keyed when it is first seen).
        let mut known: HashMap<String, String> = HashMap::new();
        // A Latin term → the records holding it and the letters of its longest written form.
        let mut latin: HashMap<String, (usize, usize)> = HashMap::new();
        let mut cyrillic: HashMap<String, usize> = HashMap::new();
        let mut to_latin: HashMap<String, BTreeSet<String>> = HashMap::new();
        for record in records {
            let mut latin_terms: HashSet<String> = HashSet::new();
            let mut cyrillic_terms: HashSet<String> = HashSet::new();
            for text in [record.meta.title.as_str(), record.text.as_str()] {
                text::for_each_token(text, |token| {
                    let is_latin = token.chars().all(|c| c.is_ascii_lowercase());
                    let is_cyrillic = !is_latin && token.chars().any(|c| ('а'..='я').contains(&c));
                    if !(is_latin || is_cyrillic) || text::is_stopword(token) {
                        return;
                    }
                    let term = known.entry(token.to_string()).or_insert_with(|| {
                        let term = text::stem(token);
                        if is_latin {
                            let letters = &mut latin.entry(term.clone()).or_default().1;
                            *letters = (*letters).max(token.len());
                            // The spelling of the word as written and of its stem («servers» →
                            // «серверс», «server» → «сервер»): a Russian stem of either is a key.
                            for spelled in [to_cyrillic(token), to_cyrillic(&term)].into_iter().flatten() {
                                let key = text::stem(&spelled);
                                if key.chars().count() >= 3 {
                                    to_latin.entry(key).or_default().insert(term.clone());
                                }
                            }
                        }
                        term
                    });
                    if is_latin {
                        latin_terms.insert(term.clone());
                    } else {
                        cyrillic_terms.insert(term.clone());
                    }
                });
            }
            for term in latin_terms {
                latin.entry(term).or_default().0 += 1;
            }
            for term in cyrillic_terms {
                *cyrillic.entry(term).or_default() += 1;
            }
        }
        let to_latin = to_latin
            .into_iter()
            .map(|(key, terms)| {
                let words = terms
                    .into_iter()
                    .map(|term| {
                        let (records, letters) = latin.get(&term).copied().unwrap_or_default();
                        LatinWord { term, records, letters }
                    })
                    .collect();
                (key, words)
            })
            .collect();
        Self { to_latin, cyrillic }
    }

    /// How many Cyrillic spellings of Latin words were learned.
    pub(crate) fn spellings(&self) -> usize {
        self.to_latin.len()
    }

    /// The terms to add to a lexical query of `query` (whose terms are `terms`): the Latin terms
    /// of its Cyrillic terms, and with `reverse` the Cyrillic terms of its Latin words; none
    /// that `terms` already holds, each once. `options.enabled` is the caller's to read; a Latin
    /// word has at least 4 letters whatever `options.min_letters` says (`to_cyrillic` needs them).
    pub(crate) fn expand(&self, query: &str, terms: &[String], options: &TransliterationConfig) -> Vec<String> {
        let min_letters = options.min_letters.max(4);
        let mut added: Vec<String> = Vec::new();
        let add = |term: &String, added: &mut Vec<String>| {
            if !terms.contains(term) && !added.contains(term) {
                added.push(term.clone());
            }
        };
        for term in terms {
            let Some(words) = self.to_latin.get(term) else { continue };
            let cyrillic_records = self.cyrillic.get(term).copied().unwrap_or(0) as f32;
            for word in words {
                if word.letters >= min_letters && word.records as f32 >= options.min_latin_ratio * cyrillic_records {
                    add(&word.term, &mut added);
                }
            }
        }
        if options.reverse {
            for token in text::tokenize(query) {
                if token.len() < min_letters || text::is_stopword(&token) {
                    continue;
                }
                if let Some(key) = to_cyrillic(&token).map(|spelled| text::stem(&spelled)) {
                    if self.cyrillic.contains_key(&key) {
                        add(&key, &mut added);
                    }
                }
            }
        }
        added
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Metadata;

    fn record(title: &str, text: &str) -> Record {
        Record {
            id: title.into(),
            meta: Metadata { title: title.into(), ..Metadata::default() },
            text: text.into(),
            embedding: vec![],
        }
    }

    fn learned() -> Transliterations {
        let records = [
            record("Установка на Linux", "Скачайте пакет для Linux и Windows. Расширение для Safari. Servers."),
            record("VeiL Broker", "Брокер подключений управляет пулами. Настройки Broker."),
            record("Клиент", "Клиент подключается по протоколу RDP."),
        ];
        Transliterations::learn(records.iter())
    }

    #[test]
    fn the_map_holds_the_cyrillic_spelling_of_every_long_latin_word_of_the_pages() {
        let learned = learned();
        let latin = |cyrillic: &str| -> Vec<String> {
            learned.to_latin.get(&text::stem(cyrillic)).into_iter().flatten().map(|w| w.term.clone()).collect()
        };
        assert!(latin("линукс").contains(&text::stem("linux")));
        // «Servers» is spelled as written («серверс») and as its stem «server» («сервера»).
        assert!(latin("серверс").contains(&text::stem("servers")));
        assert!(latin("сервера").contains(&text::stem("servers")));
        assert!(latin("сафари").contains(&text::stem("safari")));
        assert!(latin("брокер").contains(&text::stem("broker")));
        // Short words («rdp») are not guessed; Cyrillic words are not keys.
        assert!(!learned.to_latin.values().flatten().any(|word| word.term == "rdp"));
        assert!(learned.to_latin.values().flatten().all(|word| word.term.is_ascii()));
    }

    #[test]
    fn a_cyrillic_query_word_asks_for_the_latin_word_of_the_pages() {
        let learned = learned();
        let query = "как поставить на линуксе и в сафари";
        let terms = text::terms(query);
        let added = learned.expand(query, &terms, &TransliterationConfig::default());
        assert_eq!(added, vec![text::stem("linux"), text::stem("safari")]);
        // A word the pages never write in Latin adds nothing.
        assert!(learned.expand("андроид", &text::terms("андроид"), &TransliterationConfig::default()).is_empty());
    }

    #[test]
    fn a_latin_query_word_asks_for_the_cyrillic_word_of_the_pages_only_in_reverse() {
        let learned = learned();
        let reverse = TransliterationConfig { reverse: true, ..TransliterationConfig::default() };
        let query = "klient broker settings";
        let terms = text::terms(query);
        assert!(learned.expand(query, &terms, &TransliterationConfig::default()).is_empty());
        let added = learned.expand(query, &terms, &reverse);
        assert!(added.contains(&text::stem("клиент")), "{added:?}");
        assert!(added.contains(&text::stem("брокер")), "{added:?}");
        // Nothing twice, nothing the query holds already.
        let again = learned.expand("broker брокер", &text::terms("broker брокер"), &reverse);
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn the_guards_keep_russian_words_and_short_words_from_asking_for_latin_ones() {
        // «тип» is a Russian word on three records, the Latin «type» (spelled «типе») on one;
        // «Safari» and «Сафари» are on one record each.
        let records = [
            record("Типы пулов", "Тип пула: type auto."),
            record("Клоны", "Тип клона."),
            record("Диски", "Тип диска."),
            record("Safari", "Расширение для Safari, или Сафари."),
        ];
        let learned = Transliterations::learn(records.iter());
        let query = "какой тип у сафари";
        let terms = text::terms(query);
        let all = learned.expand(query, &terms, &TransliterationConfig::default());
        assert_eq!(all, vec![text::stem("type"), text::stem("safari")]);
        let names = TransliterationConfig { min_latin_ratio: 1.0, ..TransliterationConfig::default() };
        assert_eq!(learned.expand(query, &terms, &names), vec![text::stem("safari")]);
        let rarer = TransliterationConfig { min_latin_ratio: 2.0, ..TransliterationConfig::default() };
        assert!(learned.expand(query, &terms, &rarer).is_empty());
        let long = TransliterationConfig { min_letters: 6, ..TransliterationConfig::default() };
        assert_eq!(learned.expand(query, &terms, &long), vec![text::stem("safari")]);
    }
}
