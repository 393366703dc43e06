//! The in-memory index's tests: its rankings against the definitions they must reproduce, loads,
//! rebuilds and snapshot files.

use super::engine::*;
use super::*;
use crate::embed::PseudoEmbedder;
use crate::fixtures;
use crate::index::{IndexErrorKind, RecordFilter, ScoredRecord};
use crate::model::{Level, Record, Snapshot};
use std::path::Path;
use std::sync::Arc;

/// The definition the index must reproduce: every record of the level that passes the
/// filter, scored by the rounded cosine, best first with ties by id, cut at `k`.
fn reference_knn(
    snapshot: &Snapshot,
    level: Level,
    filter: &RecordFilter,
    query: &[f32],
    k: usize,
) -> Vec<(String, f32)> {
    let mut scored: Vec<ScoredRecord> = snapshot
        .records(level)
        .iter()
        .filter(|record| filter.matches(&record.meta))
        .map(|record| {
            let score = super::super::cosine(query, &record.embedding);
            ScoredRecord { record: Arc::new(record.clone()).into(), score: (score * 1e6).round() / 1e6 }
        })
        .collect();
    super::super::sort_scored(&mut scored);
    scored.into_iter().take(k).map(|s| (s.record.id.clone(), s.score)).collect()
}

fn ids_and_scores(results: &[ScoredRecord]) -> Vec<(String, f32)> {
    results.iter().map(|s| (s.record.id.clone(), s.score)).collect()
}

fn filters() -> Vec<RecordFilter> {
    let t1 = RecordFilter::tenant("t1");
    vec![
        t1.clone(),
        RecordFilter::tenant("t2"),
        RecordFilter::tenant("nobody"),
        RecordFilter { doc_ids: Some(vec!["sdk/ios/install".into(), "docs/admin/tags".into()]), ..t1.clone() },
        RecordFilter {
            section_ids: Some(vec!["docs/admin/tags#s1".into(), "sdk/ios/install#s2".into()]),
            ..t1.clone()
        },
        RecordFilter {
            doc_ids: Some(vec!["docs/admin/tags".into()]),
            section_ids: Some(vec!["docs/admin/tags#s1".into(), "sdk/ios/install#s1".into()]),
            ..t1.clone()
        },
        RecordFilter { doc_ids: Some(vec!["acme/secret-install".into()]), ..t1.clone() },
        RecordFilter { product: Some("sdk".into()), ..t1.clone() },
        RecordFilter { tags: vec!["ios".into()], doc_ids: Some(vec!["sdk/ios/install".into()]), ..t1 },
    ]
}

#[test]
fn restricted_rankings_read_after_a_tenant_wide_one_agree_with_their_definitions() {
    // A tenant-wide ranking leaves its scores to the thread; a restricted ranking of the same
    // query reads them, and of another query must not.
    let snapshot = fixtures::snapshot();
    let index = LoadedIndex::build(snapshot.clone()).unwrap();
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let (first, second) = (embedder.embed_one("установка SDK на iOS"), embedder.embed_one("теги"));
    let (first_terms, second_terms) = (crate::text::terms("установка тегов"), crate::text::terms("android"));
    let everything = RecordFilter::tenant("t1");
    for level in Level::ALL {
        for filter in filters().into_iter().filter(|filter| filter.tenant_id == "t1") {
            for (query, other) in [(&first, &second), (&second, &first)] {
                index.knn(level, &everything, query, 100).unwrap();
                let got = ids_and_scores(&index.knn(level, &filter, query, 100).unwrap());
                assert_eq!(got, reference_knn(&snapshot, level, &filter, query, 100), "{level:?} {filter:?}");
                let got = ids_and_scores(&index.knn(level, &filter, other, 100).unwrap());
                assert_eq!(got, reference_knn(&snapshot, level, &filter, other, 100), "{level:?} {filter:?}");
            }
            for (terms, other) in [(&first_terms, &second_terms), (&second_terms, &first_terms)] {
                let all = ids_and_scores(&index.lexical(level, &everything, terms, usize::MAX));
                let allowed: Vec<String> =
                    index.get(level, &filter, usize::MAX).iter().map(|record| record.id.clone()).collect();
                let mut expected = all.clone();
                expected.retain(|(id, _)| allowed.contains(id));
                assert_eq!(ids_and_scores(&index.lexical(level, &filter, terms, usize::MAX)), expected);
                let fresh = ids_and_scores(&index.lexical(level, &filter, other, usize::MAX));
                index.lexical(level, &RecordFilter::tenant("t2"), other, usize::MAX);
                assert_eq!(ids_and_scores(&index.lexical(level, &filter, other, usize::MAX)), fresh);
            }
        }
    }
}

#[test]
fn pages_are_numbered_in_doc_id_order_across_the_levels_of_a_tenant() {
    let index = LoadedIndex::build(fixtures::snapshot()).unwrap();
    for tenant in ["t1", "t2"] {
        let tenant = index.tenant(tenant).unwrap();
        let mut pages: Vec<(String, u32, Arc<()>)> = Vec::new();
        for level in Level::ALL {
            let data = tenant.level(level);
            for (record, features) in data.store.records.iter().zip(&data.store.features) {
                let page = features.page.as_ref().expect("every record has a page number");
                pages.push((record.meta.doc_id.to_string(), page.number, Arc::clone(&page.scope)));
            }
        }
        assert!(pages.iter().all(|(.., scope)| Arc::ptr_eq(scope, &pages[0].2)), "one scope per tenant build");
        let mut doc_ids: Vec<&str> = pages.iter().map(|(doc_id, ..)| doc_id.as_str()).collect();
        doc_ids.sort_unstable();
        doc_ids.dedup();
        for (doc_id, number, _) in &pages {
            assert_eq!(doc_ids[*number as usize], doc_id, "the number is the page's place in doc id order");
        }
    }
    let scope_of = |tenant: &str| {
        Arc::clone(&index.tenant(tenant).unwrap().level(Level::Doc).store.features[0].page.as_ref().unwrap().scope)
    };
    assert!(!Arc::ptr_eq(&scope_of("t1"), &scope_of("t2")), "numbers of two tenants never compare");
}

#[test]
fn id_lists_resolved_for_one_tenant_are_not_reused_for_another() {
    // The thread remembers the last id lists it resolved; the same lists asked of another
    // tenant (or another level) must resolve there, never to the first tenant's records.
    let snapshot = fixtures::snapshot();
    let index = LoadedIndex::build(snapshot.clone()).unwrap();
    let query = PseudoEmbedder::new(fixtures::DIMENSION).embed_one("установка SDK");
    let terms = crate::text::terms("установка sdk gradle");
    let ids = Some(vec!["acme/secret-install".to_string(), "sdk/ios/install".to_string()]);
    for level in Level::ALL {
        for tenant in ["t1", "t2", "t1", "nobody", "t2"] {
            let filter = RecordFilter { doc_ids: ids.clone(), ..RecordFilter::tenant(tenant) };
            let dense = ids_and_scores(&index.knn(level, &filter, &query, 100).unwrap());
            assert_eq!(dense, reference_knn(&snapshot, level, &filter, &query, 100), "{level:?} {tenant}");
            let lexical = index.lexical(level, &filter, &terms, 100);
            assert!(lexical.iter().all(|s| s.record.meta.tenant_id == tenant), "{level:?} {tenant}");
            let expected: Vec<&str> = if tenant == "nobody" {
                Vec::new()
            } else if tenant == "t1" {
                vec!["sdk/ios/install"]
            } else {
                vec!["acme/secret-install"]
            };
            let got = index.get(level, &filter, 100);
            let mut got_docs: Vec<&str> = got.iter().map(|r| r.meta.doc_id.as_str()).collect();
            got_docs.dedup();
            assert_eq!(got_docs, expected, "{level:?} {tenant}");
            assert!(!dense.is_empty() || tenant == "nobody", "{level:?} {tenant}");
        }
    }
}

#[test]
fn knn_get_and_lexical_agree_with_their_definitions() {
    let snapshot = fixtures::snapshot();
    let index = LoadedIndex::build(snapshot.clone()).unwrap();
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let queries =
        [embedder.embed_one("установка SDK на iOS"), embedder.embed_one("теги"), vec![0.0; fixtures::DIMENSION]];
    let terms = crate::text::terms("установка тегов Android");
    for level in Level::ALL {
        for filter in filters() {
            let mut expected_ids: Vec<&Record> =
                snapshot.records(level).iter().filter(|record| filter.matches(&record.meta)).collect();
            expected_ids.sort_by(|a, b| a.id.cmp(&b.id));
            let got: Vec<String> = index.get(level, &filter, usize::MAX).iter().map(|r| r.id.clone()).collect();
            assert_eq!(got, expected_ids.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), "{level:?} {filter:?}");
            for query in &queries {
                for k in [1, 3, 100] {
                    let got = ids_and_scores(&index.knn(level, &filter, query, k).unwrap());
                    assert_eq!(got, reference_knn(&snapshot, level, &filter, query, k), "{level:?} {filter:?} k={k}");
                }
            }
            // BM25 statistics are the tenant's: a filter only removes records from the list.
            let everything = RecordFilter::tenant(filter.tenant_id.clone());
            let mut expected = ids_and_scores(&index.lexical(level, &everything, &terms, usize::MAX));
            let allowed: Vec<String> = expected_ids.iter().map(|r| r.id.clone()).collect();
            expected.retain(|(id, _)| allowed.contains(id));
            expected.truncate(2);
            assert_eq!(ids_and_scores(&index.lexical(level, &filter, &terms, 2)), expected, "{level:?} {filter:?}");
        }
    }
}

/// `got` holds the records `whole` holds, in the same order, and ranks them alike under every
/// filter, at every level, with the same page numbers.
pub(super) fn assert_serves_alike(got: &LoadedIndex, whole: &LoadedIndex) {
    assert_eq!(got.level_counts(), whole.level_counts());
    assert_eq!(got.stats_info(), whole.stats_info());
    assert_eq!(got.dimension(), whole.dimension());
    for (tenant, part) in &whole.tenants {
        for level in Level::ALL {
            let records: Vec<&Record> = part.records(level).iter().map(|r| r.as_ref()).collect();
            let copied: Vec<&Record> = got.tenants[tenant].records(level).iter().map(|r| r.as_ref()).collect();
            assert_eq!(copied, records, "{tenant} {level:?}");
        }
    }
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    for text in ["установка SDK", "обязательные теги", "webhook"] {
        let query = embedder.embed_one(text);
        let terms = crate::text::terms(text);
        for filter in filters() {
            for level in Level::ALL {
                let ranked = ids_and_scores(&got.knn(level, &filter, &query, 100).unwrap());
                assert_eq!(ranked, ids_and_scores(&whole.knn(level, &filter, &query, 100).unwrap()), "{level:?}");
                let ranked = ids_and_scores(&got.lexical(level, &filter, &terms, 100));
                assert_eq!(ranked, ids_and_scores(&whole.lexical(level, &filter, &terms, 100)), "{level:?}");
                let pages = |index: &LoadedIndex| -> Vec<Option<u32>> {
                    index
                        .knn(level, &filter, &query, 100)
                        .unwrap()
                        .iter()
                        .map(|hit| hit.record.page().map(|p| p.number))
                        .collect()
                };
                assert_eq!(pages(got), pages(whole));
            }
        }
    }
}

#[test]
fn a_streamed_load_searches_like_a_snapshot_and_keeps_one_copy_of_a_repeated_record() {
    let snapshot = fixtures::snapshot();
    let whole = LoadedIndex::build(snapshot.clone()).unwrap();
    // Pages arrive in any order, across levels, and offset paging may repeat a record.
    let mut builder = IndexBuilder::new(0);
    for (level, records) in Level::ALL.into_iter().zip([&snapshot.docs, &snapshot.sections, &snapshot.chunks]).rev() {
        for record in records.iter().rev().chain(records.first()) {
            builder.add(level, record.clone()).unwrap();
        }
    }
    let streamed = builder.finish(snapshot.embedding_model.clone(), snapshot.indexed_at.clone()).unwrap();
    assert_eq!(streamed.level_counts(), whole.level_counts());
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let query = embedder.embed_one("установка SDK");
    let terms = crate::text::terms("установка SDK");
    for level in Level::ALL {
        let filter = RecordFilter::tenant("t1");
        let got = ids_and_scores(&streamed.knn(level, &filter, &query, 100).unwrap());
        assert_eq!(got, ids_and_scores(&whole.knn(level, &filter, &query, 100).unwrap()), "{level:?}");
        let got = ids_and_scores(&streamed.lexical(level, &filter, &terms, 100));
        assert_eq!(got, ids_and_scores(&whole.lexical(level, &filter, &terms, 100)), "{level:?}");
    }
    let mut bad = fixtures::snapshot().chunks[0].clone();
    bad.embedding.pop();
    let error = IndexBuilder::new(fixtures::DIMENSION).add(Level::Chunk, bad).unwrap_err();
    assert_eq!(error.kind, IndexErrorKind::Corrupt);
    let empty = IndexBuilder::new(0).finish(String::new(), String::new()).unwrap_err();
    assert_eq!(empty.kind, IndexErrorKind::Corrupt);
}

/// A restart from the local copy serves what the snapshot served: the same records, the
/// same dense and lexical rankings under every filter, the same page numbering. A copy of
/// another version of the file, or a damaged one, is not taken.
#[cfg(target_os = "linux")]
#[test]
fn a_copy_writer_gives_way_to_the_searches_and_only_it_does() {
    // SAFETY (both): `getpriority` on the calling thread's id reads no memory of ours.
    let own = || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
    let before = own();
    let (writer, after_writer) = std::thread::spawn(move || {
        local_copy::give_way_to_searches();
        // A thread the writer starts (the parts are written on several) inherits its nice.
        (own(), std::thread::spawn(own).join().expect("no panic"))
    })
    .join()
    .expect("no panic");
    assert_eq!(writer, before.max(10), "from {before}");
    assert_eq!(after_writer, writer);
    assert_eq!(own(), before, "the calling thread alone changes");
}

#[test]
fn a_local_copy_leaves_no_parts_of_a_dead_or_failed_writer() {
    let whole = LoadedIndex::build(fixtures::snapshot()).unwrap();
    let directory = tempfile::tempdir().unwrap();
    let copy_dir = directory.path().join("index.json.copy");
    std::fs::create_dir_all(&copy_dir).unwrap();
    // Parts of writers killed mid-write (no process has a number above the kernel's limit),
    // and one of a writer that still runs (this test's parent process), which stays.
    let parent = std::os::unix::process::parent_id();
    for name in [".tmp-tenant-74.bin.records0-3-4194999", ".tmp-manifest.json-4194998"] {
        std::fs::write(copy_dir.join(name), b"part").unwrap();
    }
    let running = format!(".tmp-tenant-74.bin-{parent}");
    std::fs::write(copy_dir.join(&running), b"part").unwrap();
    // And the tenant files of a writer killed before its manifest.
    std::fs::write(copy_dir.join("tenant-74.bin"), b"whole, but no manifest names it").unwrap();
    // A start reads the copy first: the dead writers' parts go.
    assert!(local_copy::read(&copy_dir, "v1").unwrap().is_none());
    assert_eq!(directory_listing(&copy_dir), vec![running.clone()]);
    std::fs::remove_file(copy_dir.join(&running)).unwrap();

    // A write that fails (its manifest cannot be created: a directory holds the temporary
    // name) leaves none of its files.
    let blocked = copy_dir.join(format!(".tmp-{}-{}", "manifest.json", std::process::id()));
    std::fs::create_dir(&blocked).unwrap();
    assert!(local_copy::write(&copy_dir, "v1", &whole).is_err());
    std::fs::remove_dir(&blocked).unwrap();
    assert_eq!(directory_listing(&copy_dir), Vec::<String>::new());
    local_copy::write(&copy_dir, "v1", &whole).unwrap();
    assert!(local_copy::read(&copy_dir, "v1").unwrap().is_some());
}

#[test]
fn a_local_copy_reads_back_as_the_index_it_copies() {
    let mut snapshot = fixtures::snapshot();
    // A page with a breadcrumb trail (an HTML page's records carry it).
    let first_doc = snapshot.docs[0].meta.doc_id.clone();
    for record in snapshot.docs.iter_mut().chain(&mut snapshot.sections).chain(&mut snapshot.chunks) {
        if record.meta.doc_id == first_doc {
            record.meta.breadcrumbs = vec!["Главная".into(), "Раздел".into()];
        }
    }
    let whole = LoadedIndex::build(snapshot.clone()).unwrap();
    let directory = tempfile::tempdir().unwrap();
    let copy_dir = directory.path().join("index.json.copy");
    local_copy::write(&copy_dir, "v1", &whole).unwrap();
    let copy = local_copy::read(&copy_dir, "v1").unwrap().expect("a whole copy");
    assert_serves_alike(&copy, &whole);

    // Another version of the file: no copy.
    assert!(local_copy::read(&copy_dir, "v2").unwrap().is_none());
    // Rewritten with one tenant fewer: the other tenant's file goes too.
    let fewer = whole.with_tenants(vec![("t2".to_string(), None)]);
    local_copy::write(&copy_dir, "v3", &fewer).unwrap();
    let files = directory_listing(&copy_dir);
    // The manifest, the tenant's file, its three parts of records and three scan matrices.
    assert_eq!(files.len(), 8, "{files:?}");
    assert_eq!(local_copy::read(&copy_dir, "v3").unwrap().unwrap().level_counts(), fewer.level_counts());
    // A tenant file cut short is an error, never a panic or a partial index.
    // A part of records of another copy is an error.
    let part = copy_dir.join(files.iter().find(|name| name.ends_with(".records2-0")).unwrap());
    let part_bytes = std::fs::read(&part).unwrap();
    let mut foreign = part_bytes.clone();
    foreign[9] ^= 1;
    std::fs::write(&part, &foreign).unwrap();
    assert!(local_copy::read(&copy_dir, "v3").is_err());
    std::fs::write(&part, &part_bytes).unwrap();
    // A scan matrix of the wrong size is an error too.
    let matrix = copy_dir.join(files.iter().find(|name| name.ends_with(".level1")).unwrap());
    let matrix_bytes = std::fs::read(&matrix).unwrap();
    std::fs::write(&matrix, &matrix_bytes[..matrix_bytes.len() - 64]).unwrap();
    assert!(local_copy::read(&copy_dir, "v3").is_err());
    std::fs::write(&matrix, &matrix_bytes).unwrap();
    assert!(local_copy::read(&copy_dir, "v3").unwrap().is_some());
    let tenant_file = copy_dir.join(files.iter().find(|name| name.ends_with(".bin")).unwrap());
    let bytes = std::fs::read(&tenant_file).unwrap();
    for cut in [bytes.len() - 1, bytes.len() / 2, 9] {
        std::fs::write(&tenant_file, &bytes[..cut]).unwrap();
        assert!(local_copy::read(&copy_dir, "v3").is_err(), "cut at {cut}");
    }
    // No manifest: no copy.
    std::fs::remove_file(copy_dir.join("manifest.json")).unwrap();
    assert!(local_copy::read(&copy_dir, "v3").unwrap().is_none());
}

/// A write of an index sharing tenant parts with the copy on disk rewrites only the parts
/// that changed, and the copy then reads back as the new index; a note is kept with it, and
/// rewritten alone without touching the data.
#[test]
fn a_local_copy_rewrites_only_the_changed_tenants_and_keeps_a_note() {
    let whole = LoadedIndex::build(fixtures::snapshot()).unwrap();
    let directory = tempfile::tempdir().unwrap();
    let copy_dir = directory.path().join("replica");
    let note = serde_json::json!({"cursor": 1});
    let written = local_copy::write_with(&copy_dir, "src", &whole, Some(&note), &Default::default()).unwrap();
    assert!(written.is_all_of(&whole));
    let modified = |tenant: &str| {
        let hex: String = tenant.bytes().map(|byte| format!("{byte:02x}")).collect();
        let mut times = Vec::new();
        for name in directory_listing(&copy_dir).iter().filter(|name| name.starts_with(&format!("tenant-{hex}.bin"))) {
            times.push(std::fs::metadata(copy_dir.join(name)).unwrap().modified().unwrap());
        }
        assert!(!times.is_empty(), "{tenant} has files");
        times
    };
    let (t1_before, t2_before) = (modified("t1"), modified("t2"));
    std::thread::sleep(std::time::Duration::from_millis(20));

    // t2 rebuilt (a new part with the same records), t1 shared.
    let rebuilt = LoadedIndex::build(fixtures::snapshot()).unwrap();
    let t2 = Arc::clone(&rebuilt.tenants["t2"]);
    let next = whole.with_tenants(vec![("t2".to_string(), Some(t2))]);
    assert!(!written.is_all_of(&next));
    let note = serde_json::json!({"cursor": 2});
    let written = local_copy::write_with(&copy_dir, "src", &next, Some(&note), &written).unwrap();
    assert!(written.is_all_of(&next));
    assert_eq!(modified("t1"), t1_before, "the shared part's files are not written again");
    assert_ne!(modified("t2"), t2_before, "the changed part's files are");
    let (copy, kept) = local_copy::read_with_note(&copy_dir, "src").unwrap().expect("a whole copy");
    assert_eq!(kept, Some(note));
    assert_eq!(copy.level_counts(), next.level_counts());

    // The note alone.
    let note = serde_json::json!({"cursor": 3});
    assert!(local_copy::write_note(&copy_dir, "src", &note).unwrap());
    assert_eq!(modified("t1"), t1_before);
    assert_eq!(local_copy::read_with_note(&copy_dir, "src").unwrap().unwrap().1, Some(note.clone()));
    assert!(!local_copy::write_note(&copy_dir, "other", &note).unwrap(), "no copy of another source");
    // A copy written without a note reads back without one.
    local_copy::write(&copy_dir, "src", &whole).unwrap();
    assert_eq!(local_copy::read_with_note(&copy_dir, "src").unwrap().unwrap().1, None);
}

/// Tenant-wide rankings of a level at the size threshold go through its partition once it is
/// built (exact until then), filtered ones too; on levels this small every list is probed, so
/// they agree with the exact ranking exactly.
#[test]
fn tenant_wide_rankings_use_the_partition_once_it_is_built() {
    let index = LoadedIndex::build(fixtures::snapshot()).unwrap();
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let query = embedder.embed_one("установка SDK");
    for level in Level::ALL {
        for filter in filters() {
            let exact = ids_and_scores(&index.knn(level, &filter, &query, 10).unwrap());
            let first = ids_and_scores(&index.knn_approximate(level, &filter, &query, 10, 1).unwrap());
            assert_eq!(first, exact, "{level:?}");
            if let Some(data) = index.level_of(level, &filter.tenant_id) {
                assert!(data.index.prepare_partition(1, std::time::Duration::from_secs(30)));
            }
            let after = ids_and_scores(&index.knn_approximate(level, &filter, &query, 10, 1).unwrap());
            assert_eq!(after, exact, "{level:?}");
        }
    }
}

/// A tenant rebuilt from a delta scores exactly like one built from the whole snapshot: kept
/// records' vectors come back from the scan matrix unchanged, the changed doc's are the new ones.
#[test]
fn a_rebuilt_tenant_searches_like_a_fresh_build() {
    let snapshot = fixtures::snapshot();
    let base = LoadedIndex::build(snapshot.clone()).unwrap();
    let changed_doc = snapshot.docs.iter().find(|doc| doc.meta.tenant_id == "t1").unwrap().meta.doc_id.clone();
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let mut next = snapshot.clone();
    let mut fetched: [Vec<Record>; 3] = Default::default();
    for (slot, level) in Level::ALL.into_iter().enumerate() {
        let records = match level {
            Level::Doc => &mut next.docs,
            Level::Section => &mut next.sections,
            Level::Chunk => &mut next.chunks,
        };
        for record in records.iter_mut().filter(|r| r.meta.tenant_id == "t1" && r.meta.doc_id == changed_doc) {
            record.text = format!("{} обновлено", record.text).into();
            record.embedding = embedder.embed_one(&record.text);
            fetched[slot].push(record.clone());
        }
    }
    let scope = crate::index::change::ChangeScope::Docs([changed_doc.to_string()].into());
    let part = rebuild_tenant(&base, "t1", &scope, fetched, base.dimension()).unwrap();
    let rebuilt = base.with_tenants(vec![("t1".to_string(), part)]);
    let fresh = LoadedIndex::build(next).unwrap();
    let query = embedder.embed_one("обновлено установка");
    let terms = crate::text::terms("обновлено установка");
    for level in Level::ALL {
        for tenant in ["t1", "t2"] {
            let filter = RecordFilter::tenant(tenant);
            let got = ids_and_scores(&rebuilt.knn(level, &filter, &query, 100).unwrap());
            assert_eq!(got, ids_and_scores(&fresh.knn(level, &filter, &query, 100).unwrap()), "{level:?}");
            let got = ids_and_scores(&rebuilt.lexical(level, &filter, &terms, 100));
            assert_eq!(got, ids_and_scores(&fresh.lexical(level, &filter, &terms, 100)), "{level:?}");
        }
    }
    assert!(Arc::ptr_eq(rebuilt.tenant("t2").unwrap(), base.tenant("t2").unwrap()), "t2 is shared, not copied");
}

/// Records that arrive in id order become the scan matrix as they were gathered; in any other
/// order they are laid out again: both serve alike.
#[test]
fn records_in_id_order_and_out_of_it_build_the_same_index() {
    let mut sorted = fixtures::snapshot();
    for records in [&mut sorted.docs, &mut sorted.sections, &mut sorted.chunks] {
        records.sort_by(|a, b| (&a.meta.tenant_id, &a.id).cmp(&(&b.meta.tenant_id, &b.id)));
    }
    let mut reversed = sorted.clone();
    for records in [&mut reversed.docs, &mut reversed.sections, &mut reversed.chunks] {
        records.reverse();
    }
    assert_serves_alike(&LoadedIndex::build(reversed).unwrap(), &LoadedIndex::build(sorted).unwrap());
}

/// A reload that leaves most of a big level as it was shares the scan matrix's unchanged
/// segments with the index it replaces (an edit does not hold the matrix twice), and the
/// result serves exactly like a build from scratch.
#[test]
fn a_reload_shares_the_unchanged_segments_of_a_scan_matrix() {
    use crate::index::vectors::SEGMENT_ROWS;
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let mut snapshot = fixtures::snapshot();
    let template = snapshot.chunks.iter().find(|chunk| chunk.meta.tenant_id == "t1").unwrap().clone();
    for i in 0..2 * SEGMENT_ROWS + 100 {
        let mut chunk = template.clone();
        chunk.id = format!("{}#bulk{i:05}", template.meta.doc_id);
        chunk.meta.chunk_id = Some(chunk.id.clone());
        chunk.text = format!("запись {i}").into();
        chunk.embedding = embedder.embed_one(&chunk.text);
        snapshot.chunks.push(chunk);
    }
    let build = |snapshot: &Snapshot, base: Option<Arc<LoadedIndex>>| {
        let mut builder = IndexBuilder::for_snapshot(base);
        for (level, records) in Level::ALL.into_iter().zip([&snapshot.docs, &snapshot.sections, &snapshot.chunks]) {
            for record in records {
                builder.add(level, record.clone()).unwrap();
            }
        }
        builder.finish(snapshot.embedding_model.clone(), snapshot.indexed_at.clone()).unwrap()
    };
    let base = Arc::new(build(&snapshot, None));
    // One record of the middle segment gets a new text and vector.
    let mut next = snapshot.clone();
    let edited = next.chunks.iter_mut().find(|chunk| chunk.id.ends_with(&format!("bulk{:05}", SEGMENT_ROWS))).unwrap();
    edited.text = "запись исправлена".into();
    edited.embedding = embedder.embed_one(&edited.text);
    let reloaded = build(&next, Some(Arc::clone(&base)));
    fn chunks(index: &LoadedIndex) -> &crate::index::tenant_level::TenantLevel {
        &index.tenant("t1").unwrap().level(Level::Chunk).index
    }
    let records = reloaded.tenant("t1").unwrap().records(Level::Chunk);
    let edited_number = records.iter().position(|record| record.text == "запись исправлена").unwrap();
    let edited_segment = edited_number / SEGMENT_ROWS;
    for segment in 0..records.len().div_ceil(SEGMENT_ROWS) {
        let shared = chunks(&reloaded).shares_vector_segment(chunks(&base), segment);
        assert_eq!(shared, segment != edited_segment, "segment {segment} of {}", records.len());
    }
    assert_serves_alike(&reloaded, &LoadedIndex::build(next).unwrap());
    let query = embedder.embed_one("запись исправлена");
    let best = reloaded.knn(Level::Chunk, &RecordFilter::tenant("t1"), &query, 1).unwrap();
    assert_eq!(best[0].record.text, "запись исправлена");
}

/// A refresh numbers a topic value no record had in the table it shares with the index it
/// derives from: the refreshed records are labelled on numbers exactly as on strings, and
/// another build numbers its own values.
#[test]
fn a_rebuilt_tenant_numbers_new_topic_values_in_the_shared_table() {
    let snapshot = fixtures::snapshot();
    let base = LoadedIndex::build(snapshot.clone()).unwrap();
    let changed_doc = snapshot.docs.iter().find(|doc| doc.meta.tenant_id == "t1").unwrap().meta.doc_id.clone();
    assert_eq!(base.topics().number("Brand-New-Platform"), None);
    let mut fetched: [Vec<Record>; 3] = Default::default();
    for (slot, records) in [&snapshot.docs, &snapshot.sections, &snapshot.chunks].into_iter().enumerate() {
        for record in records.iter().filter(|r| r.meta.tenant_id == "t1" && r.meta.doc_id == changed_doc) {
            let mut record = record.clone();
            record.meta.platform = "brand-new-platform".into();
            fetched[slot].push(record);
        }
    }
    let scope = crate::index::change::ChangeScope::Docs([changed_doc.to_string()].into());
    let part = rebuild_tenant(&base, "t1", &scope, fetched, base.dimension()).unwrap();
    let rebuilt = base.with_tenants(vec![("t1".to_string(), part)]);
    assert!(Arc::ptr_eq(rebuilt.topics(), base.topics()), "one table for the index and its refreshes");
    let number = rebuilt.topics().number("Brand-New-Platform").expect("numbered by the refresh");
    assert_ne!(number, 0);
    let theme = crate::router::Theme {
        id: "new".into(),
        display_name: "new".into(),
        domain: snapshot.docs[0].meta.domain.to_string(),
        section: None,
        platform: Some("BRAND-NEW-PLATFORM".into()),
        role: None,
        description: String::new(),
        keywords: Vec::new(),
        priority: 1.0,
    };
    let themes = [theme];
    let labels = crate::router::ThemeLabels::new(&themes, Some(rebuilt.topics()));
    let level = rebuilt.tenant("t1").unwrap().level(Level::Doc);
    let mut labelled = 0;
    for (record, features) in level.store.records.iter().zip(&level.store.features) {
        let by_numbers = labels.label(&record.meta, Some(&features.topics));
        assert_eq!(by_numbers, crate::router::infer_theme_label(&record.meta, &themes), "{}", record.id);
        labelled += usize::from(by_numbers.is_some());
    }
    assert!(labelled > 0, "the changed doc is labelled");
    assert_eq!(LoadedIndex::build(snapshot).unwrap().topics().number("brand-new-platform"), None);
}

fn directory_listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().to_string_lossy().into()).collect();
    names.sort();
    names
}

#[test]
fn a_failed_snapshot_write_leaves_no_temporary_file_and_the_old_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should go: everything works up to the rename, which fails.
    let path = dir.path().join("index.json");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("keep"), "x").unwrap();
    assert!(write_snapshot_file(&path, &fixtures::snapshot()).is_err());
    assert_eq!(directory_listing(dir.path()), ["index.json"], "no temporary file left behind");

    let path = dir.path().join("ok.json");
    write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
    // A writer killed mid-write (its process is gone) left its temporary file: the next write
    // removes it; a live writer's (this process's) is left alone.
    let abandoned = dir.path().join(".ok.json.tmp-4294967-0");
    let live = dir.path().join(format!(".ok.json.tmp-{}-999", std::process::id()));
    std::fs::write(&abandoned, "{").unwrap();
    std::fs::write(&live, "{").unwrap();
    write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
    assert!(!abandoned.exists(), "the killed writer's temporary file is removed");
    assert!(live.exists());
    assert_eq!(read_snapshot_file(&path).unwrap().docs.len(), fixtures::snapshot().docs.len());
}
