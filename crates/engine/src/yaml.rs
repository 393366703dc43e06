//! YAML, as the configuration files (themes, boosting, mapping, Dify knowledge bases) and page
//! front matter are read: [`from_str`] over serde-saphyr (pure Rust, no `unsafe-libyaml`), with
//! the options that read a document as `serde_yaml_ng` reads it, and [`Value`], the untyped tree
//! the front matter and boosting readers walk (serde-saphyr deserializes into types only).
//!
//! Read as serde_yaml_ng reads them: only `true`/`false` (and `True`, `FALSE`, …) are booleans (`yes`, `on` stay
//! strings); digits with a leading zero (`0755`) and numbers with `_` (`1_000`) are strings; `.inf`
//! and `.nan` are floats; `<<` is an ordinary key (no merging); `~` read into a string is `"~"`; a
//! repeated key in an untyped mapping or a struct is an error. A key with nothing after it is an
//! empty list or mapping where a field asks for it ([`empty_as_default`]).
//!
//! Read differently (no config file of the repository and no front matter of the AdGuard pages
//! and the demo pages is affected: each reads to the same tree): a custom tag (`!foo bar`) is
//! dropped and the value read (`serde_yaml_ng` kept a tagged value, which the readers treated as
//! empty); an integer beyond 64 bits is a float (an error before); a repeated key in a typed map
//! (a knowledge base id, a theme id in the mapping form, a `section_roles` entry) is an error (the
//! last one won before).
//!
//! Errors are one line and end with the line and column (`… at line 3, column 7`).

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// A YAML document that cannot be read as the type asked for: one line, naming the line and
/// column where it can (`… at line 3, column 7`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Parses one YAML document into `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let options = serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        non_finite_float_policy: serde_saphyr::NonFiniteFloatPolicy::PassThrough,
        merge_keys: serde_saphyr::MergeKeyPolicy::AsOrdinary,
        null_as_string: true,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options(text, options).map_err(|error| {
        let rendered = error.render_with_options(serde_saphyr::render_options! {
            snippets: serde_saphyr::SnippetMode::Off,
        });
        Error(rendered.split_whitespace().collect::<Vec<_>>().join(" "))
    })
}

/// For a collection or struct field written with nothing after its key (`rules:`), which
/// `serde_yaml_ng` read as empty: an empty (or null) value is the type's default. Use as
/// `#[serde(default, deserialize_with = "crate::yaml::empty_as_default")]`.
pub fn empty_as_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Any YAML node.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Sequence(Vec<Value>),
    Mapping(Mapping),
}

impl Value {
    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }

    /// A non-negative integer.
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(number) => number.as_u64(),
            _ => None,
        }
    }

    #[cfg(test)]
    pub(crate) fn as_mapping(&self) -> Option<&Mapping> {
        match self {
            Value::Mapping(mapping) => Some(mapping),
            _ => None,
        }
    }
}

/// A YAML number: an integer as written, or a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Number(N);

#[derive(Debug, Clone, Copy, PartialEq)]
enum N {
    PosInt(u64),
    NegInt(i64),
    Float(f64),
}

impl Number {
    /// The value as a float (an integer converted).
    pub(crate) fn as_f64(&self) -> Option<f64> {
        Some(match self.0 {
            N::PosInt(n) => n as f64,
            N::NegInt(n) => n as f64,
            N::Float(n) => n,
        })
    }

    /// The value when it is an integer ≥ 0.
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self.0 {
            N::PosInt(n) => Some(n),
            N::NegInt(_) | N::Float(_) => None,
        }
    }
}

/// Integers as written, floats in their shortest form (`1.0`, `0.5`, `1e20`), `.inf`, `-.inf`
/// and `.nan`: what `serde_yaml_ng` printed.
impl fmt::Display for Number {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            N::PosInt(n) => write!(formatter, "{n}"),
            N::NegInt(n) => write!(formatter, "{n}"),
            N::Float(f) if f.is_nan() => formatter.write_str(".nan"),
            N::Float(f) if f.is_infinite() => formatter.write_str(if f < 0.0 { "-.inf" } else { ".inf" }),
            N::Float(f) => formatter.write_str(ryu::Buffer::new().format_finite(f)),
        }
    }
}

/// A YAML mapping: its entries in document order; keys are any node.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Mapping(Vec<(Value, Value)>);

impl Mapping {
    /// The value of the string key `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(name, _)| name.as_str() == Some(key)).map(|(_, value)| value)
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &Value> {
        self.0.iter().map(|(key, _)| key)
    }
}

impl<'a> IntoIterator for &'a Mapping {
    type Item = (&'a Value, &'a Value);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (Value, Value)>, fn(&'a (Value, Value)) -> Self::Item>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(key, value)| (key, value))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any YAML value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(Number(if value < 0 { N::NegInt(value) } else { N::PosInt(value as u64) })))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(Number(N::PosInt(value))))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Value::Number(Number(N::Float(value))))
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
        Value::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut sequence = Vec::with_capacity(items.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = items.next_element()? {
            sequence.push(item);
        }
        Ok(Value::Sequence(sequence))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Value, A::Error> {
        let mut mapping = Vec::with_capacity(entries.size_hint().unwrap_or(0).min(1024));
        while let Some((key, value)) = entries.next_entry::<Value, Value>()? {
            if mapping.iter().any(|(known, _): &(Value, Value)| *known == key) {
                return Err(de::Error::custom(format_args!("duplicate entry with key {key:?}")));
            }
            mapping.push((key, value));
        }
        Ok(Value::Mapping(Mapping(mapping)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Theme {
        id: String,
        domain: String,
    }

    #[test]
    fn a_malformed_document_names_its_line_and_column_on_one_line() {
        let error = from_str::<Value>("themes:\n  - id: a\n    domain: [x\n").unwrap_err().to_string();
        assert!(error.contains("line 3, column 13") && !error.contains('\n'), "{error}");
        let error = from_str::<Value>("a: 1\nb: 2\na: 3\n").unwrap_err().to_string();
        assert!(error.contains("duplicate") && error.contains("line 3"), "{error}");
        let error = from_str::<Value>("a: 1\nb:\n\tc: 2\n").unwrap_err().to_string();
        assert!(error.contains("tab") && error.contains("line 3"), "a tab indenting: {error}");
        // A document that parses but does not fit the type names the line too.
        let error = from_str::<Vec<Theme>>("- id: a\n  domain: x\n- id: b\n  domian: y\n").unwrap_err().to_string();
        assert!(error.contains("domian") && error.contains("line 4"), "{error}");
    }

    #[test]
    fn scalars_read_as_serde_yaml_ng_read_them() {
        let value: Value = from_str(
            "yes: yes\non: off\nbool: True\nmode: 0755\ncount: 1_000\nhex: 0x1F\nfloat: 1.0\nbig: 1e20\n\
             inf: .inf\nnan: .nan\nnothing: ~\ndate: 2001-12-14\n",
        )
        .unwrap();
        let Value::Mapping(map) = value else { panic!("a mapping") };
        let text = |key: &str| match map.get(key) {
            Some(Value::String(text)) => format!("string {text}"),
            Some(Value::Number(number)) => format!("number {number}"),
            Some(Value::Bool(flag)) => format!("bool {flag}"),
            other => format!("{other:?}"),
        };
        let read: Vec<String> =
            ["yes", "on", "bool", "mode", "count", "hex", "float", "big", "inf", "nan", "date"].map(text).into();
        assert_eq!(
            read,
            [
                "string yes",
                "string off",
                "bool true",
                "string 0755",
                "string 1_000",
                "number 31",
                "number 1.0",
                "number 1e20",
                "number .inf",
                "number .nan",
                "string 2001-12-14",
            ]
        );
        assert_eq!(map.get("nothing"), Some(&Value::Null));
        assert_eq!(map.get("hex").and_then(Value::as_u64), Some(31));
    }

    #[test]
    fn anchors_are_followed_and_merge_keys_stay_ordinary_keys() {
        let value: Value = from_str("base: &b {x: 1}\nalias: *b\nderived:\n  <<: *b\n  y: 2\n").unwrap();
        let map = value.as_mapping().unwrap();
        assert_eq!(map.get("alias"), map.get("base"));
        let derived = map.get("derived").and_then(Value::as_mapping).unwrap();
        assert_eq!(derived.keys().filter_map(Value::as_str).collect::<Vec<_>>(), ["<<", "y"]);
    }

    #[test]
    fn a_key_left_empty_reads_as_the_default_where_asked() {
        #[derive(Debug, Deserialize, PartialEq)]
        struct File {
            #[serde(default, deserialize_with = "empty_as_default")]
            list: Vec<String>,
            #[serde(default, deserialize_with = "empty_as_default")]
            map: std::collections::BTreeMap<String, String>,
            #[serde(default)]
            text: String,
        }
        let file: File = from_str("list:\nmap:\ntext:\n").unwrap();
        assert_eq!(file, File { list: Vec::new(), map: Default::default(), text: String::new() });
        let file: File = from_str("list: [a]\nmap: {k: v}\ntext: ~\n").unwrap();
        assert_eq!((file.list.len(), file.map.len(), file.text.as_str()), (1, 1, "~"));
    }

    #[test]
    fn empty_documents_are_null_and_keys_keep_their_kind() {
        assert_eq!(from_str::<Value>("").unwrap(), Value::Null);
        assert_eq!(from_str::<Value>("# a comment\n").unwrap(), Value::Null);
        let value: Value = from_str("1: one\ntrue: two\n").unwrap();
        let keys: Vec<&Value> = value.as_mapping().unwrap().keys().collect();
        assert!(matches!(keys[..], [Value::Number(_), Value::Bool(true)]), "{keys:?}");
    }
}
