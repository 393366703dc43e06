//! The rules of a strict request body, applied while the typed request is parsed (one pass over
//! the bytes, no intermediate JSON value): `Strict` wraps a deserializer and everything it hands
//! out (maps, arrays, options, enums), so at every depth, also inside values the request ignores,
//! - an object with a repeated key is an error;
//! - an array of more than `MAX_JSON_ARRAY` items is an error, raised at the first item too many;
//! - a number with no fractional part is an integer, as JSON Schema (and JavaScript) count it:
//!   `{"max_results": 5.0}` means 5. Other numbers stay floating point;
//! - `null` where an object is expected is the empty object, so an optional object field
//!   (`"filters": null`) means "absent" like every other optional field.

use serde::de::value::MapAccessDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, Error as _, IgnoredAny, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use std::collections::HashSet;
use std::fmt;

/// The longest array any request body may hold: id lists take at most 1,000, tags 100, and a
/// `query_embedding` the index dimension (4,096 at most in practice).
pub(crate) const MAX_JSON_ARRAY: usize = 16_384;

/// A deserializer under the strict rules (see the module documentation).
pub(crate) struct Strict<D>(pub D);

/// A visitor handed what a `Strict` deserializer reads, itself under the strict rules.
struct Checked<V>(V);

/// A seed whose deserializer is wrapped in `Strict`.
struct CheckedSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for CheckedSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strict(deserializer))
    }
}

macro_rules! forward_checked {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                self.0.$method(Checked(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_checked! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64 deserialize_char deserialize_str deserialize_string deserialize_bytes
        deserialize_byte_buf deserialize_option deserialize_unit deserialize_seq deserialize_map
        deserialize_identifier
    }

    /// An ignored value is still read through the rules: a repeated key is rejected wherever it is.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(Checked(visitor))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, Checked(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Checked(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Checked(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Checked(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        // Read as any value, so that `null` reaches `NullAsEmptyObject` (serde_json's own struct
        // reading refuses it); an object or array is read as before.
        let _ = (name, fields);
        self.0.deserialize_any(Checked(NullAsEmptyObject(visitor)))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        // Read as any value: serde_json's own enum reading calls a number or an array a syntax
        // error (400), where it is a value of the wrong type (422) like any other.
        let _ = (name, variants);
        self.0.deserialize_any(Checked(EnumFromAny(visitor)))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! forward_visits {
    ($($method:ident($type:ty))*) => {
        $(
            fn $method<E: de::Error>(self, value: $type) -> Result<V::Value, E> {
                self.0.$method(value)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Checked<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(formatter)
    }

    forward_visits! {
        visit_bool(bool) visit_i8(i8) visit_i16(i16) visit_i32(i32) visit_i64(i64) visit_i128(i128)
        visit_u8(u8) visit_u16(u16) visit_u32(u32) visit_u64(u64) visit_u128(u128) visit_f32(f32)
        visit_char(char) visit_str(&str) visit_borrowed_str(&'de str) visit_string(String)
        visit_bytes(&[u8]) visit_borrowed_bytes(&'de [u8]) visit_byte_buf(Vec<u8>)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<V::Value, E> {
        const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
        // In that range `as i64` truncates exactly, so this is `value.fract() == 0.0` without a
        // call to libm's `trunc` for each of the query vector's numbers.
        if (-TWO_POW_63..TWO_POW_63).contains(&value) && value == value as i64 as f64 {
            return self.0.visit_i64(value as i64);
        }
        self.0.visit_f64(value)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(Strict(deserializer))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(Strict(deserializer))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(CheckedSeq { inner: seq, count: 0 })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(CheckedMap { inner: map, keys: HashSet::new() })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.0.visit_enum(CheckedEnum(data))
    }
}

/// A struct's visitor that reads `null` as `{}`: its fields then take their defaults (or are
/// missing, when required).
struct NullAsEmptyObject<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for NullAsEmptyObject<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(formatter)
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_map(de::value::MapDeserializer::new(std::iter::empty::<((), ())>()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(map)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(seq)
    }
}

/// An array's items, counted: the one after the `MAX_JSON_ARRAY`th is an error as soon as it
/// is seen, so a body of 174k ids costs a few ms before its 422, not a full parse.
struct CheckedSeq<A> {
    inner: A,
    count: usize,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for CheckedSeq<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        if self.count == MAX_JSON_ARRAY {
            return match self.inner.next_element::<IgnoredAny>()? {
                Some(_) => Err(A::Error::custom(format!(
                    "an array has more than {MAX_JSON_ARRAY} items (no field takes that many)"
                ))),
                None => Ok(None),
            };
        }
        let item = self.inner.next_element_seed(CheckedSeed(seed))?;
        self.count += usize::from(item.is_some());
        Ok(item)
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// An object's entries, with each key checked against the keys already seen.
struct CheckedMap<A> {
    inner: A,
    keys: HashSet<String>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for CheckedMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        let Some(key) = self.inner.next_key::<String>()? else { return Ok(None) };
        if self.keys.contains(&key) {
            return Err(A::Error::custom(format!("duplicate key {key:?}")));
        }
        let value = seed.deserialize(key.as_str().into_deserializer())?;
        self.keys.insert(key);
        Ok(Some(value))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.next_value_seed(CheckedSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// An enum value, whose content (of a newtype, tuple or struct variant) is read under the rules.
struct CheckedEnum<A>(A);

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for CheckedEnum<A> {
    type Error = A::Error;
    type Variant = CheckedVariant<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(CheckedSeed(seed))?;
        Ok((value, CheckedVariant(variant)))
    }
}

struct CheckedVariant<A>(A);

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for CheckedVariant<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(CheckedSeed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Checked(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Checked(visitor))
    }
}

/// An enum read from any JSON value: a string is a unit variant, an object of one key a variant
/// with content; anything else is a value of the wrong type.
struct EnumFromAny<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for EnumFromAny<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(formatter)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<V::Value, E> {
        self.0.visit_enum(value.into_deserializer())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_enum(MapAccessDeserializer::new(map))
    }
}
