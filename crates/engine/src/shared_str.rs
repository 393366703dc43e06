//! `SharedStr`: a metadata string that many records hold (a page's title, summary and URL are on
//! each of its sections and chunks; a product, version or topic on thousands of pages), kept once.
//! `SharedText`: a record's text, which for a chunk is a passage of its section's text, kept once.

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
    #[cfg(test)]
    pub(crate) fn shares_with(&self, other: &SharedStr) -> bool {
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
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(FromText(std::marker::PhantomData))
    }
}

/// Reads a string as a `T` made from the text itself where the reader lends it (no `String` in
/// between): how `SharedStr` and `SharedText` are read.
struct FromText<T>(std::marker::PhantomData<T>);

impl<T: for<'a> From<&'a str>> serde::de::Visitor<'_> for FromText<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<T, E> {
        Ok(T::from(text))
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
    fn a_passage_shares_the_text_that_holds_it() {
        // The passage's first 32 bytes also occur earlier, followed by something else.
        let start = "Настройка DNS-фильтрации ";
        let passage = format!("{start}на Android: откройте раздел «Защита».");
        let section: SharedText = format!("Заголовок\n{start}на iOS.\n{passage}\nКонец.").into();
        let chunk = SharedText::from(passage.as_str());
        let shared = chunk.within(&section).expect("the section holds the passage");
        assert!(shared.shares_with(&section));
        assert_eq!(shared, chunk);
        assert_eq!(shared.as_str(), passage);
        // A passage of a passage is a passage of the same text.
        let tail = SharedText::from("откройте раздел");
        let inner = tail.within(&shared).unwrap();
        assert!(inner.shares_with(&section));
        assert_eq!(inner.as_str(), "откройте раздел");
        assert!(SharedText::from("не в тексте").within(&section).is_none());
        assert!(SharedText::default().within(&section).is_none());
        assert_eq!(serde_json::to_string(&inner).unwrap(), "\"откройте раздел\"");
        // Its bounds in the text that holds it make it again (as the local copy writes and reads
        // it), relative to a passage too; bounds outside the text or inside a character do not.
        let (from, to) = shared.bounds_in(&section).unwrap();
        let again = SharedText::passage(&section, from as usize, to as usize).unwrap();
        assert!(again.shares_with(&section));
        assert_eq!(again.as_str(), passage);
        let (from, to) = inner.bounds_in(&shared).unwrap();
        assert_eq!(SharedText::passage(&shared, from as usize, to as usize).unwrap().as_str(), "откройте раздел");
        assert!(chunk.bounds_in(&section).is_none(), "a copy has no bounds in it");
        assert!(section.bounds_in(&shared).is_none(), "the section is not inside its passage");
        let length = section.as_str().len();
        assert!(SharedText::passage(&section, 0, length + 1).is_none());
        assert!(SharedText::passage(&section, 5, 4).is_none());
        assert!(SharedText::passage(&section, 1, 4).is_none(), "inside the first Cyrillic letter");
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

/// A record's text, which may be a passage of a longer text another record holds (a chunk's text
/// is a passage of its section's): then it holds a share of that text, not a copy. Compared,
/// ordered and written as the text it reads as.
#[derive(Clone, Default)]
pub struct SharedText {
    whole: Option<Arc<str>>,
    /// The passage's bounds in `whole`; `WHOLE` as `end`: all of it.
    start: u32,
    end: u32,
}

const WHOLE: u32 = u32::MAX;

impl SharedText {
    pub fn as_str(&self) -> &str {
        match &self.whole {
            Some(whole) if self.end == WHOLE => whole,
            Some(whole) => &whole[self.start as usize..self.end as usize],
            None => "",
        }
    }

    /// This text as a passage of `outer`'s, sharing it, when `outer` holds it (its first place).
    pub fn within(&self, outer: &SharedText) -> Option<SharedText> {
        let text = self.as_str();
        if text.is_empty() {
            return None;
        }
        let at = find(outer.as_str().as_bytes(), text.as_bytes())?;
        Self::passage(outer, at, at + text.len())
    }

    /// Where this text is in `outer`'s (start and end in bytes), when it is a share of the same
    /// text, not a copy.
    pub fn bounds_in(&self, outer: &SharedText) -> Option<(u32, u32)> {
        let (Some(whole), Some(outer_whole)) = (&self.whole, &outer.whole) else { return None };
        if !Arc::ptr_eq(whole, outer_whole) {
            return None;
        }
        let (start, end) = self.range();
        let (outer_start, outer_end) = outer.range();
        (outer_start <= start && end <= outer_end).then(|| ((start - outer_start) as u32, (end - outer_start) as u32))
    }

    /// The passage of `outer`'s text from `from` to `to` (bytes), sharing it; `None` when those
    /// are not bounds of characters inside it.
    pub fn passage(outer: &SharedText, from: usize, to: usize) -> Option<SharedText> {
        let whole = outer.whole.as_ref()?;
        let text = outer.as_str();
        // A bound past the end is not a character's either.
        if from > to || !text.is_char_boundary(from) || !text.is_char_boundary(to) {
            return None;
        }
        let offset = outer.range().0;
        let (start, end) =
            (u32::try_from(offset + from).ok()?, u32::try_from(offset + to).ok().filter(|&end| end != WHOLE)?);
        Some(SharedText { whole: Some(Arc::clone(whole)), start, end })
    }

    /// This text's bounds in `whole`.
    fn range(&self) -> (usize, usize) {
        match &self.whole {
            Some(whole) if self.end == WHOLE => (0, whole.len()),
            Some(_) => (self.start as usize, self.end as usize),
            None => (0, 0),
        }
    }

    /// Whether `self` is a passage of `outer`'s text (not a copy of it).
    #[cfg(test)]
    pub(crate) fn shares_with(&self, outer: &SharedText) -> bool {
        matches!((&self.whole, &outer.whole), (Some(a), Some(b)) if Arc::ptr_eq(a, b))
    }
}

/// The first place of `needle` in `haystack`: its first bytes looked for (a short needle is found
/// many bytes at a time), the rest compared where they are. A whole passage as the needle would
/// first be analysed byte by byte, which for a chunk's text costs more than the search.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    const PROBE: usize = 32;
    let probe = &needle[..needle.len().min(PROBE)];
    let mut from = 0;
    while let Some(offset) = memchr::memmem::find(haystack.get(from..)?, probe) {
        let at = from + offset;
        if haystack[at..].starts_with(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

impl From<&str> for SharedText {
    fn from(text: &str) -> Self {
        Self { whole: (!text.is_empty()).then(|| Arc::from(text)), start: 0, end: WHOLE }
    }
}

impl From<String> for SharedText {
    fn from(text: String) -> Self {
        Self::from(text.as_str())
    }
}

impl std::ops::Deref for SharedText {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self.as_str(), f)
    }
}

impl PartialEq for SharedText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SharedText {}

impl PartialEq<&str> for SharedText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for SharedText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SharedText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(FromText(std::marker::PhantomData))
    }
}
