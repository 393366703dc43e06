//! Text normalisation shared by the lexical index, the pseudo-embedder and the router:
//! lower-casing, ё→е folding, Cyrillic/Latin/digit tokens and Snowball stemming.

use rust_stemmers::{Algorithm, Stemmer};
use std::sync::OnceLock;

fn russian() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::Russian))
}

fn english() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// Splits `text` into lower-cased tokens (letters and digits), folding `ё` to `е`.
///
/// A token is a maximal run of alphanumeric characters; mixed tokens such as "v2" or "ios14" stay whole.
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    for_each_token(text, |token| tokens.push(token.to_string()));
    tokens
}

/// Calls `each` with every token of `text` in order, as `tokenize` returns them, from one reused
/// buffer.
pub(crate) fn for_each_token(text: &str, mut each: impl FnMut(&str)) {
    let mut current = String::new();
    for ch in text.chars() {
        match fold(ch) {
            Folded::One(lower) => current.push(lower),
            Folded::Other => {
                for lower in ch.to_lowercase() {
                    current.push(if lower == 'ё' { 'е' } else { lower });
                }
            }
            Folded::Break => {
                if !current.is_empty() {
                    each(&current);
                    current.clear();
                }
            }
        }
    }
    if !current.is_empty() {
        each(&current);
    }
}

/// What a character adds to a token.
enum Folded {
    /// Ends the token (not alphanumeric).
    Break,
    /// This one lower-cased character.
    One(char),
    /// Lower-cased by the general Unicode rules.
    Other,
}

/// The ASCII and basic Cyrillic letters, which make nearly all the text here, without the
/// general Unicode tables; everything else is left to them (same result either way).
fn fold(ch: char) -> Folded {
    match ch {
        'a'..='z' | '0'..='9' | 'а'..='я' => Folded::One(ch),
        'A'..='Z' => Folded::One(ch.to_ascii_lowercase()),
        // А..Я → а..я: the 32 basic capitals are 0x20 below their small letters.
        'А'..='Я' => Folded::One(char::from_u32(ch as u32 + 0x20).unwrap_or(ch)),
        'ё' | 'Ё' => Folded::One('е'),
        _ if ch.is_ascii() => Folded::Break,
        _ if ch.is_alphanumeric() => Folded::Other,
        _ => Folded::Break,
    }
}

fn is_cyrillic(token: &str) -> bool {
    token.chars().any(|c| ('\u{0400}'..='\u{04FF}').contains(&c))
}

/// Stems one lower-cased token: Russian Snowball for Cyrillic, English Snowball for Latin,
/// numbers and mixed alphanumerics unchanged.
pub(crate) fn stem(token: &str) -> String {
    if token.chars().any(|c| c.is_ascii_digit()) {
        return token.to_string();
    }
    if is_cyrillic(token) {
        russian().stem(token).into_owned()
    } else {
        english().stem(token).into_owned()
    }
}

/// Russian and English function words (pronouns, prepositions, conjunctions, particles,
/// auxiliaries, question words): they carry no topic, and in BM25 a single «на» or «как» matching
/// a short record let it outrank the best dense match. Compared after lower-casing and ё→е.
const STOPWORDS: &[&str] = &[
    // Russian
    "а",
    "без",
    "более",
    "бы",
    "был",
    "была",
    "были",
    "было",
    "быть",
    "в",
    "вам",
    "вас",
    "весь",
    "во",
    "вот",
    "все",
    "всего",
    "всех",
    "вы",
    "где",
    "да",
    "даже",
    "для",
    "до",
    "его",
    "ее",
    "ей",
    "ему",
    "если",
    "есть",
    "еще",
    "же",
    "за",
    "здесь",
    "и",
    "из",
    "или",
    "им",
    "их",
    "к",
    "как",
    "какая",
    "какие",
    "каким",
    "какой",
    "когда",
    "кто",
    "куда",
    "ли",
    "либо",
    "мне",
    "может",
    "можно",
    "мой",
    "моя",
    "мы",
    "на",
    "над",
    "надо",
    "наш",
    "не",
    "него",
    "нее",
    "нет",
    "ни",
    "них",
    "но",
    "ну",
    "о",
    "об",
    "однако",
    "он",
    "она",
    "они",
    "оно",
    "от",
    "очень",
    "по",
    "под",
    "при",
    "с",
    "со",
    "так",
    "также",
    "такой",
    "там",
    "те",
    "тем",
    "то",
    "того",
    "тоже",
    "той",
    "только",
    "том",
    "ты",
    "у",
    "уже",
    "хотя",
    "чего",
    "чей",
    "чем",
    "что",
    "чтобы",
    "чье",
    "чья",
    "эта",
    "эти",
    "это",
    "этот",
    "я",
    "почему",
    "зачем",
    "меня",
    "мою",
    "мои",
    "моем",
    "свой",
    "свою",
    "себя",
    "сейчас",
    "вообще",
    "просто",
    "пожалуйста",
    // English
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "but",
    "by",
    "can",
    "do",
    "does",
    "for",
    "from",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "me",
    "my",
    "of",
    "on",
    "or",
    "should",
    "so",
    "that",
    "the",
    "their",
    "then",
    "there",
    "these",
    "this",
    "to",
    "was",
    "we",
    "what",
    "when",
    "where",
    "which",
    "who",
    "why",
    "will",
    "with",
    "you",
    "your",
];

/// True for a lower-cased token that is a Russian or English function word.
pub(crate) fn is_stopword(token: &str) -> bool {
    static SET: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOPWORDS.iter().copied().collect()).contains(token)
}

/// Tokenizes and stems `text` without function words: the terms the lexical index and the
/// pseudo-embedder work on.
pub fn terms(text: &str) -> Vec<String> {
    tokenize(text).iter().filter_map(|token| term_of(token)).collect()
}

/// A token's term: its stem, `None` for a function word.
fn term_of(token: &str) -> Option<String> {
    (!is_stopword(token)).then(|| stem(token))
}

/// `terms` for bulk work (an index build), remembering each distinct token's term: the same words
/// recur in every record, and stemming is most of the cost of a build's tokenizing. Owned by one
/// build and dropped with it; past `MAX_REMEMBERED` tokens it stems without remembering more.
/// Terms are numbered as they are met (`term_numbers`, `name`), so that a build need not make a
/// `String` for every term of every record; the numbers are this memo's own. A build replaces a
/// memo that is `full` between batches, so a text of endless distinct words (ids, hashes) cannot
/// grow it without bound.
#[derive(Debug, Default)]
pub(crate) struct TermMemo {
    /// Token → its term's number (`None`: a function word).
    tokens: rustc_hash::FxHashMap<String, Option<u32>>,
    /// Term → its number: the distinct terms met (the vocabulary, which the index holds anyway).
    numbers: rustc_hash::FxHashMap<String, u32>,
    /// Number → term.
    names: Vec<String>,
}

impl TermMemo {
    const MAX_REMEMBERED: usize = 1 << 18;

    /// The numbers of the terms of `text` (those of `terms(text)`, in order), appended to `out`.
    pub(crate) fn term_numbers(&mut self, text: &str, out: &mut Vec<u32>) {
        for_each_token(text, |token| {
            if let Some(number) = self.tokens.get(token) {
                out.extend(*number);
                return;
            }
            let number = term_of(token).map(|term| self.number(term));
            out.extend(number);
            if self.tokens.len() < Self::MAX_REMEMBERED {
                self.tokens.insert(token.to_string(), number);
            }
        });
    }

    /// Whether the memo has numbered `MAX_REMEMBERED` terms or more.
    pub(crate) fn full(&self) -> bool {
        self.names.len() >= Self::MAX_REMEMBERED
    }

    /// Term number `number`'s text.
    pub(crate) fn name(&self, number: u32) -> &str {
        &self.names[number as usize]
    }

    fn number(&mut self, term: String) -> u32 {
        if let Some(&number) = self.numbers.get(&term) {
            return number;
        }
        let number = self.names.len() as u32;
        self.names.push(term.clone());
        self.numbers.insert(term, number);
        number
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_case_and_yo() {
        assert_eq!(tokenize("Ёлка, HTTPS и Android 14!"), vec!["елка", "https", "и", "android", "14"]);
    }

    #[test]
    fn russian_inflections_share_a_stem() {
        assert_eq!(stem("андроиде"), stem("андроид"));
        assert_eq!(stem("сертификата"), stem("сертификат"));
        assert_eq!(stem("installing"), stem("install"));
    }

    #[test]
    fn function_words_are_not_terms() {
        assert_eq!(terms("где скачать программу на iPhone"), vec![stem("скачать"), stem("программу"), stem("iphone")]);
        assert!(terms("как это и что").is_empty());
    }

    #[test]
    fn the_fast_letters_fold_as_the_unicode_rules_do() {
        // Every character the fast path takes is classed and lower-cased as the general rules do.
        let general = |ch: char| -> Option<String> {
            ch.is_alphanumeric().then(|| ch.to_lowercase().map(|c| if c == 'ё' { 'е' } else { c }).collect())
        };
        for ch in (0u32..0x500).filter_map(char::from_u32) {
            let fast = match fold(ch) {
                Folded::Break => None,
                Folded::One(lower) => Some(lower.to_string()),
                Folded::Other => general(ch),
            };
            assert_eq!(fast, general(ch), "{ch:?} (U+{:04X})", ch as u32);
        }
        assert_eq!(tokenize("ÄÖ straße İx ǅ Ωμέγα ①"), vec!["äö", "straße", "i̇x", "ǆ", "ωμέγα", "①"]);
    }

    #[test]
    fn the_memo_gives_the_terms_of_every_text() {
        let mut memo = TermMemo::default();
        for text in
            ["Как установить AdGuard на Android 14?", "установка и настройка", "Ёлка: HTTPS, v2.1", "ПК на Windows"]
        {
            // Twice: the second time every token comes from the memo.
            for _ in 0..2 {
                let mut numbers = Vec::new();
                memo.term_numbers(text, &mut numbers);
                let named: Vec<&str> = numbers.iter().map(|&number| memo.name(number)).collect();
                assert_eq!(named, terms(text), "{text}");
            }
        }
    }

    #[test]
    fn numbers_stay_whole() {
        assert_eq!(terms("версия 14.2"), vec![stem("версия"), "14".to_string(), "2".to_string()]);
    }
}
