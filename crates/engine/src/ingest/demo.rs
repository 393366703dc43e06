//! The bundled demo corpus: the pages under `demo/<tenant>/` compiled into the binary and turned
//! into a snapshot by the same parsing, mapping and splitting code as `ingest`. Each tenant's
//! folder is one source named after the tenant, so the ids equal those of
//! `retrieval-service ingest demo/<tenant> --tenant <tenant>`.

use super::embedding::{embed_records, EmbedPlan};
use super::mapping::MappingRules;
use super::records::rfc3339_now;
use super::split::ChunkingConfig;
use super::tree::{page_to_doc, LoadOptions};
use super::writer::{merge_snapshot, IngestBatch, SourceScope};
use super::{build_record_set, cache::EmbeddingCache, IngestError};
use crate::embed::Embedder;
use crate::model::Snapshot;

macro_rules! demo_pages {
    ($(($tenant:literal, $path:literal)),* $(,)?) => {
        /// (tenant, path relative to `demo/<tenant>/`, content) of every demo page.
        pub const DEMO_PAGES: &[(&str, &str, &str)] = &[
            $(($tenant, $path, include_str!(concat!("../../../../demo/", $tenant, "/", $path)))),*
        ];
    };
}

demo_pages![
    ("demo", "docs/agent/chats.md"),
    ("demo", "docs/agent/quick-answers.md"),
    ("demo", "docs/agent/required-tags.md"),
    ("demo", "docs/agent/statuses.md"),
    ("demo", "docs/agent/client-card.md"),
    ("demo", "docs/supervisor/monitoring.md"),
    ("demo", "docs/supervisor/reports.md"),
    ("demo", "docs/supervisor/quality.md"),
    ("demo", "docs/admin/required-tags.md"),
    ("demo", "docs/admin/users.md"),
    ("demo", "docs/admin/channels.md"),
    ("demo", "docs/admin/routing.md"),
    ("demo", "docs/admin/working-hours.md"),
    ("demo", "docs/chat-bot/scenarios.md"),
    ("demo", "docs/api/rest-api.md"),
    ("demo", "docs/api/webhooks.md"),
    ("demo", "docs/faq/login-problems.md"),
    ("demo", "docs/faq/tags.md"),
    ("demo", "blog/release-5-2.md"),
    ("demo", "blog/release-5-3.md"),
    ("demo", "android/getting-started/installation.md"),
    ("demo", "android/push-notifications.md"),
    ("demo", "android/troubleshooting/build-errors.md"),
    ("demo", "ios/getting-started/installation.md"),
    ("demo", "ios/push-notifications.md"),
    ("demo", "web/installation.md"),
    ("acme", "guide/installation.md"),
    ("acme", "guide/inventory.md"),
    ("acme", "guide/product-labels.md"),
    ("acme", "guide/shipping.md"),
    ("acme", "admin/users.md"),
    ("acme", "faq/common.md"),
    ("acme", "api/integration.md"),
];

/// Builds the demo snapshot (tenants `demo` and `acme`) with `mapping`, embedding every record
/// through `embedder` as passages.
pub async fn demo_snapshot(embedder: &dyn Embedder, mapping: &MappingRules) -> Result<Snapshot, IngestError> {
    let chunking = ChunkingConfig::default();
    let indexed_at = rfc3339_now();
    let mut tenants: Vec<&str> = DEMO_PAGES.iter().map(|(tenant, _, _)| *tenant).collect();
    tenants.dedup();
    let mut snapshot = None;
    for tenant in tenants {
        let options =
            LoadOptions { source_name: tenant, base_url: "", product: "", version: "", tags: &[], mapping, chunking };
        let mut docs = Vec::new();
        for (_, path, content) in DEMO_PAGES.iter().filter(|(t, _, _)| *t == tenant) {
            let (doc, warnings) = page_to_doc(path, content, &options)
                .map_err(|reason| IngestError::Input { path: format!("demo/{tenant}/{path}"), message: reason })?;
            if let Some(warning) = warnings.first() {
                return Err(IngestError::Input { path: format!("demo/{tenant}/{path}"), message: warning.clone() });
            }
            docs.push(doc);
        }
        let mut records = build_record_set(tenant, &docs, &chunking, &indexed_at);
        let mut cache = EmbeddingCache::in_memory();
        embed_records(embedder, &mut records, EmbedPlan { batch_size: 64, concurrency: 1 }, &mut cache, &mut |_, _| {})
            .await?;
        let dimension = records.docs.first().map(|r| r.embedding.len()).unwrap_or(0);
        let batch = IngestBatch {
            records,
            embedding_model: embedder.model_name().to_string(),
            dimension,
            indexed_at: indexed_at.clone(),
            kept_pages: Default::default(),
        };
        let scope = SourceScope { tenant_id: tenant.to_string(), source_name: tenant.to_string() };
        snapshot = Some(merge_snapshot(snapshot, &scope, batch)?.0);
    }
    snapshot.ok_or_else(|| IngestError::Internal("the demo corpus is empty".to_string()))
}
