//! `SharedStr`: a metadata string that many records hold (a page's title, summary and URL are on
//! each of its sections and chunks; a product, version or topic on thousands of pages), kept once.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::RefCell;
use std::sync::Arc;

/// An immutable string whose copies share one allocation. Made from text (read from a snapshot,
/// Chroma or a local copy, or built in code), it reuses the allocation of an equal string made
/// shortly before on the same thread (`RECENT`): a page's records, read one after the other,
/// keep one copy of each of their page's strings instead of one per record, and a clone is a
/// reference count, not a copy.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SharedStr(Arc<str>);

/// How many strings each thread remembers (a table indexed by the string's hash, one string a
/// slot): enough that the dozen strings of a page's records seldom take each other's slot (two
/// of them that do are read again for each record), few enough that what a thread keeps alive
/// after the records are gone is at most a few hundred kilobytes.
const RECENT: usize = 4096;

thread_local! {
    static RECENT_STRINGS: RefCell<Vec<Option<Arc<str>>>> = RefCell::new(vec![None; RECENT]);
}

impl SharedStr {
    /// `text`, sharing the allocation of an equal string made recently on this thread.
    pub fn new(text: &str) -> Self {
        use std::hash::BuildHasher;
        let slot = (rustc_hash::FxBuildHasher.hash_one(text) as usize) % RECENT;
        let shared = RECENT_STRINGS.try_with(|recent| {
            let mut recent = recent.borrow_mut();
            match &recent[slot] {
                Some(known) if **known == *text => Arc::clone(known),
                _ => {
                    let made: Arc<str> = Arc::from(text);
                    recent[slot] = Some(Arc::clone(&made));
                    made
                }
            }
        });
        // A thread being torn down has no table: the string is then made on its own.
        Self(shared.unwrap_or_else(|_| Arc::from(text)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `self` and `other` are one allocation (not merely equal).
    pub fn shares_with(&self, other: &SharedStr) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for SharedStr {
    fn default() -> Self {
        Self::new("")
    }
}

impl std::ops::Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for SharedStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl From<&str> for SharedStr {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for SharedStr {
    fn from(text: String) -> Self {
        Self::new(&text)
    }
}

impl From<&String> for SharedStr {
    fn from(text: &String) -> Self {
        Self::new(text)
    }
}

impl From<SharedStr> for String {
    fn from(text: SharedStr) -> Self {
        text.0.to_string()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == *other.0
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        **self == *other.0
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        **self == *other.0
    }
}

impl Serialize for SharedStr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedStr {
    /// Read from the text itself where the reader lends it (no `String` in between).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = SharedStr;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<SharedStr, E> {
                Ok(SharedStr::new(text))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_made_in_a_row_share_one_allocation() {
        let title = String::from("Установка на Android");
        let first = SharedStr::from(title.as_str());
        let second: SharedStr = serde_json::from_str("\"Установка на Android\"").unwrap();
        assert!(first.shares_with(&second));
        assert_eq!(second, "Установка на Android");
        let other = SharedStr::new("Установка на iOS");
        assert!(!other.shares_with(&first));
        assert_eq!(other.as_str(), "Установка на iOS");
    }

    #[test]
    fn a_string_reads_and_writes_as_json_text() {
        let escaped: SharedStr = serde_json::from_str(r#""a \"quoted\" \u0431""#).unwrap();
        assert_eq!(escaped, "a \"quoted\" б");
        assert_eq!(serde_json::to_string(&escaped).unwrap(), r#""a \"quoted\" б""#);
        let error = serde_json::from_str::<SharedStr>("5").unwrap_err().to_string();
        assert!(error.contains("expected a string"), "{error}");
    }

    #[test]
    fn strings_that_meet_in_one_slot_stay_themselves() {
        // More distinct strings than the table has slots: each must still read back as itself.
        let made: Vec<(String, SharedStr)> = (0..RECENT * 4)
            .map(|n| {
                let text = format!("value {n}");
                let shared = SharedStr::new(&text);
                (text, shared)
            })
            .collect();
        for (text, shared) in &made {
            assert_eq!(shared.as_str(), text);
            assert_eq!(SharedStr::new(text), *shared);
        }
    }
}
