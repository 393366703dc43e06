//! `ApiJson`: the one JSON parsing path of every endpoint, with rejections rendered as our JSON
//! error body.
//!
//! A body is parsed in two steps: first into a JSON value that rejects a repeated key at any
//! depth (`{"tenant_id":"a","tenant_id":"b"}` must never mean "the last one wins": a gateway
//! that checks the first one would be bypassed), then into the endpoint's typed request, whose
//! structs reject unknown fields. Malformed JSON is 400 `invalid_json`; well-formed JSON that
//! is not an acceptable request (a repeated key, an unknown field, a wrong type — also in an
//! enum field — a missing field) is 422 `invalid_request`.

use crate::error::{ApiError, ErrorCode};
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::{DeserializeOwned, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::fmt;

/// A request body parsed strictly into `T` (see the module documentation).
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !json_content_type(request.headers()) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "expected a request with `Content-Type: application/json`",
            ));
        }
        if let Some(encoding) = request.headers().get(header::CONTENT_ENCODING) {
            let encoding = encoding.to_str().unwrap_or("?").trim();
            if !encoding.eq_ignore_ascii_case("identity") {
                return Err(ApiError::new(
                    ErrorCode::UnsupportedMediaType,
                    format!("Content-Encoding {encoding:?} is not supported; send the JSON body uncompressed"),
                ));
            }
        }
        let bytes = Bytes::from_request(request, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large")
            } else {
                ApiError::new(ErrorCode::InvalidJson, rejection.body_text())
            }
        })?;
        parse_strict(&bytes).map(ApiJson)
    }
}

/// `application/json` or `application/<anything>+json`, with or without parameters.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match essence.split_once('/') {
        Some(("application", subtype)) => subtype == "json" || subtype.ends_with("+json"),
        _ => false,
    }
}

/// Parses `bytes` as JSON without repeated keys, then as a `T`.
/// The longest array any request body may hold: id lists take at most 1,000, tags 100, and a
/// `query_embedding` the index dimension (4,096 at most in practice).
pub const MAX_JSON_ARRAY: usize = 16_384;

pub fn parse_strict<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let StrictValue(value) = serde_json::from_slice(bytes).map_err(|error| {
        let code = if error.is_data() { ErrorCode::InvalidRequest } else { ErrorCode::InvalidJson };
        ApiError::new(code, format!("invalid request body: {error}"))
    })?;
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if path.is_empty() || path == "." {
            ApiError::invalid(format!("invalid request body: {inner}"))
        } else {
            ApiError::invalid(format!("{path}: {inner}"))
        }
    })
}

/// A JSON value whose objects, at every depth, have no repeated key.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    /// A number with no fractional part is an integer, as JSON Schema (and JavaScript) count it:
    /// `{"max_results": 5.0}` means 5. Other numbers stay floating point.
    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
        if value.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&value) {
            return Ok(Value::from(value as i64));
        }
        Ok(Value::from(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        StrictValue::deserialize(deserializer).map(|v| v.0)
    }

    /// Arrays longer than `MAX_JSON_ARRAY` are rejected while parsing, so a body of 174k ids
    /// costs a few ms instead of a full parse before its 422.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(StrictValue(item)) = seq.next_element()? {
            if items.len() == MAX_JSON_ARRAY {
                return Err(A::Error::custom(format!(
                    "an array has more than {MAX_JSON_ARRAY} items (no field takes that many)"
                )));
            }
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(A::Error::custom(format!("duplicate key {key:?}")));
            }
            let StrictValue(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        #[allow(dead_code)]
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        #[allow(dead_code)]
        a: Option<String>,
    }

    fn status_of(body: &str) -> StatusCode {
        match parse_strict::<Outer>(body.as_bytes()) {
            Ok(_) => StatusCode::OK,
            Err(error) => error.code.status(),
        }
    }

    #[test]
    fn repeated_keys_are_rejected_at_any_depth() {
        assert_eq!(status_of(r#"{"inner": {"a": "x"}}"#), StatusCode::OK);
        assert_eq!(status_of(r#"{"inner": {"a": "x"}, "inner": null}"#), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(status_of(r#"{"inner": {"a": "x", "a": "y"}}"#), StatusCode::UNPROCESSABLE_ENTITY);
        // Also inside values the typed request ignores or keeps as raw JSON.
        assert!(parse_strict::<Value>(br#"[{"k": 1, "k": 2}]"#).is_err());
    }

    #[test]
    fn syntax_errors_are_400_and_shape_errors_422() {
        assert_eq!(status_of("{"), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(""), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(r#"{"inner": {"b": 1}}"#), StatusCode::UNPROCESSABLE_ENTITY);
        let error = parse_strict::<Outer>(br#"{"inner": {"a": 5}}"#).unwrap_err();
        assert!(error.message.starts_with("inner.a: "), "{}", error.message);
    }

    #[test]
    fn json_content_types() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            json_content_type(&headers)
        };
        assert!(with("application/json"));
        assert!(with("Application/JSON; charset=utf-8"));
        assert!(with("application/merge-patch+json"));
        assert!(!with("text/json"));
        assert!(!with("application/x-www-form-urlencoded"));
        assert!(!json_content_type(&HeaderMap::new()));
    }
}
