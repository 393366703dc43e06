//! The change log that makes replica refreshes incremental.
//!
//! Every write through this service (upsert, delete, tenant replacement) appends one entry per
//! tenant it touched to the `{collection}_changes` collection, then bumps the docs collection's
//! `index_version` marker to the same version. An entry names the tenant and what changed: a set
//! of doc ids, or the whole tenant. Entries are records of their own (id `<version>/<tenant>`),
//! so concurrent writers never overwrite each other's, unlike a read-modify-write of collection
//! metadata.
//!
//! A replica polls the entries written since its last poll (with a look-back, so an entry that
//! became visible late is still seen), re-reads only the records of the changed docs of the
//! changed tenants, and swaps only those tenants' parts. Entries older than `RETENTION_MS` are
//! pruned by writers; a replica that could not poll for longer than half of that reloads in full.
//! A version marker no entry explains (a writer that failed to log, or a tool writing to Chroma
//! directly) also means a full reload, as do changed counts without any entry.

use serde_json::{json, Map, Value};

/// The one-dimensional embedding every entry carries (Chroma stores no record without one).
const ENTRY_EMBEDDING: [f32; 1] = [1.0];

/// Entries newer than the newest seen minus this are polled again: an entry written with an
/// older clock reading, or made visible late, is not missed.
pub(crate) const LOOKBACK_MS: i64 = 60_000;

/// Writers delete entries older than this.
pub(crate) const RETENTION_MS: i64 = 3_600_000;

/// A replica (or a local copy of one) last confirmed current longer ago than this cannot trust
/// the log to hold every change it missed: it is reloaded in full.
pub(crate) const TRUSTED_GAP_MS: i64 = RETENTION_MS / 2;

/// Ids per `$in` condition when a delta is fetched.
pub(crate) const IDS_PER_FETCH: usize = 500;

pub use crate::index::change::ChangeScope;

/// One entry of the change log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChangeEntry {
    pub(crate) id: String,
    pub(crate) tenant_id: String,
    /// The write's version marker (the docs collection's `index_version` after it).
    pub(crate) version: String,
    /// Milliseconds since the epoch when the entry was written (the writer's clock).
    pub(crate) at_ms: i64,
    pub(crate) scope: ChangeScope,
}

/// The upsert body for the entries of one write.
pub(crate) fn entries_body(version: &str, at_ms: i64, changes: &[(String, ChangeScope)]) -> Value {
    let ids: Vec<String> = changes.iter().map(|(tenant, _)| format!("{version}/{tenant}")).collect();
    let metadatas: Vec<Value> =
        changes.iter().map(|(tenant, _)| json!({"tenant_id": tenant, "version": version, "at_ms": at_ms})).collect();
    let documents: Vec<String> = changes
        .iter()
        .map(|(_, scope)| match scope {
            ChangeScope::Docs(docs) => json!({ "docs": docs }).to_string(),
            ChangeScope::Tenant => json!({"tenant": true}).to_string(),
        })
        .collect();
    let embeddings = vec![ENTRY_EMBEDDING; ids.len()];
    json!({"ids": ids, "embeddings": embeddings, "metadatas": metadatas, "documents": documents})
}

/// One entry from Chroma's `get` columns; `None` when it is not one this service wrote (a
/// malformed entry is then handled as a change nobody explains: a full reload).
pub(crate) fn parse_entry(
    id: String,
    metadata: Option<Map<String, Value>>,
    document: Option<String>,
) -> Option<ChangeEntry> {
    let metadata = metadata?;
    let tenant_id = metadata.get("tenant_id")?.as_str()?.to_string();
    let version = metadata.get("version")?.as_str()?.to_string();
    let at_ms = metadata.get("at_ms")?.as_i64()?;
    let document: Value = serde_json::from_str(&document?).ok()?;
    let scope = if document.get("tenant").and_then(Value::as_bool) == Some(true) {
        ChangeScope::Tenant
    } else {
        let docs = document.get("docs")?.as_array()?;
        ChangeScope::Docs(docs.iter().map(|doc| doc.as_str().map(str::to_string)).collect::<Option<_>>()?)
    };
    Some(ChangeEntry { id, tenant_id, version, at_ms, scope })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_their_stored_form() {
        let docs = ChangeScope::Docs(["a".to_string(), "b/c".to_string()].into());
        let changes = vec![("t1".to_string(), docs.clone()), ("t2".to_string(), ChangeScope::Tenant)];
        let body = entries_body("17-1-0", 17, &changes);
        let parsed: Vec<ChangeEntry> = (0..2)
            .map(|i| {
                parse_entry(
                    body["ids"][i].as_str().unwrap().to_string(),
                    body["metadatas"][i].as_object().cloned(),
                    body["documents"][i].as_str().map(str::to_string),
                )
                .unwrap()
            })
            .collect();
        assert_eq!(parsed[0].id, "17-1-0/t1");
        assert_eq!((parsed[0].tenant_id.as_str(), parsed[0].at_ms, &parsed[0].scope), ("t1", 17, &docs));
        assert_eq!((parsed[1].version.as_str(), &parsed[1].scope), ("17-1-0", &ChangeScope::Tenant));
        assert_eq!(parse_entry("x".into(), None, Some("{}".into())), None);
    }

    #[test]
    fn merging_doc_changes_unions_them_and_a_tenant_change_wins() {
        let a = ChangeScope::Docs(["a".to_string()].into());
        let b = ChangeScope::Docs(["b".to_string()].into());
        assert_eq!(a.clone().merge(b), ChangeScope::Docs(["a".to_string(), "b".to_string()].into()));
        assert_eq!(a.merge(ChangeScope::Tenant), ChangeScope::Tenant);
    }
}
