//! How a ranked list holds its records: by their number in the loaded level they belong to, so
//! that listing a candidate reads nothing of the record itself.

use super::features::{IdOrder, RecordFeatures};
use crate::model::Record;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// One tenant's records of one level as the in-memory index keeps them, numbered by ascending
/// id, with the features derived from each (inline: reading a candidate's features is one load
/// from this array, not a pointer to follow).
#[derive(Debug, Default)]
pub(crate) struct LevelStore {
    pub(crate) records: Vec<Arc<Record>>,
    pub(crate) features: Vec<RecordFeatures>,
    /// Each record's `features.page`, side by side: the cascade keys hundreds of candidates per
    /// search by page, and this reads a few cache lines where the features are a line each.
    pages: Vec<Option<IdOrder>>,
}

impl LevelStore {
    pub(crate) fn new(records: Vec<Arc<Record>>, features: Vec<RecordFeatures>) -> Self {
        let pages = features.iter().map(|features| features.page.clone()).collect();
        Self { records, features, pages }
    }
}

/// A record in a ranked list. A record of a loaded level is its level's store and its number
/// there: making, copying and dropping one touches only the store's reference count, shared by
/// the whole list, instead of each record's own (a load from memory per candidate, and for two
/// searches at once a cache line passed between cores). The record is read when the list is.
#[derive(Clone)]
pub struct RecordRef(Held);

#[derive(Clone)]
enum Held {
    Stored {
        store: Arc<LevelStore>,
        number: u32,
    },
    /// A record on its own: read from a backend without a replica, or made by a test.
    Own {
        record: Arc<Record>,
        features: Option<Arc<RecordFeatures>>,
    },
}

impl RecordRef {
    /// Record `number` of `store`.
    pub(crate) fn stored(store: &Arc<LevelStore>, number: usize) -> Self {
        debug_assert!(number < store.records.len());
        Self(Held::Stored { store: Arc::clone(store), number: number as u32 })
    }

    /// A record that no store holds, with its derived features when they are known.
    pub(crate) fn own(record: Arc<Record>, features: Option<Arc<RecordFeatures>>) -> Self {
        Self(Held::Own { record, features })
    }

    /// The record's derived features, when its index keeps them.
    pub(crate) fn features(&self) -> Option<&RecordFeatures> {
        match &self.0 {
            Held::Stored { store, number } => Some(&store.features[*number as usize]),
            Held::Own { features, .. } => features.as_deref(),
        }
    }

    /// The record's page number (`RecordFeatures::page`), when its index numbered the pages.
    pub(crate) fn page(&self) -> Option<&IdOrder> {
        match &self.0 {
            Held::Stored { store, number } => store.pages[*number as usize].as_ref(),
            Held::Own { features, .. } => features.as_deref()?.page.as_ref(),
        }
    }

    /// The record's store and its number there (its place in id order), for a stored record.
    pub(crate) fn stored_at(&self) -> Option<(&Arc<LevelStore>, u32)> {
        match &self.0 {
            Held::Stored { store, number } => Some((store, *number)),
            Held::Own { .. } => None,
        }
    }

    /// The record as a shared pointer of its own.
    #[cfg(test)]
    pub(crate) fn to_arc(&self) -> Arc<Record> {
        match &self.0 {
            Held::Stored { store, number } => Arc::clone(&store.records[*number as usize]),
            Held::Own { record, .. } => Arc::clone(record),
        }
    }
}

impl From<Arc<Record>> for RecordRef {
    fn from(record: Arc<Record>) -> Self {
        Self::own(record, None)
    }
}

impl Deref for RecordRef {
    type Target = Record;

    fn deref(&self) -> &Record {
        match &self.0 {
            Held::Stored { store, number } => &store.records[*number as usize],
            Held::Own { record, .. } => record,
        }
    }
}

impl fmt::Debug for RecordRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Record::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> Record {
        Record {
            id: id.to_string(),
            meta: Default::default(),
            text: format!("text of {id}").into(),
            embedding: Vec::new(),
        }
    }

    #[test]
    fn a_stored_record_reads_its_own_record_and_features() {
        let records: Vec<Arc<Record>> = ["a", "b", "c"].map(|id| Arc::new(record(id))).into();
        let scope = Arc::new(());
        let features = records
            .iter()
            .enumerate()
            .map(|(number, r)| {
                let mut features = RecordFeatures::of(r, &Default::default());
                features.page = (number > 0).then(|| IdOrder { scope: Arc::clone(&scope), number: 7 + number as u32 });
                features
            })
            .collect();
        let store = Arc::new(LevelStore::new(records, features));
        assert!(RecordRef::stored(&store, 0).page().is_none());
        let page = RecordRef::stored(&store, 2).page().cloned().unwrap();
        assert!(Arc::ptr_eq(&page.scope, &scope) && page.number == 9);
        let held = RecordRef::stored(&store, 1);
        assert_eq!(held.id, "b");
        assert_eq!(held.text, "text of b");
        assert!(std::ptr::eq(held.features().unwrap(), &store.features[1]));
        assert!(Arc::ptr_eq(&held.to_arc(), &store.records[1]));
        assert!(held.stored_at().is_some_and(|(at, number)| Arc::ptr_eq(at, &store) && number == 1));
        // A copy holds the store, not the record: the record's own count is unchanged.
        let copies: Vec<RecordRef> = (0..10).map(|_| held.clone()).collect();
        assert_eq!(Arc::strong_count(&store.records[1]), 1);
        assert_eq!(Arc::strong_count(&store), 12);
        drop(copies);
        assert_eq!(Arc::strong_count(&store), 2);
    }

    #[test]
    fn an_own_record_keeps_what_it_was_given() {
        let shared = Arc::new(record("x"));
        let held = RecordRef::own(Arc::clone(&shared), None);
        assert_eq!(held.id, "x");
        assert!(held.features().is_none());
        assert!(held.stored_at().is_none());
        assert!(Arc::ptr_eq(&held.to_arc(), &shared));
        let features = Arc::new(RecordFeatures::of(&shared, &Default::default()));
        let with = RecordRef::own(shared, Some(Arc::clone(&features)));
        assert!(std::ptr::eq(with.features().unwrap(), &*features));
    }
}
