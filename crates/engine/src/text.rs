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

/// Calls `each` with every token of `text` in order, as `tokenize` returns them. A token that is
/// lower case already (most words) is handed over as a slice of `text`; the others are folded into
/// one reused buffer.
pub(crate) fn for_each_token(text: &str, mut each: impl FnMut(&str)) {
    for_each_token_at(text, |token, _| each(token));
}

/// `for_each_token`, with the byte of `text` where each token starts.
#[inline(always)]
fn for_each_token_at(text: &str, mut each: impl FnMut(&str, usize)) {
    let mut folded = String::new();
    let mut token = |token: &str, start: usize, plain: bool| {
        if plain {
            each(token, start);
        } else {
            folded.clear();
            fold_into(token, &mut folded);
            each(&folded, start);
        }
    };
    // The token read so far is `text[start..at]`; `plain` while all its characters are.
    let (mut start, mut at, mut plain) = (0, 0, true);
    while at < text.len() {
        let (kind, length) = kind_at(text, at);
        if kind == Kind::Break {
            if let Some(read) = text.get(start..at).filter(|read| !read.is_empty()) {
                token(read, start, plain);
            }
            (start, plain) = (at + length, true);
        } else {
            plain &= kind == Kind::Plain;
        }
        at += length;
    }
    if let Some(read) = text.get(start..).filter(|read| !read.is_empty()) {
        token(read, start, plain);
    }
}

/// Whether byte `at` of `text` (a character boundary) is not inside a token: the text's tokens
/// from `at` on are then those of `text[at..]`, and those before it those of `text[..at]`.
pub(crate) fn between_tokens(text: &str, at: usize) -> bool {
    if at == 0 || at >= text.len() {
        return true;
    }
    let Some(before) = text.get(..at).and_then(|before| before.char_indices().next_back()) else {
        return false;
    };
    kind_at(text, before.0).0 == Kind::Break || kind_at(text, at).0 == Kind::Break
}

/// What the character at byte `at` (a character boundary) of a text is to its token.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Not alphanumeric: it ends the token, and is not in one.
    Break,
    /// A token's character that is its own lower case (ASCII small letters and digits, `а`–`я`).
    Plain,
    /// A token's character that lower-casing or `ё` folding changes (or may: any other letter).
    Fold,
}

/// The kind of the character at byte `at` of `text` and its length in bytes, read from its bytes
/// for ASCII and the basic Cyrillic letters, which make nearly all the text here.
#[inline(always)]
fn kind_at(text: &str, at: usize) -> (Kind, usize) {
    let bytes = text.as_bytes();
    match (bytes[at], bytes.get(at + 1).copied().unwrap_or(0)) {
        (b'a'..=b'z' | b'0'..=b'9', _) => (Kind::Plain, 1),
        (b'A'..=b'Z', _) => (Kind::Fold, 1),
        (0..=0x7f, _) => (Kind::Break, 1),
        // а–п and р–я; А–Я, Ё and ё.
        (0xd0, 0xb0..=0xbf) | (0xd1, 0x80..=0x8f) => (Kind::Plain, 2),
        (0xd0, 0x81 | 0x90..=0xaf) | (0xd1, 0x91) => (Kind::Fold, 2),
        _ => match text.get(at..).and_then(|rest| rest.chars().next()) {
            Some(ch) if ch.is_alphanumeric() => (Kind::Fold, ch.len_utf8()),
            Some(ch) => (Kind::Break, ch.len_utf8()),
            None => (Kind::Break, 1),
        },
    }
}

/// `token` (alphanumeric characters only) lower-cased with `ё` folded to `е`, appended to `out`.
fn fold_into(token: &str, out: &mut String) {
    for ch in token.chars() {
        match fold(ch) {
            Folded::One(lower) => out.push(lower),
            Folded::Other | Folded::Break => {
                for lower in ch.to_lowercase() {
                    out.push(if lower == 'ё' { 'е' } else { lower });
                }
            }
        }
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
        for_each_token(text, |token| out.extend(self.token_number(token)));
    }

    /// `term_numbers`, each number with the byte of `text` where its token starts.
    pub(crate) fn term_numbers_at(&mut self, text: &str, out: &mut Vec<(u32, u32)>) {
        for_each_token_at(text, |token, start| {
            out.extend(self.token_number(token).map(|number| (number, start as u32)));
        });
    }

    /// The number of `token`'s term (`None`: a function word), remembered.
    #[inline(always)]
    fn token_number(&mut self, token: &str) -> Option<u32> {
        if let Some(number) = self.tokens.get(token) {
            return *number;
        }
        let number = term_of(token).map(|term| self.number(term));
        if self.tokens.len() < Self::MAX_REMEMBERED {
            self.tokens.insert(token.to_string(), number);
        }
        number
    }

    /// Whether the memo has numbered `MAX_REMEMBERED` terms or more.
    pub(crate) fn full(&self) -> bool {
        self.names.len() >= Self::MAX_REMEMBERED
    }

    /// The terms numbered `from` on, by number.
    pub(crate) fn names_from(&self, from: usize) -> &[String] {
        self.names.get(from..).unwrap_or_default()
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
    fn tokens_are_those_of_folding_every_character_in_turn() {
        // The character-by-character definition: each alphanumeric character lower-cased (ё → е)
        // and added to the token, anything else ending it.
        fn by_characters(text: &str) -> Vec<String> {
            let (mut tokens, mut current) = (Vec::new(), String::new());
            for ch in text.chars() {
                if ch.is_alphanumeric() {
                    current.extend(ch.to_lowercase().map(|c| if c == 'ё' { 'е' } else { c }));
                } else if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
            }
            tokens.extend((!current.is_empty()).then_some(current));
            tokens
        }
        // Both cases of Latin and Cyrillic, the letters next to the basic Cyrillic block (Ѐ ѐ Ђ ђ),
        // ё and Ё, digits, punctuation, and other scripts, marks and symbols.
        let alphabet: Vec<char> = "aZz09 .-_/\tаАпПрРяЯёЁЀѐЂђӀӁ Ωμέİıǅ①½é\u{301}€😀中".chars().collect();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            let text: String = (0..(state % 24) as usize)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            assert_eq!(tokenize(&text), by_characters(&text), "{text:?}");
        }
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
