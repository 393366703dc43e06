//! BM25 over stemmed terms (Robertson & Zaragoza, "The Probabilistic Relevance Framework:
//! BM25 and Beyond", 2009), one index per tenant and level so that statistics never mix tenants.

use std::collections::HashMap;

/// Term-frequency saturation and length normalisation: the customary defaults, which are also
/// the reference BM25 of ../shared/eval (k1 = 1.2, b = 0.75).
#[derive(Debug, Clone, Copy)]
pub struct Bm25Params {
    pub k1: f32,
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

/// An inverted index over a fixed list of documents numbered 0..n.
#[derive(Debug, Default)]
pub struct Bm25Index {
    postings: HashMap<String, Vec<(u32, u32)>>,
    lengths: Vec<u32>,
    average_length: f32,
    params: Bm25Params,
}

impl Bm25Index {
    /// Builds the index from each document's terms (already tokenized and stemmed).
    pub fn build(documents: impl IntoIterator<Item = Vec<String>>, params: Bm25Params) -> Self {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::new();
        for (number, terms) in documents.into_iter().enumerate() {
            lengths.push(terms.len() as u32);
            let mut counts: HashMap<String, u32> = HashMap::new();
            for term in terms {
                *counts.entry(term).or_default() += 1;
            }
            for (term, count) in counts {
                postings.entry(term).or_default().push((number as u32, count));
            }
        }
        let total: u64 = lengths.iter().map(|&l| l as u64).sum();
        let average_length = if lengths.is_empty() { 0.0 } else { total as f32 / lengths.len() as f32 };
        Self { postings, lengths, average_length, params }
    }

    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// Scores every document that contains at least one query term and passes `accept`;
    /// returns (document number, score) pairs with score > 0, unsorted.
    pub fn score(&self, query_terms: &[String], accept: impl Fn(usize) -> bool) -> Vec<(usize, f32)> {
        let total_documents = self.lengths.len() as f32;
        let mut unique_terms: Vec<&String> = query_terms.iter().collect();
        unique_terms.sort();
        unique_terms.dedup();
        // Dense per-document arrays: postings of common words are long, and a hash map per
        // posting was the hot spot of a search.
        let mut scores: Vec<f32> = Vec::new();
        let mut verdicts: Vec<u8> = Vec::new();
        const UNKNOWN: u8 = 0;
        const ACCEPTED: u8 = 1;
        const REJECTED: u8 = 2;
        for term in unique_terms {
            let Some(posting) = self.postings.get(term.as_str()) else { continue };
            if scores.is_empty() {
                scores = vec![0.0; self.lengths.len()];
                verdicts = vec![UNKNOWN; self.lengths.len()];
            }
            let document_frequency = posting.len() as f32;
            // The "plus one" IDF of Lucene keeps weights positive for very common terms.
            let idf = (1.0 + (total_documents - document_frequency + 0.5) / (document_frequency + 0.5)).ln();
            for &(number, frequency) in posting {
                let number = number as usize;
                if verdicts[number] == UNKNOWN {
                    verdicts[number] = if accept(number) { ACCEPTED } else { REJECTED };
                }
                if verdicts[number] == REJECTED {
                    continue;
                }
                let length = self.lengths[number] as f32;
                let norm = if self.average_length > 0.0 { length / self.average_length } else { 1.0 };
                let tf = frequency as f32;
                scores[number] += idf * tf * (self.params.k1 + 1.0)
                    / (tf + self.params.k1 * (1.0 - self.params.b + self.params.b * norm));
            }
        }
        scores.into_iter().enumerate().filter(|(_, score)| *score > 0.0).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::terms;

    fn index(texts: &[&str]) -> Bm25Index {
        Bm25Index::build(texts.iter().map(|t| terms(t)), Bm25Params::default())
    }

    #[test]
    fn matching_document_outranks_others_and_morphology_counts() {
        let idx = index(&["установка сертификата на андроиде", "отчёты супервизора", "сертификат iOS"]);
        let mut scores = idx.score(&terms("сертификат андроид"), |_| true);
        scores.sort_by(|a, b| b.1.total_cmp(&a.1));
        assert_eq!(scores[0].0, 0);
        assert_eq!(scores.len(), 2);
    }

    #[test]
    fn accept_excludes_documents() {
        let idx = index(&["alpha beta", "alpha"]);
        let scores = idx.score(&terms("alpha"), |n| n == 1);
        assert_eq!(scores.len(), 1);
        assert_eq!(scores[0].0, 1);
    }

    #[test]
    fn no_terms_no_scores() {
        assert!(index(&["alpha"]).score(&[], |_| true).is_empty());
        assert!(Bm25Index::default().score(&terms("alpha"), |_| true).is_empty());
    }
}
