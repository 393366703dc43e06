//! SHA256 pseudo-embeddings: a deterministic stand-in (same text, same vector) when no embedding
//! provider is configured or the provider is down.
//!
//! Each stemmed term is hashed with SHA256 into a few signed buckets (feature hashing), so texts
//! that share words get similar vectors: ranking is lexical-quality, never random, and the same
//! text always yields the same vector on every machine.

use super::{Embedder, InputKind, Result};
use async_trait::async_trait;
use sha2::{Digest, Sha256};

const BUCKETS_PER_TERM: usize = 4;

#[derive(Debug, Clone)]
pub struct PseudoEmbedder {
    dimension: usize,
}

impl PseudoEmbedder {
    pub(crate) const MODEL_NAME: &'static str = "pseudo-sha256";

    pub fn new(dimension: usize) -> Self {
        Self { dimension: dimension.max(1) }
    }

    pub(crate) fn dimension(&self) -> usize {
        self.dimension
    }

    /// Embeds one text; an empty or symbol-only text gets the zero vector.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0f32; self.dimension];
        for term in crate::text::terms(text) {
            let digest = Sha256::digest(term.as_bytes());
            for bucket in 0..BUCKETS_PER_TERM {
                let bytes = &digest[bucket * 4..bucket * 4 + 4];
                let value = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                let index = (value >> 1) as usize % self.dimension;
                let sign = if value & 1 == 0 { 1.0 } else { -1.0 };
                vector[index] += sign;
            }
        }
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|v| *v /= norm);
        }
        vector
    }
}

#[async_trait]
impl Embedder for PseudoEmbedder {
    async fn embed(&self, texts: &[String], _kind: InputKind) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|text| self.embed_one(text)).collect())
    }

    fn model_name(&self) -> &str {
        Self::MODEL_NAME
    }

    fn is_pseudo(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn deterministic_and_normalised() {
        let embedder = PseudoEmbedder::new(384);
        let first = embedder.embed_one("Как установить сертификат?");
        assert_eq!(first, embedder.embed_one("Как установить сертификат?"));
        let norm: f32 = first.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }

    #[test]
    fn shared_words_score_higher_than_unrelated_text() {
        let embedder = PseudoEmbedder::new(384);
        let query = embedder.embed_one("установка сертификата на андроиде");
        let related = embedder.embed_one("Установите сертификат на Android-устройстве: установка вручную");
        let unrelated = embedder.embed_one("Отчёты супервизора по времени ответа операторов");
        assert!(cosine(&query, &related) > cosine(&query, &unrelated));
    }

    #[test]
    fn empty_text_is_zero_vector() {
        assert!(PseudoEmbedder::new(8).embed_one("  !! ").iter().all(|v| *v == 0.0));
    }
}
