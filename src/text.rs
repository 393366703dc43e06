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
pub fn tokenize(text: &str) -> Vec<String> {
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
pub fn stem(token: &str) -> String {
    if token.chars().any(|c| c.is_ascii_digit()) {
        return token.to_string();
    }
    if is_cyrillic(token) {
        russian().stem(token).into_owned()
    } else {
        english().stem(token).into_owned()
    }
}

/// Tokenizes and stems `text`: the terms the lexical index and the pseudo-embedder work on.
pub fn terms(text: &str) -> Vec<String> {
    tokenize(text).iter().map(|token| stem(token)).collect()
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
    fn numbers_stay_whole() {
        assert_eq!(terms("версия 14.2"), vec![stem("версия"), "14".to_string(), "2".to_string()]);
    }
}
