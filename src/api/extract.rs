//! `ApiJson`: the one JSON parsing path of every endpoint, with rejections rendered as our JSON
//! error body.
//!
//! A body is parsed straight into the endpoint's typed request, whose structs reject unknown
//! fields, under rules checked at every depth while it is read (`super::strict`): a repeated key
//! is an error (`{"tenant_id":"a","tenant_id":"b"}` must never mean "the last one wins": a
//! gateway that checks the first one would be bypassed), arrays are capped, and `5.0` is 5.
//! Malformed JSON is 400 `invalid_json`; well-formed JSON that is not an acceptable request (a
//! repeated key, an unknown field, a wrong type — also in an enum field — a missing field) is 422
//! `invalid_request`.

use super::strict::Strict;
use crate::error::{ApiError, ErrorCode};
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::DeserializeOwned;

/// A request body parsed strictly into `T` (see the module documentation).
#[derive(Debug)]
pub(crate) struct ApiJson<T>(pub T);

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

/// Parses `bytes` as a `T` under the strict rules of `super::strict` (no repeated key at any
/// depth, arrays capped, integral numbers as integers), in one pass over the bytes. A body that
/// fails is parsed again with its path tracked, for an error that names the field: tracking every
/// value of a good body would double the cost of parsing its embedding.
pub fn parse_strict<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // A body is an object: the strict rules read `null` for an object as `{}`, which is right
    // for an optional field, not for the whole body.
    if bytes.trim_ascii() == b"null" {
        return Err(ApiError::invalid("the request body must be a JSON object, not null"));
    }
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let parsed = serde::Deserialize::deserialize(Strict(&mut json)).and_then(|value| json.end().map(|()| value));
    let error = match parsed {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    let syntax =
        |error: serde_json::Error| ApiError::new(ErrorCode::InvalidJson, format!("invalid request body: {error}"));
    if !error.is_data() {
        return Err(syntax(error));
    }
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let Err(tracked) = serde_path_to_error::deserialize::<_, T>(Strict(&mut json)) else {
        return Err(ApiError::invalid(format!("invalid request body: {error}")));
    };
    // A repeated key fails before it becomes a path segment, which is then `?`: name its object.
    let path = tracked.path().to_string();
    let path = path.strip_suffix('?').map_or(path.as_str(), |object| object.strip_suffix('.').unwrap_or(object));
    let inner = tracked.into_inner();
    if !inner.is_data() {
        Err(syntax(inner))
    } else if path.is_empty() || path == "." {
        Err(ApiError::invalid(format!("invalid request body: {inner}")))
    } else {
        Err(ApiError::invalid(format!("{path}: {inner}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::strict::MAX_JSON_ARRAY;
    use serde::Deserialize;
    use serde_json::Value;

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

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Counts {
        max: Option<i64>,
        limits: Option<Vec<u32>>,
        raw: Option<Value>,
        weights: Option<Vec<f32>>,
    }

    #[test]
    fn integral_numbers_are_integers_at_every_depth() {
        let parsed: Counts = parse_strict(br#"{"max": 5.0, "limits": [1.0, 2], "raw": {"n": 3.0, "x": 0.5}}"#).unwrap();
        assert_eq!(parsed.max, Some(5));
        assert_eq!(parsed.limits, Some(vec![1, 2]));
        assert_eq!(parsed.raw, Some(serde_json::json!({"n": 3, "x": 0.5})));
        assert!(parsed.raw.unwrap()["n"].is_i64(), "3.0 kept as raw JSON is the integer 3");
        // Fractions stay fractions: an integer field refuses them, a float field keeps them.
        let error = parse_strict::<Counts>(br#"{"max": 5.5}"#).unwrap_err();
        assert_eq!(error.code.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert!(error.message.starts_with("max: "), "{}", error.message);
        // The edges of the integer range, and a negative zero, are told apart like `f64::fract`.
        let parsed: Counts = parse_strict(
            br#"{"raw": {"z": -0.0, "low": -9223372036854775808.0, "high": 9223372036854775808.0, "tiny": 1e-300}}"#,
        )
        .unwrap();
        let raw = parsed.raw.unwrap();
        assert!(raw["z"].is_i64() && raw["low"].as_i64() == Some(i64::MIN), "{raw}");
        assert!(raw["high"].is_f64() && raw["tiny"].is_f64(), "{raw}");
        let parsed: Counts = parse_strict(br#"{"weights": [0.25, 1.0, -2, 1e-3]}"#).unwrap();
        assert_eq!(parsed.weights, Some(vec![0.25, 1.0, -2.0, 0.001]));
    }

    #[test]
    fn arrays_are_capped_at_any_depth() {
        let items = |n: usize| vec!["1"; n].join(",");
        let at_cap = format!(r#"{{"limits": [{}]}}"#, items(MAX_JSON_ARRAY));
        assert_eq!(parse_strict::<Counts>(at_cap.as_bytes()).unwrap().limits.unwrap().len(), MAX_JSON_ARRAY);
        for body in [
            format!(r#"{{"limits": [{}]}}"#, items(MAX_JSON_ARRAY + 1)),
            format!(r#"{{"raw": {{"deep": [[{}]]}}}}"#, items(MAX_JSON_ARRAY + 1)),
        ] {
            let error = parse_strict::<Counts>(body.as_bytes()).unwrap_err();
            assert_eq!(error.code.status(), StatusCode::UNPROCESSABLE_ENTITY);
            assert!(error.message.contains("more than 16384 items"), "{}", error.message);
        }
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Fast,
        Exact,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct WithMode {
        mode: Option<Mode>,
    }

    #[test]
    fn an_enum_of_the_wrong_type_is_422_naming_its_field() {
        assert_eq!(parse_strict::<WithMode>(br#"{"mode": "exact"}"#).unwrap().mode, Some(Mode::Exact));
        assert_eq!(parse_strict::<WithMode>(br#"{"mode": null}"#).unwrap().mode, None);
        for body in [r#"{"mode": 5}"#, r#"{"mode": ["fast"]}"#, r#"{"mode": true}"#, r#"{"mode": "slow"}"#] {
            let error = parse_strict::<WithMode>(body.as_bytes()).unwrap_err();
            assert_eq!(error.code.status(), StatusCode::UNPROCESSABLE_ENTITY, "{body}");
            assert!(error.message.starts_with("mode: "), "{body}: {}", error.message);
        }
    }

    #[test]
    fn nesting_to_the_parser_limit_fits_the_stack() {
        let deep = |depth: usize| format!(r#"{{"raw": {}1{}}}"#, "[".repeat(depth), "]".repeat(depth));
        assert!(parse_strict::<Counts>(deep(126).as_bytes()).is_ok());
        let error = parse_strict::<Counts>(deep(10_000).as_bytes()).unwrap_err();
        assert_eq!(error.code.status(), StatusCode::BAD_REQUEST, "{}", error.message);
    }

    #[test]
    fn only_whitespace_may_follow_the_body() {
        assert!(parse_strict::<Counts>(b"{\"max\": 1} \n").is_ok());
        let error = parse_strict::<Counts>(br#"{"max": 1} {"max": 2}"#).unwrap_err();
        assert_eq!(error.code.status(), StatusCode::BAD_REQUEST);
        // A value the request keeps as raw JSON is parsed under the same rules.
        assert_eq!(status_of(r#"{"inner": {"a": "x"}} x"#), StatusCode::BAD_REQUEST);
        let error = parse_strict::<Counts>(br#"{"raw": [{"k": 1}, {"k": 2, "k": 3}]}"#).unwrap_err();
        assert!(error.message.starts_with("raw[1]: duplicate key \"k\""), "{}", error.message);
        let error = parse_strict::<Counts>(br#"{"max": 1, "max": 2}"#).unwrap_err();
        assert!(error.message.starts_with("invalid request body: duplicate key \"max\""), "{}", error.message);
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
