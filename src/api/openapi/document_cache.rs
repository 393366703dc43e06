//! The served OpenAPI document, kept as bytes (`openapi::document` builds it).

/// The serialised document, built once per index vector dimension and tuning generation: the
/// dimension (known once the index is loaded) and the themes (a config reload may change them)
/// are the only inputs that change after start-up, and building the document costs milliseconds
/// of CPU.
#[derive(Debug, Default)]
pub(crate) struct DocumentCache(std::sync::Mutex<Option<((usize, u64), axum::body::Bytes)>>);

impl DocumentCache {
    /// The bytes kept for `key`, else those `build` makes, kept for it from now on.
    pub(crate) fn get_or_build(
        &self,
        key: (usize, u64),
        build: impl FnOnce() -> axum::body::Bytes,
    ) -> axum::body::Bytes {
        let cached = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, bytes)) = cached.as_ref().filter(|(built_for, _)| *built_for == key) {
            return bytes.clone();
        }
        drop(cached);
        let bytes = build();
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some((key, bytes.clone()));
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::DocumentCache;
    use axum::body::Bytes;

    #[test]
    fn a_document_is_built_once_per_key() {
        let cache = DocumentCache::default();
        let mut builds = 0;
        let mut get = |key| {
            cache.get_or_build(key, || {
                builds += 1;
                Bytes::from(format!("{key:?}"))
            })
        };
        assert_eq!(get((384, 0)), "(384, 0)");
        assert_eq!(get((384, 0)), "(384, 0)");
        assert_eq!(get((384, 1)), "(384, 1)", "a config reload's new generation builds it again");
        assert_eq!(builds, 2);
    }
}
