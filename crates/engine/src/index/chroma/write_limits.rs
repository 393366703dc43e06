//! How a Chroma server takes writes: the batch size and the embedding encoding its pre-flight
//! checks allow.

use super::wire::{self, EmbeddingEncoding};

/// Records per upsert request at most: ~2.1 MB of base64 vectors at 384-d, far below Chroma's
/// 40 MB body cap. A server announcing a smaller `max_batch_size` lowers it.
pub(crate) const UPSERT_BATCH_SIZE: usize = 1000;

/// How this server takes writes, from its pre-flight checks (asked once per index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WriteLimits {
    pub(crate) batch_size: usize,
    pub(crate) encoding: EmbeddingEncoding,
}

impl WriteLimits {
    pub(super) fn from_checks(checks: &wire::PreFlightChecks) -> Self {
        let batch_size = checks
            .max_batch_size
            .filter(|&size| size > 0)
            .map_or(UPSERT_BATCH_SIZE, |size| size.min(UPSERT_BATCH_SIZE));
        let encoding =
            if checks.supports_base64_encoding { EmbeddingEncoding::Base64 } else { EmbeddingEncoding::Floats };
        Self { batch_size, encoding }
    }
}
