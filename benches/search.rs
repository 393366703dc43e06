//! Micro-benchmarks of the search path on a synthetic corpus built in process: one search through
//! `SearchService` (200 docs × 5 sections × 4 chunks, one tenant, 384-d random vectors; also ten
//! such tenants in turn, and two searches at once on two threads), and
//! boosting, fusion and BM25 each alone; and the rebuild of that tenant after a one-page write.
//! `cargo bench`; a regression shows without a load generator.

use criterion::{criterion_group, criterion_main, Criterion};
use retrieval_engine::{
    boost_and_keep_best, rebuild_tenant, Bm25Index, Bm25Params, BoostCacheKey, BoostContext, BoostingConfig,
    ChangeScope, InMemoryIndex, Level, LoadedIndex, Metadata, PseudoEmbedder, Ranked, RankedList, ReciprocalRankFusion,
    Record, RecordFilter, SearchRequest, SearchService, Snapshot, TenantId, VectorIndex,
};
use retrieval_service::config::Settings;
use retrieval_service::parse_strict;
use std::hint::black_box;
use std::sync::Arc;

/// The service binary's allocator, so allocation costs are measured as the service pays them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DOCS: usize = 200;
const SECTIONS_PER_DOC: usize = 5;
const CHUNKS_PER_SECTION: usize = 4;
const DIMENSION: usize = 384;
const TENANT: &str = "bench";
/// The tenants of the ten-tenant benches (the side-by-side corpus has ten).
const TEN_TENANTS: [&str; 10] = [
    "tenant-00",
    "tenant-01",
    "tenant-02",
    "tenant-03",
    "tenant-04",
    "tenant-05",
    "tenant-06",
    "tenant-07",
    "tenant-08",
    "tenant-09",
];

/// xorshift64*: deterministic data without a dependency.
struct Pseudo(u64);

impl Pseudo {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    fn vector(&mut self) -> Vec<f32> {
        (0..DIMENSION).map(|_| self.unit()).collect()
    }
}

/// A vocabulary of Russian and English words, so BM25 stems and stopwords are exercised.
const VOCABULARY: &str = "установка настройка сертификат фильтр блокировка реклама браузер приложение устройство \
    защита подключение сервер пароль лицензия обновление ошибка расширение трафик правило \
    исключение android ios windows mac dns vpn proxy https filter rule settings install update \
    license account router как что для the and of в на не работает включить выключить пример \
    шаг отчёт оператор статистика журнал запрос домен список файл";

fn words(rng: &mut Pseudo, count: usize) -> String {
    let vocabulary: Vec<&str> = VOCABULARY.split_whitespace().collect();
    (0..count).map(|_| vocabulary[rng.below(vocabulary.len())]).collect::<Vec<_>>().join(" ")
}

fn synthetic_snapshot() -> Snapshot {
    synthetic_snapshot_of(&[TENANT])
}

/// The synthetic corpus once per tenant (each with its own texts and vectors).
fn synthetic_snapshot_of(tenants: &[&str]) -> Snapshot {
    let mut rng = Pseudo(0x9E37_79B9_7F4A_7C15);
    let mut snapshot = Snapshot {
        format_version: Snapshot::FORMAT_VERSION,
        indexed_at: "2026-11-23T00:00:00Z".into(),
        embedding_model: "bench".into(),
        dimension: DIMENSION,
        ..Snapshot::default()
    };
    for tenant in tenants {
        add_tenant(&mut snapshot, tenant, &mut rng);
    }
    snapshot
}

fn add_tenant(snapshot: &mut Snapshot, tenant: &str, rng: &mut Pseudo) {
    let platforms = ["android", "ios", "web", "main", ""];
    let page_types = ["overview", "howto", "faq", "reference", "changelog"];
    for doc in 0..DOCS {
        let doc_id = format!("docs/{}/page-{doc:03}", platforms[doc % platforms.len()]);
        let title = words(rng, 3);
        let base = Metadata {
            tenant_id: tenant.into(),
            doc_id: doc_id.as_str().into(),
            title: title.as_str().into(),
            summary: words(rng, 12).into(),
            url: format!("https://docs.example.com/kb/{}/guide/page-{doc:03}", platforms[doc % platforms.len()]).into(),
            source: format!("{doc_id}.md").into(),
            product: "product".into(),
            platform: platforms[doc % platforms.len()].into(),
            page_type: page_types[doc % page_types.len()].into(),
            section: "admin".into(),
            indexed_at: "2026-11-23T00:00:00Z".into(),
            ..Metadata::default()
        };
        let doc_text = format!("{}\n{}", base.title, base.summary);
        snapshot.docs.push(Record {
            id: doc_id.clone(),
            text: doc_text.into(),
            embedding: rng.vector(),
            meta: base.clone(),
        });
        for section in 0..SECTIONS_PER_DOC {
            let section_id = format!("{doc_id}#s{section}");
            let heading = words(rng, 2);
            let chunks: Vec<String> = (0..CHUNKS_PER_SECTION)
                .map(|chunk| {
                    let marker = if chunk % 2 == 0 { "1. " } else { "" };
                    format!("{marker}{}\n{}", words(rng, 30), words(rng, 30))
                })
                .collect();
            let section_text = format!("## {heading}\n{}", chunks.join("\n"));
            let section_meta = Metadata {
                section_id: Some(section_id.clone()),
                heading: heading.clone(),
                heading_path: vec![title.clone(), heading],
                page: section as u32,
                content_length: section_text.chars().count() as u32,
                ..base.clone()
            };
            snapshot.sections.push(Record {
                id: section_id.clone(),
                text: section_text.into(),
                embedding: rng.vector(),
                meta: section_meta.clone(),
            });
            for (chunk, text) in chunks.into_iter().enumerate() {
                let chunk_id = format!("{section_id}-c{chunk}");
                snapshot.chunks.push(Record {
                    id: chunk_id.clone(),
                    embedding: rng.vector(),
                    meta: Metadata {
                        chunk_id: Some(chunk_id),
                        chunk_index: chunk as u32,
                        content_length: text.chars().count() as u32,
                        ..section_meta.clone()
                    },
                    text: text.into(),
                });
            }
        }
    }
}

/// 16 queries per tenant, the tenants taking turns.
fn queries_over(tenants: &[&str]) -> Vec<SearchRequest> {
    let mut rng = Pseudo(42);
    (0..16 * tenants.len())
        .map(|number| {
            let query = words(&mut rng, 4);
            let tenant = TenantId::new(tenants[number % tenants.len()]).expect("a valid tenant id");
            SearchRequest { query_embedding: Some(rng.vector()), ..SearchRequest::new(tenant, query) }
        })
        .collect()
}

fn service(index: Arc<InMemoryIndex>) -> Arc<SearchService> {
    let settings = Settings { embedding_dimension: DIMENSION, ..Settings::default() };
    retrieval_service::startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(DIMENSION))).search
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime")
}

fn bench_search(c: &mut Criterion) {
    bench_service(c, "search/service_200x5x4", &[TENANT]);
}

/// Ten tenants of the same size, queried in turn: a tenant's vectors, records and features are
/// less likely to be in the cache when its next query comes, as in the service, whose
/// side-by-side corpus has ten tenants (the single-tenant bench above keeps one tenant warm).
fn bench_search_tenants(c: &mut Criterion) {
    bench_service(c, "search/service_10_tenants_in_turn", &TEN_TENANTS);
}

/// Two searches at a time, each on its own thread, over ten tenants, with queries near a record of
/// their tenant (its vector plus noise, words of its text) as real queries are: the side-by-side
/// load in process. Criterion's time per iteration is the wall time of all searches over their
/// count, so it is the inverse of throughput on two cores. Two searches at once share the caches,
/// the memory bandwidth and the reference counts they touch, as the service's two workers do.
fn bench_search_two_threads(c: &mut Criterion) {
    let snapshot = synthetic_snapshot_of(&TEN_TENANTS);
    let requests = queries_near(&snapshot, 256);
    let service = service(Arc::new(InMemoryIndex::from_snapshot(snapshot).expect("valid snapshot")));
    let threads = 2;
    c.bench_function("search/two_threads_10_tenants_near_queries", |b| {
        b.iter_custom(|iters| {
            let started = std::time::Instant::now();
            std::thread::scope(|scope| {
                for thread in 0..threads {
                    let (service, requests) = (&service, &requests);
                    scope.spawn(move || {
                        let runtime = runtime();
                        let mine = (thread as u64..iters).step_by(threads);
                        for (count, at) in mine.enumerate() {
                            let request = &requests[(at as usize + count) % requests.len()];
                            let response = runtime.block_on(service.search(request)).expect("search");
                            black_box(response.hits.len());
                        }
                    });
                }
            });
            started.elapsed()
        })
    });
}

/// `count` queries, each near a section of the snapshot taken at random: its vector plus noise of
/// about a third of its norm, and four words of its text.
fn queries_near(snapshot: &Snapshot, count: usize) -> Vec<SearchRequest> {
    let mut rng = Pseudo(4242);
    (0..count)
        .map(|_| {
            let section = &snapshot.sections[rng.below(snapshot.sections.len())];
            // `unit()` has a standard deviation of 1/√3 per dimension.
            let norm = section.embedding.iter().map(|value| value * value).sum::<f32>().sqrt();
            let noise = 0.35 * norm / (DIMENSION as f32).sqrt() * 3f32.sqrt();
            let vector: Vec<f32> = section.embedding.iter().map(|&value| value + noise * rng.unit()).collect();
            let words: Vec<&str> = section.text.split_whitespace().filter(|word| word.len() > 3).collect();
            let query = (0..4).map(|_| words[rng.below(words.len())]).collect::<Vec<_>>().join(" ");
            let tenant = TenantId::new(section.meta.tenant_id.as_str()).expect("a valid tenant id");
            SearchRequest { query_embedding: Some(vector), ..SearchRequest::new(tenant, query) }
        })
        .collect()
}

/// One search at a time through `SearchService` over the synthetic corpus of each of `tenants`,
/// the queries taking turns.
fn bench_service(c: &mut Criterion, name: &str, tenants: &[&str]) {
    let index = Arc::new(InMemoryIndex::from_snapshot(synthetic_snapshot_of(tenants)).expect("valid snapshot"));
    let service = service(index);
    let runtime = runtime();
    let requests = queries_over(tenants);
    let mut next = 0;
    c.bench_function(name, |b| {
        b.iter(|| {
            next = (next + 1) % requests.len();
            let response = runtime.block_on(service.search(&requests[next])).expect("search");
            black_box(response.hits.len())
        })
    });
}

fn bench_stages(c: &mut Criterion) {
    let index = InMemoryIndex::from_snapshot(synthetic_snapshot()).expect("valid snapshot");
    let runtime = runtime();
    let filter = RecordFilter::tenant(TENANT);
    let mut rng = Pseudo(7);
    let query = rng.vector();
    let terms = retrieval_engine::terms(&words(&mut rng, 4));

    c.bench_function("knn/sections_1000", |b| {
        b.iter(|| black_box(runtime.block_on(index.knn(Level::Section, &filter, &query, 100)).expect("knn").len()))
    });

    let sections = runtime.block_on(index.get(Level::Section, &filter, usize::MAX)).expect("sections");
    let texts: Vec<Vec<String>> = sections.iter().map(|s| retrieval_engine::terms(&s.text)).collect();
    let bm25 = Bm25Index::build(texts, Bm25Params::default());
    c.bench_function("bm25/sections_1000", |b| b.iter(|| black_box(bm25.score(&terms, |_| true).len())));

    let (boosting, _) = BoostingConfig::load(std::path::Path::new("config/boosting.yaml"));
    // Candidates as a level's ranking makes them: with the features the index derived at load.
    let nearest = runtime.block_on(index.knn(Level::Section, &filter, &query, 200)).expect("knn");
    let candidates: Vec<Ranked> =
        nearest.iter().map(|scored| Ranked::unscored(scored.record.clone(), scored.score, false)).collect();
    let context = BoostContext::default();
    c.bench_function("boost/200_sections", |b| {
        b.iter(|| {
            let mut hits = candidates.clone();
            boost_and_keep_best(&mut hits, usize::MAX, &boosting, &context);
            black_box(hits.len())
        })
    });
    // As a SearchService boosts: its config named, so each record's config-only factors are kept.
    let cached = BoostContext { config_key: Some(BoostCacheKey::new()), ..BoostContext::default() };
    c.bench_function("boost/200_sections_cached", |b| {
        b.iter(|| {
            let mut hits = candidates.clone();
            boost_and_keep_best(&mut hits, usize::MAX, &boosting, &cached);
            black_box(hits.len())
        })
    });

    // A request body as the side-by-side load sends it: four words and a 384-d embedding written
    // with seven decimals.
    let embedding: Vec<String> = rng.vector().iter().map(|x| format!("{:.7}", x * 0.1)).collect();
    let body = format!(
        r#"{{"query":"{}","tenant_id":"tenant-03","query_embedding":[{}]}}"#,
        words(&mut rng, 4),
        embedding.join(",")
    );
    c.bench_function("parse/search_request_384d", |b| {
        b.iter(|| {
            let request: SearchRequest = parse_strict(black_box(body.as_bytes())).expect("valid body");
            black_box(request.query_embedding.map(|v| v.len()))
        })
    });

    let dense: Vec<usize> = (0..100).map(|_| rng.below(400)).collect();
    let lexical: Vec<usize> = (0..100).map(|_| rng.below(400)).collect();
    let fusion = ReciprocalRankFusion::new(20.0);
    c.bench_function("fusion/rrf_2x100", |b| {
        b.iter(|| {
            let lists = [RankedList::new(&dense, 1.0), RankedList::new(&lexical, 0.7)];
            black_box(fusion.fuse(&lists, 100).len())
        })
    });
}

/// An incremental refresh after a one-page write: the tenant's part rebuilt from the loaded one
/// plus the page's re-read records (what a Chroma replica does per changed tenant).
fn bench_refresh(c: &mut Criterion) {
    let snapshot = synthetic_snapshot();
    let base = LoadedIndex::build(snapshot.clone()).expect("valid snapshot");
    let doc_id = snapshot.docs[0].meta.doc_id.clone();
    let page = |records: &[Record]| -> Vec<Record> {
        records.iter().filter(|record| record.meta.doc_id == doc_id).cloned().collect()
    };
    let fetched = [page(&snapshot.docs), page(&snapshot.sections), page(&snapshot.chunks)];
    let scope = ChangeScope::Docs([doc_id.to_string()].into());
    c.bench_function("refresh/one_page_of_5200_records", |b| {
        b.iter(|| {
            let part = rebuild_tenant(&base, TENANT, &scope, fetched.clone(), DIMENSION).expect("rebuild");
            black_box(part.map(|part| part.record_count()))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = bench_search, bench_search_tenants, bench_search_two_threads, bench_stages, bench_refresh
}
criterion_main!(benches);
