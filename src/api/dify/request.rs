//! Dify's request as Dify's client really sends it, read tolerantly: `null` for an optional
//! setting means its default, and a field this version does not read is ignored and logged once
//! per name. Malformed JSON, a repeated key and a value of the wrong type are still refused (the
//! body goes through the strict parser of every endpoint first).

use crate::error::ApiError;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// `POST {base}/retrieval`: Dify's request. Fields besides these are ignored (`read` drops them
/// before parsing, at every level, so the schemas leave `additionalProperties` open).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct DifyRetrievalRequest {
    #[schema(schema_with = knowledge_id)]
    pub(crate) knowledge_id: String,
    /// The question, of any length: blank characters around it are dropped; a blank one has no
    /// records; one over `RETR_MAX_QUERY_CHARS` is searched by its beginning (`query_truncated`).
    pub(crate) query: String,
    /// Absent or `null`: every setting at its default.
    #[serde(default)]
    pub(crate) retrieval_setting: Option<RetrievalSetting>,
    /// Absent or `null`: no condition.
    #[serde(default)]
    pub(crate) metadata_condition: Option<DifyMetadataCondition>,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub(crate) struct RetrievalSetting {
    /// How many records at most: at least 1; above 50 it is 50; `null`: the service's
    /// `max_results`.
    #[schema(minimum = 1, maximum = 9223372036854775807i64)]
    #[serde(default)]
    pub(crate) top_k: Option<i64>,
    /// The lowest `score` returned, in [0, 1]; 0.0 or `null` disables it.
    #[schema(minimum = 0.0, maximum = 1.0)]
    #[serde(default)]
    pub(crate) score_threshold: Option<f64>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct DifyMetadataCondition {
    /// `and` (the default) or `or`.
    #[serde(default)]
    pub(crate) logical_operator: Option<LogicalOperator>,
    /// `null` or no condition left once blank ones are ignored: nothing is filtered. At most
    /// `MAX_CONDITIONS`.
    #[schema(max_items = 64)]
    #[serde(default)]
    pub(crate) conditions: Option<Vec<DifyCondition>>,
}

#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogicalOperator {
    And,
    Or,
}

/// One filter row. The served document replaces this derived schema with
/// `condition::condition_schema`: one shape per operator family.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DifyCondition {
    /// A metadata field (`field_names.rs`); older Dify versions send a one-element list.
    #[schema(value_type = Object)]
    pub(crate) name: Value,
    /// contains, not contains, start with, end with, is, is not, in, not in, empty, not empty,
    /// =, ≠, >, <, ≥, ≤, before, after.
    pub(crate) comparison_operator: String,
    /// A string, a number, or a list of strings (`in`, `not in`). `null` or absent: a blank
    /// filter row, ignored as Dify ignores it (except for `empty`/`not empty`, which take none).
    #[schema(value_type = Object)]
    #[serde(default)]
    pub(crate) value: Option<Value>,
}

/// The knowledge base: a tenant id, or an id of `RETR_DIFY_KNOWLEDGE_BASES` (the same rule).
fn knowledge_id() -> utoipa::openapi::schema::Object {
    let mut schema = retrieval_engine::openapi::tenant_id();
    schema.description = Some("The knowledge base: a tenant id, or an id of `RETR_DIFY_KNOWLEDGE_BASES`.".into());
    schema
}

const REQUEST_FIELDS: [&str; 4] = ["knowledge_id", "query", "retrieval_setting", "metadata_condition"];
const SETTING_FIELDS: [&str; 2] = ["top_k", "score_threshold"];
const CONDITION_SET_FIELDS: [&str; 2] = ["logical_operator", "conditions"];
const CONDITION_FIELDS: [&str; 3] = ["name", "comparison_operator", "value"];

/// Reads Dify's request from the strictly parsed body: drops the fields this version does not
/// read (returned by name, e.g. `attachment_ids`, `metadata_condition.conditions[].extra`), then
/// parses the rest; a value of the wrong type is a 422 that names its field.
pub(crate) fn read(mut body: Value) -> Result<(DifyRetrievalRequest, Vec<String>), ApiError> {
    // Serde would read a struct from a list too (`"retrieval_setting": [5]`): refuse that first.
    object_or_null(&body, "the request body")?;
    object_or_null(&body["retrieval_setting"], "retrieval_setting")?;
    object_or_null(&body["metadata_condition"], "metadata_condition")?;
    if let Some(conditions) = body["metadata_condition"]["conditions"].as_array() {
        for (index, condition) in conditions.iter().enumerate() {
            object_or_null(condition, &format!("metadata_condition.conditions[{index}]"))?;
        }
    }
    let mut unknown = Vec::new();
    keep_known(&mut body, &REQUEST_FIELDS, "", &mut unknown);
    if let Some(setting) = body.get_mut("retrieval_setting") {
        keep_known(setting, &SETTING_FIELDS, "retrieval_setting.", &mut unknown);
    }
    if let Some(condition_set) = body.get_mut("metadata_condition") {
        keep_known(condition_set, &CONDITION_SET_FIELDS, "metadata_condition.", &mut unknown);
        if let Some(conditions) = condition_set.get_mut("conditions").and_then(Value::as_array_mut) {
            for condition in conditions {
                keep_known(condition, &CONDITION_FIELDS, "metadata_condition.conditions[].", &mut unknown);
            }
        }
    }
    let request = serde_path_to_error::deserialize(body).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if path.is_empty() || path == "." {
            ApiError::invalid(format!("invalid request body: {inner}"))
        } else {
            ApiError::invalid(format!("{path}: {inner}"))
        }
    })?;
    Ok((request, unknown))
}

fn object_or_null(value: &Value, what: &str) -> Result<(), ApiError> {
    match value {
        Value::Object(_) | Value::Null => Ok(()),
        _ => Err(ApiError::invalid(format!("{what}: invalid type: expected an object"))),
    }
}

/// Drops the keys of `object` (when it is one) that are not in `known`, noting them under `prefix`.
fn keep_known(object: &mut Value, known: &[&str], prefix: &str, unknown: &mut Vec<String>) {
    let Some(map) = object.as_object_mut() else { return };
    map.retain(|key, _| {
        let keep = known.contains(&key.as_str());
        if !keep {
            unknown.push(format!("{prefix}{key}"));
        }
        keep
    });
}

/// Most distinct unknown field names remembered (and so logged); a client cannot grow the set.
pub(crate) const MAX_REMEMBERED_FIELDS: usize = 64;
/// Longest part of an unknown field's name kept and logged.
const MAX_FIELD_NAME_CHARS: usize = 64;

/// The unknown request fields already logged: each name once, at most
/// [`MAX_REMEMBERED_FIELDS`] names (past that, one line says that no more are logged).
#[derive(Debug, Default)]
pub(crate) struct UnknownFields {
    logged: Mutex<HashSet<String>>,
    full: AtomicBool,
}

impl UnknownFields {
    /// Logs each of `names` that was not logged before; returns how many were newly logged.
    pub(crate) fn notice(&self, names: &[String]) -> usize {
        let mut newly = 0;
        for name in names {
            let name: String = name.chars().take(MAX_FIELD_NAME_CHARS).collect();
            {
                let mut logged = self.logged.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if logged.contains(&name) {
                    continue;
                }
                if logged.len() >= MAX_REMEMBERED_FIELDS {
                    drop(logged);
                    if !self.full.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            remembered = MAX_REMEMBERED_FIELDS,
                            "dify requests carry many distinct unknown fields; no more are logged"
                        );
                    }
                    continue;
                }
                logged.insert(name.clone());
            }
            newly += 1;
            tracing::info!(field = ?name, "dify request field ignored: this version does not read it");
        }
        newly
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_dropped_at_every_level_and_named() {
        let body = json!({"knowledge_id": "t1", "query": "q", "attachment_ids": ["a"],
            "retrieval_setting": {"top_k": null, "score_threshold": 0.5, "score_threshold_enabled": true},
            "metadata_condition": {"logical_operator": "or", "x": 1, "conditions": [
                {"name": "product", "comparison_operator": "is", "value": "sdk", "id": "row-1"}]}});
        let (request, unknown) = read(body).unwrap();
        assert_eq!(
            unknown,
            [
                "attachment_ids",
                "retrieval_setting.score_threshold_enabled",
                "metadata_condition.x",
                "metadata_condition.conditions[].id"
            ]
        );
        assert_eq!(request.retrieval_setting.unwrap().top_k, None);
        assert_eq!(request.metadata_condition.unwrap().conditions.unwrap().len(), 1);
    }

    #[test]
    fn wrong_types_are_still_refused_naming_the_field() {
        for (body, path) in [
            (
                json!({"knowledge_id": "t1", "query": "q", "retrieval_setting": {"top_k": "3"}}),
                "retrieval_setting.top_k",
            ),
            (json!({"knowledge_id": 5, "query": "q"}), "knowledge_id"),
            (json!({"knowledge_id": "t1", "query": "q", "metadata_condition": {"conditions": {}}}), "conditions"),
            (json!({"knowledge_id": "t1", "query": "q", "retrieval_setting": [3, 0.5]}), "retrieval_setting"),
            (json!({"knowledge_id": "t1", "query": "q", "metadata_condition": []}), "metadata_condition"),
            (
                json!({"knowledge_id": "t1", "query": "q", "metadata_condition": {"conditions": [["product"]]}}),
                "conditions[0]",
            ),
        ] {
            let error = read(body.clone()).unwrap_err();
            assert_eq!(error.code, crate::error::ErrorCode::InvalidRequest, "{body}");
            assert!(error.message.contains(path), "{body}: {}", error.message);
        }
        assert!(read(json!({"query": "q"})).is_err(), "knowledge_id is required");
        assert!(read(json!(["not", "an", "object"])).is_err());
    }

    #[test]
    fn the_schemas_state_the_validations_rules() {
        use utoipa::PartialSchema;
        let conditions = &serde_json::to_value(DifyMetadataCondition::schema()).unwrap()["properties"]["conditions"];
        assert_eq!(conditions["maxItems"], super::super::condition::MAX_CONDITIONS);
        let request = serde_json::to_value(DifyRetrievalRequest::schema()).unwrap();
        assert_eq!(request["properties"]["knowledge_id"]["pattern"], retrieval_engine::openapi::tenant_id_pattern());
    }

    #[test]
    fn each_unknown_name_is_logged_once_and_the_set_stays_bounded() {
        let fields = UnknownFields::default();
        assert_eq!(fields.notice(&["attachment_ids".into(), "attachment_ids".into()]), 1);
        assert_eq!(fields.notice(&["attachment_ids".into()]), 0);
        let many: Vec<String> = (0..10_000).map(|n| format!("field_{n}_{}", "x".repeat(1000))).collect();
        assert_eq!(fields.notice(&many), MAX_REMEMBERED_FIELDS - 1);
        let logged = fields.logged.lock().unwrap();
        assert_eq!(logged.len(), MAX_REMEMBERED_FIELDS);
        assert!(logged.iter().all(|name| name.chars().count() <= MAX_FIELD_NAME_CHARS));
    }
}
