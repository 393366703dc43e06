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
    let mut current = String::new();
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            for lower in ch.to_lowercase() {
                current.push(if lower == 'ё' { 'е' } else { lower });
            }
        } else if !current.is_empty() {
            tokens.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
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
    tokenize(text).iter().filter(|token| !is_stopword(token)).map(|token| stem(token)).collect()
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
    fn numbers_stay_whole() {
        assert_eq!(terms("версия 14.2"), vec![stem("версия"), "14".to_string(), "2".to_string()]);
    }
}
