//! Chunking: token-bounded, overlapping windows over a section's words. Windows start and end on
//! word boundaries, prefer to end at a sentence or line end, and keep the original text between
//! their first and last word (line breaks, code indentation).

/// Window sizes, in estimated tokens (see `estimate_tokens`).
///
/// Defaults suit multilingual-e5-small (512 tokens including the `passage: ` prefix): 400
/// estimated tokens is roughly 230 Russian words, with 60 tokens (~35 words) of overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkingConfig {
    pub max_tokens: usize,
    pub overlap_tokens: usize,
    /// Headings of this level or shallower start a section (deeper ones stay in the text).
    pub max_section_level: usize,
}

impl Default for ChunkingConfig {
    fn default() -> Self {
        Self { max_tokens: 400, overlap_tokens: 60, max_section_level: super::markdown::DEFAULT_MAX_SECTION_LEVEL }
    }
}

/// A word-based estimate of subword tokens: short words are one token, longer ones one more per
/// six characters (XLM-R style vocabularies split long Russian words into 2–3 pieces).
pub(crate) fn estimate_tokens(word: &str) -> usize {
    1 + word.chars().count() / 6
}

/// Splits `text` into windows of at most `max_tokens` (a single longer word is its own window),
/// consecutive windows sharing up to `overlap_tokens` of words. Empty text gives no windows.
pub(crate) fn split_into_chunks(text: &str, config: &ChunkingConfig) -> Vec<String> {
    let words = word_spans(text);
    if words.is_empty() {
        return Vec::new();
    }
    let max_tokens = config.max_tokens.max(1);
    let overlap = config.overlap_tokens.min(max_tokens / 2);
    let tokens: Vec<usize> = words.iter().map(|&(start, end)| estimate_tokens(&text[start..end])).collect();
    let mut chunks = Vec::new();
    let mut start = 0;
    loop {
        let mut end = start;
        let mut budget = 0;
        while end < words.len() && (end == start || budget + tokens[end] <= max_tokens) {
            budget += tokens[end];
            end += 1;
        }
        if end < words.len() {
            let earliest = start + (end - start) * 6 / 10;
            if let Some(boundary) = (earliest.max(start + 1)..end).rev().find(|&i| ends_sentence(text, words[i])) {
                end = boundary + 1;
            }
        }
        chunks.push(text[words[start].0..words[end - 1].1].to_string());
        if end >= words.len() {
            break;
        }
        let mut next = end;
        let mut shared = 0;
        while next > start + 1 && shared + tokens[next - 1] <= overlap {
            shared += tokens[next - 1];
            next -= 1;
        }
        start = next;
    }
    chunks
}

fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (index, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                spans.push((s, index));
                start = None;
            }
            (false, None) => start = Some(index),
            (true, None) | (false, Some(_)) => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
}

fn ends_sentence(text: &str, (start, end): (usize, usize)) -> bool {
    text[start..end].ends_with(['.', '!', '?', ':', ';']) || text[end..].starts_with('\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<&str> {
        text.split_whitespace().collect()
    }

    fn sample(count: usize) -> String {
        (0..count)
            .map(|i| if i % 17 == 16 { format!("слово{i}.") } else { format!("слово{i}") })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn short_text_is_one_chunk_and_empty_is_none() {
        let config = ChunkingConfig::default();
        assert_eq!(split_into_chunks("  Короткий текст.\n", &config), vec!["Короткий текст.".to_string()]);
        assert!(split_into_chunks(" \n\t", &config).is_empty());
    }

    #[test]
    fn windows_respect_budget_never_split_words_and_overlap_in_order() {
        let config = ChunkingConfig { max_tokens: 40, overlap_tokens: 10, ..ChunkingConfig::default() };
        let text = sample(300);
        let chunks = split_into_chunks(&text, &config);
        assert!(chunks.len() > 5, "{}", chunks.len());
        let all = words(&text);
        let mut position = 0;
        let mut previous_first = 0;
        for (n, chunk) in chunks.iter().enumerate() {
            let chunk_words = words(chunk);
            assert!(chunk_words.iter().map(|w| estimate_tokens(w)).sum::<usize>() <= 40);
            let first = all.iter().position(|w| *w == chunk_words[0]).unwrap();
            assert_eq!(
                &all[first..first + chunk_words.len()],
                chunk_words.as_slice(),
                "chunk {n} is not a run of whole words"
            );
            if n > 0 {
                assert!(first < position, "chunk {n} does not overlap the previous one");
                assert!(first > previous_first, "chunk {n} goes backwards");
            }
            previous_first = first;
            position = first + chunk_words.len();
        }
        assert_eq!(position, all.len(), "the last chunk reaches the end");
    }

    #[test]
    fn prefers_sentence_ends_and_keeps_line_breaks() {
        let config = ChunkingConfig { max_tokens: 12, overlap_tokens: 0, ..ChunkingConfig::default() };
        let text = "Первое длинное предложение заканчивается тут. Второе предложение длиннее обычного текста здесь";
        let chunks = split_into_chunks(text, &config);
        assert!(chunks[0].ends_with("тут."), "{chunks:?}");
        let code = "fn main() {\n    println!(\"x\");\n}";
        assert_eq!(split_into_chunks(code, &ChunkingConfig::default()), vec![code.to_string()]);
    }

    #[test]
    fn a_giant_word_is_its_own_window() {
        let config = ChunkingConfig { max_tokens: 3, overlap_tokens: 1, ..ChunkingConfig::default() };
        let giant = "ы".repeat(100);
        let chunks = split_into_chunks(&format!("а {giant} б"), &config);
        assert!(chunks.contains(&giant), "{chunks:?}");
    }
}
