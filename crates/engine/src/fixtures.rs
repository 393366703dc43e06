//! A small deterministic two-tenant corpus for tests of every backend (pseudo-embedded), and a
//! search service over an index as the service's default settings build it.

use crate::embed::PseudoEmbedder;
use crate::model::{Metadata, Record, Snapshot};
use crate::router::RouterMode;
use crate::search::settings::RuntimeSettings;
// What `served` and the project files need (the engine's own tests).
#[cfg(test)]
use crate::{index::VectorIndex, search::tuning::TuningFiles, search::SearchService};
#[cfg(test)]
use std::{path::Path, path::PathBuf, sync::Arc};

pub const DIMENSION: usize = 64;

struct Page {
    tenant: &'static str,
    doc: &'static str,
    title: &'static str,
    product: &'static str,
    tags: &'static [&'static str],
    section: &'static str,
    platform: &'static str,
    sections: &'static [(&'static str, &'static [&'static str])],
    /// Chunks only: the doc's section records are not indexed (a flat page).
    flat: bool,
}

const PAGES: &[Page] = &[
    Page {
        tenant: "t1",
        doc: "docs/faq/flat",
        title: "Вопросы о лицензии",
        product: "chatcenter",
        tags: &["faq"],
        section: "faq",
        platform: "",
        sections: &[(
            "Лицензия",
            &["Лицензия продлевается автоматически.", "Лицензию можно перенести.", "Лицензия действует год."],
        )],
        flat: true,
    },
    Page {
        tenant: "t1",
        doc: "sdk/android/install",
        title: "Установка Android SDK",
        product: "sdk",
        tags: &["android", "install"],
        section: "sdk",
        platform: "android",
        sections: &[
            (
                "Подключение через Gradle",
                &[
                    "Добавьте зависимость SDK в build.gradle и синхронизируйте проект Gradle.",
                    "Минимальная версия Android 7.0, targetSdk 34.",
                ],
            ),
            ("Ошибки сборки", &["Если Gradle сообщает об ошибке сборки, очистите кеш и пересоберите проект."]),
        ],
        flat: false,
    },
    Page {
        tenant: "t1",
        doc: "sdk/ios/install",
        title: "Установка iOS SDK",
        product: "sdk",
        tags: &["ios", "install"],
        section: "sdk",
        platform: "ios",
        sections: &[(
            "Подключение через CocoaPods",
            &["Добавьте pod в Podfile и выполните pod install в Xcode проекте."],
        )],
        flat: false,
    },
    Page {
        tenant: "t1",
        doc: "docs/agent/tags",
        title: "Обязательные теги при закрытии чата",
        product: "chatcenter",
        tags: &["agent"],
        section: "agent",
        platform: "",
        sections: &[
            (
                "Как поставить теги",
                &["Оператор выбирает обязательные теги перед закрытием чата.", "Без тегов чат закрыть нельзя."],
            ),
            ("Частые вопросы", &["Если список тегов пуст, обратитесь к администратору."]),
        ],
        flat: false,
    },
    Page {
        tenant: "t1",
        doc: "docs/admin/tags",
        title: "Настройка обязательных тегов",
        product: "chatcenter",
        tags: &["admin"],
        section: "admin",
        platform: "",
        sections: &[("Создание тегов", &["Администратор создаёт теги и отмечает обязательные в настройках."])],
        flat: false,
    },
    Page {
        tenant: "t1",
        doc: "docs/supervisor/reports",
        title: "Отчёты супервизора",
        product: "chatcenter",
        tags: &["supervisor"],
        section: "supervisor",
        platform: "",
        sections: &[(
            "Время ответа",
            &["Супервизор видит среднее время ответа операторов в отчёте.", "Отчёт выгружается в CSV."],
        )],
        flat: false,
    },
    Page {
        tenant: "t2",
        doc: "acme/secret-install",
        title: "Установка Android SDK секретного продукта Acme",
        product: "sdk",
        tags: &["android"],
        section: "sdk",
        platform: "android",
        sections: &[(
            "Gradle",
            &["Добавьте зависимость SDK в build.gradle и синхронизируйте проект Gradle. Пароль acme-secret."],
        )],
        flat: false,
    },
];

/// Builds the fixture snapshot; every level is pseudo-embedded with `DIMENSION` dimensions.
/// The runtime settings of the service's default settings (`Settings::default().runtime()`; a
/// test of the service checks that they agree).
pub fn default_runtime() -> RuntimeSettings {
    RuntimeSettings {
        max_results: 10,
        doc_top_k: 20,
        section_top_k: 30,
        chunk_top_k: 20,
        topk_per_doc: 1,
        min_docs: 3,
        min_score: 0.0,
        enable_filters: true,
        rerank_enabled: false,
        rerank_top_n: 5,
        theme_router_mode: RouterMode::Heuristic,
    }
}

/// A file of the repository (`config/…`, `demo/…`), wherever the tests run.
#[cfg(test)]
pub(crate) fn project_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

/// The repository's themes file, boosting.yaml and synonyms: the files the service's default
/// settings name.
#[cfg(test)]
pub(crate) fn project_tuning_files() -> TuningFiles {
    TuningFiles {
        themes: project_file("config/themes.yaml"),
        boosting: project_file("config/boosting.yaml"),
        synonyms: project_file("config/synonyms"),
        max_file_bytes: crate::search::tuning::DEFAULT_MAX_FILE_BYTES,
    }
}

/// A search service over `index` as the service builds it from its default settings (with the
/// embedding dimension of the fixtures): the project's tuning files, no reranker, no LLM router,
/// pseudo-embedded queries of at most 2,000 characters.
#[cfg(test)]
pub(crate) fn served(index: Arc<dyn VectorIndex>) -> SearchService {
    let (tuning, missing) = project_tuning_files().load_leniently();
    SearchService::new(index, Arc::new(PseudoEmbedder::new(DIMENSION)), default_runtime())
        .with_tuning(tuning, missing)
        .with_limits(2000, DIMENSION)
}

pub fn snapshot() -> Snapshot {
    let embedder = PseudoEmbedder::new(DIMENSION);
    let mut snapshot = Snapshot {
        format_version: Snapshot::FORMAT_VERSION,
        indexed_at: "2026-11-22T00:00:00Z".into(),
        embedding_model: PseudoEmbedder::MODEL_NAME.into(),
        dimension: DIMENSION,
        ..Snapshot::default()
    };
    for page in PAGES {
        let base = Metadata {
            tenant_id: page.tenant.into(),
            doc_id: page.doc.into(),
            title: page.title.into(),
            summary: format!("{}: {}", page.title, page.sections[0].0).into(),
            url: format!("https://docs.example.com/{}", page.doc).into(),
            source: format!("{}.md", page.doc).into(),
            product: page.product.into(),
            version: "1".into(),
            tags: page.tags.iter().map(|t| t.to_string()).collect(),
            domain: if page.product == "sdk" { "sdk_docs".into() } else { "chatcenter_user_docs".into() },
            section: page.section.into(),
            platform: page.platform.into(),
            role: match page.section {
                "sdk" => "integrator",
                "agent" => "operator",
                "admin" => "administrator",
                "supervisor" => "supervisor",
                _ => "",
            }
            .into(),
            indexed_at: "2026-11-22T00:00:00Z".into(),
            ..Metadata::default()
        };
        let doc_text = format!("{}\n{}", base.title, base.summary);
        snapshot.docs.push(Record {
            id: page.doc.into(),
            embedding: embedder.embed_one(&doc_text),
            text: doc_text.into(),
            meta: base.clone(),
        });
        for (section_number, (heading, chunks)) in page.sections.iter().enumerate() {
            let section_id = format!("{}#s{}", page.doc, section_number + 1);
            let section_meta = Metadata {
                section_id: Some(section_id.clone()),
                heading: heading.to_string(),
                heading_path: vec![page.title.to_string(), heading.to_string()],
                page: section_number as u32,
                ..base.clone()
            };
            let section_text = format!("{} / {}\n{}", page.title, heading, chunks.join(" "));
            if !page.flat {
                snapshot.sections.push(Record {
                    id: section_id.clone(),
                    embedding: embedder.embed_one(&section_text),
                    text: section_text.into(),
                    meta: section_meta.clone(),
                });
            }
            for (chunk_number, chunk_text) in chunks.iter().enumerate() {
                let chunk_id = format!("{section_id}-c{}", chunk_number + 1);
                snapshot.chunks.push(Record {
                    id: chunk_id.clone(),
                    embedding: embedder.embed_one(chunk_text),
                    text: (*chunk_text).into(),
                    meta: Metadata {
                        chunk_id: Some(chunk_id),
                        chunk_index: chunk_number as u32,
                        content_length: chunk_text.chars().count() as u32,
                        ..section_meta.clone()
                    },
                });
            }
        }
    }
    snapshot
}

/// Which tenant owns each fixture doc, for isolation assertions.
#[cfg(test)]
pub(crate) struct Tenants(std::collections::HashMap<String, String>);

#[cfg(test)]
impl Tenants {
    pub(crate) fn new() -> Self {
        Self(PAGES.iter().map(|p| (p.doc.to_string(), p.tenant.to_string())).collect())
    }

    pub(crate) fn tenant_of(&self, doc_id: &str) -> String {
        self.0.get(doc_id).cloned().unwrap_or_else(|| "unknown".into())
    }
}

#[cfg(test)]
impl Default for Tenants {
    fn default() -> Self {
        Self::new()
    }
}
