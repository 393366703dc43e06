//! The eval command's runner: three systems through the real search pipeline on a tiny corpus.

use retrieval_engine::{
    eval::{run_eval, EvalOptions, EvalQuery, Passage, Qrels},
    PseudoEmbedder,
};
use std::collections::HashMap;
use std::sync::Arc;

fn passage(id: &str, text: &str) -> Passage {
    Passage { id: id.into(), title: String::new(), text: text.into() }
}

#[tokio::test]
async fn every_system_finds_the_obvious_passage() {
    let corpus = vec![
        passage("p1", "Нормандия — регион на севере Франции, известный своими яблоками."),
        passage("p2", "Фотосинтез превращает свет в химическую энергию в хлоропластах."),
        passage("p3", "Река Рейн течёт через Швейцарию, Германию и Нидерланды."),
    ];
    let queries = vec![
        EvalQuery { id: "q1".into(), text: "Где находится Нормандия?".into() },
        EvalQuery { id: "q2".into(), text: "Через какие страны течёт Рейн?".into() },
        EvalQuery { id: "q3".into(), text: "без оценки".into() },
    ];
    let mut qrels: Qrels = HashMap::new();
    qrels.insert("q1".into(), HashMap::from([("p1".to_string(), 1)]));
    qrels.insert("q2".into(), HashMap::from([("p3".to_string(), 1)]));
    let report =
        run_eval(&corpus, &queries, &qrels, Arc::new(PseudoEmbedder::new(64)), &EvalOptions::default()).await.unwrap();
    assert_eq!(report.judged_queries, 2);
    let names: Vec<&str> = report.systems.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["dense", "lexical", "hybrid"]);
    for system in &report.systems {
        assert!((system.mrr - 1.0).abs() < 1e-9, "{}: {system:?}", system.name);
        assert!((system.recall - 1.0).abs() < 1e-9);
    }
    assert!(report.to_string().contains("nDCG@10"));
}
