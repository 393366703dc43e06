//! Chroma's wire format: record ids, flat metadata, base64 embeddings, `where` clauses and the
//! response bodies of the v2 API. Private to the Chroma backend.

use super::manifest;
use crate::index::{IndexError, IndexErrorKind, RecordFilter, Result, ScoredRecord};
use crate::model::{Metadata, Record};
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Separates the tenant from the record id in a Chroma id: record ids are unique per tenant only,
/// Chroma ids per collection.
const TENANT_SEPARATOR: &str = "::";

/// The Chroma id of a record: `{tenant_id}::{id}`.
pub(crate) fn chroma_id(tenant_id: &str, record_id: &str) -> String {
    format!("{tenant_id}{TENANT_SEPARATOR}{record_id}")
}

/// The record id behind a Chroma id; ids written by other tools (no tenant prefix) are kept as is.
pub(crate) fn record_id(chroma_id: &str, tenant_id: &str) -> String {
    chroma_id
        .strip_prefix(tenant_id)
        .and_then(|rest| rest.strip_prefix(TENANT_SEPARATOR))
        .unwrap_or(chroma_id)
        .to_string()
}

/// Flat Chroma metadata of a record. Chroma rejects `null` and drops empty arrays, so absent
/// optional ids and empty lists are omitted, and so are empty strings (every metadata key costs
/// Chroma an inverted-index entry on write); `metadata_from_chroma` restores them as empty.
pub(crate) fn metadata_to_chroma(meta: &Metadata) -> Result<Map<String, Value>> {
    let value = serde_json::to_value(meta)
        .map_err(|error| IndexError::new(IndexErrorKind::Internal, format!("metadata not serializable: {error}")))?;
    let Value::Object(mut map) = value else {
        return Err(IndexError::new(IndexErrorKind::Internal, "metadata did not serialize to an object"));
    };
    map.retain(|_, value| match value {
        Value::Null => false,
        Value::Array(items) => !items.is_empty(),
        Value::String(text) => !text.is_empty(),
        Value::Bool(_) | Value::Number(_) | Value::Object(_) => true,
    });
    Ok(map)
}

pub(crate) fn metadata_from_chroma(map: Map<String, Value>) -> Result<Metadata> {
    serde_json::from_value(Value::Object(map))
        .map_err(|error| IndexError::new(IndexErrorKind::Corrupt, format!("unreadable chroma metadata: {error}")))
}

/// Little-endian f32 bytes in base64, the compact embedding form Chroma accepts on add/upsert.
pub(crate) fn encode_embedding(embedding: &[f32]) -> String {
    let bytes: Vec<u8> = embedding.iter().flat_map(|value| value.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// How embeddings travel in an `upsert` body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EmbeddingEncoding {
    /// Base64 strings of little-endian f32: about 4× smaller than JSON floats and cheaper to parse.
    Base64,
    /// JSON arrays of floats, for a server that does not announce base64 support.
    Floats,
}

/// What makes written records versioned (`manifest`): the source they are staged for and the
/// hash of each doc's page.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Versioned<'a> {
    pub(crate) source: &'a str,
    pub(crate) page_hashes: &'a BTreeMap<String, String>,
}

/// The `upsert` body of a batch of records; `versioned` records get their page hash in their id
/// and metadata.
pub(crate) fn upsert_body(
    records: &[Record],
    encoding: EmbeddingEncoding,
    versioned: Option<Versioned<'_>>,
) -> Result<Value> {
    let mut ids = Vec::with_capacity(records.len());
    let mut embeddings = Vec::with_capacity(records.len());
    let mut documents = Vec::with_capacity(records.len());
    let mut metadatas = Vec::with_capacity(records.len());
    for record in records {
        let mut metadata = metadata_to_chroma(&record.meta)?;
        let mut id = chroma_id(&record.meta.tenant_id, &record.id);
        if let Some(versioned) = versioned {
            let hash = versioned.page_hashes.get(record.meta.doc_id.as_str()).ok_or_else(|| {
                IndexError::new(IndexErrorKind::Internal, format!("no page hash for doc {:?}", record.meta.doc_id))
            })?;
            id = format!("{id}{}{hash}", manifest::HASH_SEPARATOR);
            metadata.insert(manifest::PAGE_HASH_KEY.into(), Value::from(hash.as_str()));
            metadata.insert(manifest::INGEST_SOURCE_KEY.into(), Value::from(versioned.source));
        }
        ids.push(id);
        embeddings.push(match encoding {
            EmbeddingEncoding::Base64 => Value::from(encode_embedding(&record.embedding)),
            EmbeddingEncoding::Floats => json!(record.embedding),
        });
        documents.push(record.text.as_str());
        metadatas.push(metadata);
    }
    Ok(json!({"ids": ids, "embeddings": embeddings, "documents": documents, "metadatas": metadatas}))
}

/// `GET /api/v2/pre-flight-checks`: the server's write limits.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PreFlightChecks {
    /// Advisory upper bound of records per write request.
    #[serde(default)]
    pub(crate) max_batch_size: Option<usize>,
    #[serde(default)]
    pub(crate) supports_base64_encoding: bool,
}

/// The `where` clause equivalent to `RecordFilter::matches`, always wrapped in `$and` (Chroma
/// rejects two keys at the top level). `None` when the filter can match nothing (an empty id
/// list), which Chroma cannot express (`$in: []` is a 400), and when it carries a metadata
/// `condition`, which is checked on the replica only: never translated, so never widened.
pub(crate) fn where_clause(filter: &RecordFilter) -> Option<Value> {
    if filter.condition.is_some() {
        return None;
    }
    let mut conditions = vec![json!({"tenant_id": {"$eq": filter.tenant_id}})];
    let equalities = [
        ("product", &filter.product),
        ("version", &filter.version),
        ("domain", &filter.domain),
        ("section", &filter.section),
        ("platform", &filter.platform),
        ("role", &filter.role),
    ];
    for (key, wanted) in equalities {
        if let Some(wanted) = wanted {
            conditions.push(json!({ key: {"$eq": wanted} }));
        }
    }
    for tag in &filter.tags {
        conditions.push(json!({"tags": {"$contains": tag}}));
    }
    for (key, ids) in [("doc_id", &filter.doc_ids), ("section_id", &filter.section_ids)] {
        if let Some(ids) = ids {
            if ids.is_empty() {
                return None;
            }
            conditions.push(json!({ key: {"$in": ids} }));
        }
    }
    Some(json!({ "$and": conditions }))
}

/// One record's flat metadata as Chroma stores it.
pub(crate) type ChromaMetadata = Map<String, Value>;

/// `GET /collections/{name}` and the create call.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CollectionInfo {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) metadata: Option<Map<String, Value>>,
}

impl CollectionInfo {
    pub(crate) fn metadata_string(&self, key: &str) -> Option<&str> {
        self.metadata.as_ref()?.get(key)?.as_str()
    }
}

/// `POST …/get` with `include: [embeddings, metadatas, documents]`.
#[derive(Debug, Deserialize)]
pub(crate) struct GetResponse {
    pub(crate) ids: Vec<String>,
    #[serde(default)]
    pub(crate) embeddings: Option<Vec<Vec<f32>>>,
    #[serde(default)]
    pub(crate) documents: Option<Vec<Option<String>>>,
    #[serde(default)]
    pub(crate) metadatas: Option<Vec<Option<ChromaMetadata>>>,
}

/// A record as stored, with the page hash of a versioned record.
pub(crate) type StoredRecord = (Record, Option<String>);

impl GetResponse {
    /// The records of the page; every entry must carry metadata with a tenant and an embedding.
    pub(crate) fn into_records(self) -> Result<Vec<StoredRecord>> {
        let count = self.ids.len();
        let corrupt = |what: &str| IndexError::new(IndexErrorKind::Corrupt, format!("chroma get returned {what}"));
        let embeddings = self.embeddings.ok_or_else(|| corrupt("no embeddings"))?;
        let metadatas = self.metadatas.ok_or_else(|| corrupt("no metadatas"))?;
        let documents = self.documents.unwrap_or_default();
        if embeddings.len() != count || metadatas.len() != count {
            return Err(corrupt("lists of different lengths"));
        }
        let mut documents = documents.into_iter();
        self.ids
            .into_iter()
            .zip(embeddings)
            .zip(metadatas)
            .map(|((id, embedding), metadata)| {
                let metadata = metadata.unwrap_or_default();
                let page_hash = metadata.get(manifest::PAGE_HASH_KEY).and_then(Value::as_str).map(str::to_string);
                let meta = metadata_from_chroma(metadata)?;
                let text = documents.next().flatten().unwrap_or_default();
                let mut id = record_id(&id, &meta.tenant_id);
                if let Some(hash) = &page_hash {
                    if let Some(stripped) =
                        id.strip_suffix(hash.as_str()).and_then(|rest| rest.strip_suffix(manifest::HASH_SEPARATOR))
                    {
                        id = stripped.to_string();
                    }
                }
                Ok((Record { id, meta, text: text.into(), embedding }, page_hash))
            })
            .collect()
    }
}

impl GetResponse {
    /// The metadata of each record of the page (a `get` with `include: [metadatas]`).
    pub(crate) fn into_metadatas(self) -> Result<Vec<crate::model::Metadata>> {
        let metadatas = self
            .metadatas
            .ok_or_else(|| IndexError::new(IndexErrorKind::Corrupt, "chroma get returned no metadatas".to_string()))?;
        metadatas.into_iter().map(|metadata| metadata_from_chroma(metadata.unwrap_or_default())).collect()
    }
}

/// `POST …/query` for one query vector.
#[derive(Debug, Deserialize)]
pub(crate) struct QueryResponse {
    pub(crate) ids: Vec<Vec<String>>,
    #[serde(default)]
    pub(crate) distances: Option<Vec<Vec<Option<f32>>>>,
    #[serde(default)]
    pub(crate) documents: Option<Vec<Vec<Option<String>>>>,
    #[serde(default)]
    pub(crate) metadatas: Option<Vec<Vec<Option<ChromaMetadata>>>>,
}

/// The hits of a one-vector query as scored records (similarity = 1 − cosine distance), without
/// embeddings.
pub(crate) fn scored_records(response: QueryResponse) -> Result<Vec<ScoredRecord>> {
    let corrupt = |what: &str| IndexError::new(IndexErrorKind::Corrupt, format!("chroma query returned {what}"));
    let ids = response.ids.into_iter().next().unwrap_or_default();
    let distances =
        response.distances.and_then(|lists| lists.into_iter().next()).ok_or_else(|| corrupt("no distances"))?;
    let metadatas =
        response.metadatas.and_then(|lists| lists.into_iter().next()).ok_or_else(|| corrupt("no metadatas"))?;
    let documents = response.documents.and_then(|lists| lists.into_iter().next()).unwrap_or_default();
    if distances.len() != ids.len() || metadatas.len() != ids.len() {
        return Err(corrupt("lists of different lengths"));
    }
    let mut documents = documents.into_iter();
    ids.into_iter()
        .zip(distances)
        .zip(metadatas)
        .map(|((id, distance), metadata)| {
            let meta = metadata_from_chroma(metadata.unwrap_or_default())?;
            let text = documents.next().flatten().unwrap_or_default();
            let record = Record { id: record_id(&id, &meta.tenant_id), meta, text: text.into(), embedding: Vec::new() };
            let score = distance.map(|distance| 1.0 - distance).filter(|score| score.is_finite()).unwrap_or(0.0);
            Ok(ScoredRecord { record: Arc::new(record).into(), score })
        })
        .collect()
}

/// `{"error": kind, "message": text}`, the body of Chroma's JSON errors.
#[derive(Debug, Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default)]
    pub(crate) error: String,
    #[serde(default)]
    pub(crate) message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_meta() -> Metadata {
        Metadata {
            tenant_id: "acme".into(),
            doc_id: "d1".into(),
            section_id: Some("s1".into()),
            title: "Заголовок".into(),
            tags: vec!["a".into()],
            breadcrumbs: vec!["Главная".into(), "Раздел".into()],
            page: 3,
            ..Metadata::default()
        }
    }

    #[test]
    fn metadata_round_trips_without_nulls_or_empty_arrays() {
        let meta = sample_meta();
        let map = metadata_to_chroma(&meta).unwrap();
        assert!(!map.contains_key("chunk_id"));
        assert!(!map.contains_key("heading_path"));
        assert!(!map.contains_key("summary"), "empty strings are omitted");
        assert_eq!(map["tags"], json!(["a"]));
        assert_eq!(map["breadcrumbs"], json!(["Главная", "Раздел"]));
        assert_eq!(map["page"], json!(3));
        assert_eq!(metadata_from_chroma(map).unwrap(), meta);
    }

    #[test]
    fn ids_are_namespaced_by_tenant() {
        assert_eq!(chroma_id("acme", "d1::x"), "acme::d1::x");
        assert_eq!(record_id("acme::d1::x", "acme"), "d1::x");
        assert_eq!(record_id("d1", "acme"), "d1");
        assert_eq!(record_id("acmed1", "acme"), "acmed1");
    }

    #[test]
    fn embeddings_are_little_endian_f32() {
        assert_eq!(encode_embedding(&[0.0, 0.0, 0.0, 1.0]), "AAAAAAAAAAAAAAAAAACAPw==");
    }

    #[test]
    fn upsert_body_encodes_embeddings_as_announced() {
        let record = Record { id: "d1".into(), meta: sample_meta(), text: "text".into(), embedding: vec![0.0, 1.0] };
        let base64 = upsert_body(std::slice::from_ref(&record), EmbeddingEncoding::Base64, None).unwrap();
        assert_eq!(base64["ids"], json!(["acme::d1"]));
        assert_eq!(base64["embeddings"], json!([encode_embedding(&[0.0, 1.0])]));
        assert_eq!(base64["documents"], json!(["text"]));
        let floats = upsert_body(std::slice::from_ref(&record), EmbeddingEncoding::Floats, None).unwrap();
        assert_eq!(floats["embeddings"], json!([[0.0, 1.0]]));

        let hashes: BTreeMap<String, String> = [("d1".to_string(), "h1".to_string())].into();
        let versioned = Versioned { source: "docs", page_hashes: &hashes };
        let staged = upsert_body(std::slice::from_ref(&record), EmbeddingEncoding::Floats, Some(versioned)).unwrap();
        assert_eq!(staged["ids"], json!(["acme::d1::h1"]));
        assert_eq!(
            (&staged["metadatas"][0]["page_hash"], &staged["metadatas"][0]["ingest_source"]),
            (&json!("h1"), &json!("docs"))
        );
        let read = json!({
            "ids": staged["ids"], "embeddings": [[0.0, 1.0]], "documents": ["text"], "metadatas": staged["metadatas"],
        });
        let read = serde_json::from_value::<GetResponse>(read).unwrap().into_records().unwrap();
        assert_eq!(read, vec![(record, Some("h1".to_string()))], "the stored id and metadata give the record back");
    }

    #[test]
    fn where_clause_wraps_every_condition_in_and() {
        let mut filter = RecordFilter::tenant("acme");
        assert_eq!(where_clause(&filter).unwrap(), json!({"$and": [{"tenant_id": {"$eq": "acme"}}]}));
        filter.product = Some("chat".into());
        filter.tags = vec!["x".into(), "y".into()];
        filter.doc_ids = Some(vec!["d1".into(), "d2".into()]);
        assert_eq!(
            where_clause(&filter).unwrap(),
            json!({"$and": [
                {"tenant_id": {"$eq": "acme"}},
                {"product": {"$eq": "chat"}},
                {"tags": {"$contains": "x"}},
                {"tags": {"$contains": "y"}},
                {"doc_id": {"$in": ["d1", "d2"]}},
            ]})
        );
        filter.section_ids = Some(Vec::new());
        assert_eq!(where_clause(&filter), None);
    }

    #[test]
    fn get_response_restores_records() {
        let body = json!({
            "ids": ["acme::s1"],
            "embeddings": [[0.5, 1.0]],
            "documents": ["text"],
            "metadatas": [metadata_to_chroma(&sample_meta()).unwrap()],
        });
        let records = serde_json::from_value::<GetResponse>(body).unwrap().into_records().unwrap();
        assert_eq!(records.len(), 1);
        let (record, page_hash) = &records[0];
        assert_eq!((record.id.as_str(), page_hash), ("s1", &None));
        assert_eq!(record.text, "text");
        assert_eq!(record.embedding, vec![0.5, 1.0]);
        assert_eq!(record.meta, sample_meta());
        let missing = json!({"ids": ["x"], "embeddings": null, "metadatas": [null]});
        assert!(serde_json::from_value::<GetResponse>(missing).unwrap().into_records().is_err());
    }
}
