//! The BM25 index's tests: scores against the formula, builds of every kind alike, memos.

use super::*;
use crate::shared_str::SharedText;
use crate::text::terms;
use std::sync::Arc;

fn index(texts: &[&str]) -> Bm25Index {
    Bm25Index::build(texts.iter().map(|t| terms(t)), Bm25Params::default())
}

#[test]
fn a_build_tokenizes_every_record_in_order_across_batches_and_threads() {
    // More records than a batch, titles in and out of the text: the parallel, remembered
    // tokenizing gives each record the terms `lexical_terms` gives it, in the records' order.
    let records = fixture_chunks(9000, |n, record| {
        record.text = format!("{} шаг {n} Настройка-{} v{}", record.text, n % 97, n % 13).into();
        if n % 3 == 0 {
            record.meta.title = format!("Страница {n}").into();
        }
    });
    let built: Vec<Vec<String>> = LexicalTermsOf::new(&records).collect();
    let expected: Vec<Vec<String>> = records.iter().map(|record| lexical_terms(record)).collect();
    assert_eq!(built.len(), records.len());
    assert!(built == expected, "terms differ from lexical_terms");
    // The index a level's build makes from the term numbers is the one built from those terms.
    assert_numbered_build_is_the_build_from_terms(&records);
}

/// `count` records: the fixture's chunks in turn, each changed by `edit` (given its place).
fn fixture_chunks(
    count: usize,
    edit: impl Fn(usize, &mut crate::model::Record),
) -> Vec<std::sync::Arc<crate::model::Record>> {
    let base = crate::fixtures::snapshot().chunks;
    (0..count)
        .map(|n| {
            let mut record = base[n % base.len()].clone();
            edit(n, &mut record);
            std::sync::Arc::new(record)
        })
        .collect()
}

/// A level's build of `records` (from the term numbers) against `build` over the terms of
/// their definition: every posting, the lengths, the average length.
fn assert_numbered_build_is_the_build_from_terms(records: &[std::sync::Arc<crate::model::Record>]) {
    assert_is_the_build_from_terms(&Bm25Index::build_from_records(records, Bm25Params::default()), records);
}

fn assert_is_the_build_from_terms(numbered: &Bm25Index, records: &[std::sync::Arc<crate::model::Record>]) {
    let from_terms = Bm25Index::build(records.iter().map(|record| lexical_terms(record)), Bm25Params::default());
    assert_eq!(numbered.lengths, from_terms.lengths);
    assert_eq!(numbered.average_length.to_bits(), from_terms.average_length.to_bits());
    assert_eq!(numbered.postings.len(), from_terms.postings.len());
    for (term, posting) in &from_terms.postings {
        assert_eq!(numbered.postings.get(term), Some(posting), "{term}");
    }
}

#[test]
fn a_build_past_the_memos_capacity_starts_them_over_and_indexes_the_same() {
    // 9,000 records of 70 words each that no other record has (630,000 distinct terms): each
    // memo fills up in the first batch and is replaced before the second; the postings are
    // still those of a build from the plain terms.
    let records = fixture_chunks(9000, |n, record| {
        record.text = (0..70).map(|k| format!("w{n}q{k}")).collect::<Vec<_>>().join(" ").into();
        record.meta.title = "общий".into();
    });
    assert_numbered_build_is_the_build_from_terms(&records);
    assert!(Bm25Index::build_from_records(&records, Bm25Params::default()).postings.len() > 630_000);
}

/// `sections` of `passages(s)` passages each, in id order, and their chunks (id order):
/// each chunk a share of its section's text, with its title, then as `edit` makes it
/// (`edit(section, chunk, record, from, to)`, with the section and where the passage is).
fn sections_with_chunks(
    sections: usize,
    passages: impl Fn(usize) -> Vec<String>,
    edit: impl Fn(usize, usize, &mut crate::model::Record, &crate::model::Record, usize, usize),
) -> (Vec<Arc<crate::model::Record>>, Vec<Arc<crate::model::Record>>) {
    let base = crate::fixtures::snapshot().chunks[0].clone();
    let (mut section_records, mut chunk_records) = (Vec::new(), Vec::new());
    for s in 0..sections {
        let id = format!("s{s:06}");
        let title = format!("Раздел {s} о фильтрах");
        let passages = passages(s);
        let mut section = base.clone();
        (section.id, section.meta.section_id) = (id.clone(), Some(id.clone()));
        section.meta.title = title.as_str().into();
        section.text = format!("{title}\n{}", passages.join(" ")).into();
        let mut from = title.len() + 1;
        for (c, passage) in passages.iter().enumerate() {
            let mut chunk = base.clone();
            (chunk.id, chunk.meta.section_id) = (format!("{id}-c{c:02}"), Some(id.clone()));
            chunk.meta.title = section.meta.title.clone();
            let to = from + passage.len();
            chunk.text = SharedText::passage(&section.text, from, to).expect("a passage");
            edit(s, c, &mut chunk, &section, from, to);
            chunk_records.push(Arc::new(chunk));
            from = to + 1;
        }
        section_records.push(Arc::new(section));
    }
    chunk_records.sort_by(|a, b| a.id.cmp(&b.id));
    (section_records, chunk_records)
}

#[test]
fn sections_and_chunks_built_together_index_as_each_level_alone() {
    // 3,000 sections of 3 to 7 passages (over 8,192 chunks: several batches, and sections whose
    // chunks a batch's end cuts). Most chunks are passages of their section's text with its
    // title; the others start or end inside a word, have a title of their own (in their text
    // or not), are a copy of their text, name another section or none, or come in id order
    // long after their section (outside the window of tokenized sections).
    const WORDS: [&str; 10] =
        ["установка", "Сертификата", "на", "андроиде", "отчёты", "супервизора", "iOS", "v2", "ёлка", "фильтрах"];
    let passages = |s: usize| -> Vec<String> {
        (0..3 + s % 5)
            .map(|c| (0..4 + (s + c) % 9).map(|w| WORDS[(s * 7 + c * 3 + w) % 10]).collect::<Vec<_>>().join(" "))
            .collect()
    };
    let (sections, chunks) =
        sections_with_chunks(3000, passages, |s, c, chunk, section, from, to| match (s * 5 + c) % 19 {
            // Cyrillic letters are two bytes, ASCII one: two bytes in is inside a word or at its end.
            0 => chunk.text = SharedText::passage(&section.text, from + 2, to).expect("a passage"),
            1 => chunk.text = SharedText::passage(&section.text, from, to - 2).expect("a passage"),
            2 => chunk.meta.title = "Свой заголовок".into(),
            3 => chunk.meta.title = "на".into(),
            4 => chunk.text = chunk.text.as_str().to_string().into(),
            5 => chunk.meta.section_id = Some(format!("s{:06}", (s + 1500) % 3000)),
            6 => chunk.meta.section_id = None,
            7 => chunk.id = format!("z{}", chunk.id),
            _ => {}
        });
    let (section_index, chunk_index) = Bm25Index::build_sections_and_chunks(&sections, &chunks, Bm25Params::default());
    assert_is_the_build_from_terms(&section_index, &sections);
    assert_is_the_build_from_terms(&chunk_index, &chunks);
    // With no chunks, and with no sections.
    let (section_index, none) = Bm25Index::build_sections_and_chunks(&sections, &[], Bm25Params::default());
    assert_is_the_build_from_terms(&section_index, &sections);
    assert!(none.postings.is_empty());
    let (none, chunk_index) = Bm25Index::build_sections_and_chunks(&[], &chunks, Bm25Params::default());
    assert_is_the_build_from_terms(&chunk_index, &chunks);
    assert!(none.postings.is_empty());
}

#[test]
fn sections_and_chunks_built_together_past_the_memos_capacity_index_as_each_level_alone() {
    // 3,000 sections of 3 passages of 70 words no other section has (630,000 distinct
    // terms): the memos fill up in the first batch of chunks, which ends inside a section,
    // and start over while that section is still in the window.
    let passages = |s: usize| -> Vec<String> {
        (0..3).map(|c| (0..70).map(|w| format!("w{s}q{c}r{w}")).collect::<Vec<_>>().join(" ")).collect()
    };
    let (sections, chunks) = sections_with_chunks(3000, passages, |_, _, _, _, _, _| {});
    let (section_index, chunk_index) = Bm25Index::build_sections_and_chunks(&sections, &chunks, Bm25Params::default());
    assert_is_the_build_from_terms(&section_index, &sections);
    assert_is_the_build_from_terms(&chunk_index, &chunks);
    assert!(chunk_index.postings.len() > 630_000);
}

#[test]
fn matching_document_outranks_others_and_morphology_counts() {
    let idx = index(&["установка сертификата на андроиде", "отчёты супервизора", "сертификат iOS"]);
    let mut scores = idx.score(&terms("сертификат андроид"), |_| true);
    scores.sort_by(|a, b| b.1.total_cmp(&a.1));
    assert_eq!(scores[0].0, 0);
    assert_eq!(scores.len(), 2);
}

#[test]
fn scoring_every_document_gives_the_scores_of_score() {
    let idx = index(&["alpha beta beta", "gamma", "alpha gamma delta", "beta", "epsilon"]);
    // Terms of 2 of 5 documents have dense weights, "delta" (1 of 5) only its posting: a
    // query mixing both adds them in its own order either way.
    assert!(idx.dense().contains_key(&terms("alpha")[0]) && !idx.dense().contains_key(&terms("delta")[0]));
    let mut scores = vec![9.0; 7];
    for query in ["alpha beta", "beta alpha beta", "gamma", "zeta", "", "delta alpha", "alpha delta epsilon"] {
        idx.score_all_into(&terms(query), &mut scores);
        let mut expected = vec![0.0f32; 5];
        for (number, score) in idx.score(&terms(query), |_| true) {
            expected[number] = score;
        }
        let bits = |list: &[f32]| list.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&scores), bits(&expected), "{query}");
    }
}

#[test]
fn accept_excludes_documents() {
    let idx = index(&["alpha beta", "alpha"]);
    let scores = idx.score(&terms("alpha"), |n| n == 1);
    assert_eq!(scores.len(), 1);
    assert_eq!(scores[0].0, 1);
}

#[test]
fn a_renumbered_index_scores_like_a_fresh_build() {
    let before = index(&["alpha beta", "beta gamma", "gamma delta", "alpha alpha"]);
    // Document 1 is dropped, "beta epsilon" is new and sorts first; the others move up by one.
    let kept = [Some(1), None, Some(2), Some(3)];
    let renumbered = before.renumbered(&kept, [(0, terms("beta epsilon"))], 4);
    let fresh = index(&["beta epsilon", "alpha beta", "gamma delta", "alpha alpha"]);
    for query in ["alpha", "beta", "gamma epsilon", "delta alpha"] {
        let mut got = renumbered.score(&terms(query), |_| true);
        let mut want = fresh.score(&terms(query), |_| true);
        got.sort_by_key(|&(number, _)| number);
        want.sort_by_key(|&(number, _)| number);
        assert_eq!(got, want, "{query}");
    }
    assert_eq!(renumbered.len(), 4);
}

#[test]
fn scoring_among_given_documents_equals_scoring_with_accept() {
    let texts: Vec<String> = (0..300)
        .map(|n| {
            let mut words = vec!["общий"];
            if n % 3 == 0 {
                words.push("фильтр");
            }
            if n % 7 == 0 {
                words.extend(["фильтр", "dns"]);
            }
            if n == 150 {
                words.push("редкий");
            }
            words.join(" ")
        })
        .collect();
    let index = index(&texts.iter().map(String::as_str).collect::<Vec<_>>());
    let terms = terms("фильтр dns редкий общий нет");
    let subsets: Vec<Vec<usize>> =
        vec![(0..300).collect(), vec![0, 7, 150, 299], (100..160).collect(), vec![5], Vec::new()];
    for numbers in subsets {
        for odd_only in [false, true] {
            let accept = |number: usize| !odd_only || number % 2 == 1;
            let expected = index.score(&terms, |number| numbers.contains(&number) && accept(number));
            let got = index.score_among(&terms, &numbers, accept);
            let bits = |list: &[(usize, f32)]| list.iter().map(|&(n, s)| (n, s.to_bits())).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&expected), "{numbers:?} {odd_only}");
        }
    }
}

#[test]
fn scores_are_the_bm25_formula_over_the_current_documents() {
    // The textbook sum, written out: the weights kept in the postings must be those of the
    // documents as they are now, also after a renumbering changed the lengths and the counts,
    // and as the local copy reads them back; a term held 300 times by one document (more
    // than a count's byte holds) counts 300 times in each.
    let many = "delta ".repeat(300);
    let texts = ["alpha beta beta", "beta gamma", "alpha", "gamma gamma gamma delta", many.as_str()];
    let documents: Vec<Vec<String>> = texts.iter().map(|text| terms(text)).collect();
    let expected = |documents: &[Vec<String>], query: &[String]| -> Vec<(usize, u32)> {
        let (k1, b) = (1.2f32, 0.75f32);
        let total = documents.len() as f32;
        let average = documents.iter().map(Vec::len).sum::<usize>() as f32 / total;
        let mut query: Vec<&String> = query.iter().collect();
        query.sort();
        query.dedup();
        let mut scores = Vec::new();
        for (number, document) in documents.iter().enumerate() {
            let mut score = 0.0f32;
            for term in &query {
                let holders = documents.iter().filter(|d| d.contains(term)).count() as f32;
                let count = document.iter().filter(|t| t == term).count() as f32;
                if count > 0.0 {
                    let idf = (1.0 + (total - holders + 0.5) / (holders + 0.5)).ln();
                    let norm = document.len() as f32 / average;
                    score += idf * count * (k1 + 1.0) / (count + k1 * (1.0 - b + b * norm));
                }
            }
            if score > 0.0 {
                scores.push((number, score.to_bits()));
            }
        }
        scores
    };
    let got = |index: &Bm25Index, query: &[String]| -> Vec<(usize, u32)> {
        let mut scores: Vec<(usize, u32)> =
            index.score(query, |_| true).into_iter().map(|(n, s)| (n, s.to_bits())).collect();
        scores.sort();
        scores
    };
    let built = Bm25Index::build(documents.clone(), Bm25Params::default());
    let renumbered =
        built.renumbered(&[Some(0), None, Some(1), Some(2), Some(4)], [(3, terms("beta beta alpha delta"))], 5);
    let now: Vec<Vec<String>> = vec![
        documents[0].clone(),
        documents[2].clone(),
        documents[3].clone(),
        terms("beta beta alpha delta"),
        documents[4].clone(),
    ];
    let mut bytes = Vec::new();
    renumbered.write_to(&mut crate::index::codec::Writer(&mut bytes)).unwrap();
    let read_back = Bm25Index::read_from(&mut crate::index::codec::Reader(bytes.as_slice()), 5).unwrap();
    for query in ["alpha", "beta gamma", "delta alpha beta", "gamma", "delta"] {
        let query = terms(query);
        assert_eq!(got(&built, &query), expected(&documents, &query), "{query:?}");
        assert_eq!(got(&renumbered, &query), expected(&now, &query), "renumbered {query:?}");
        assert_eq!(got(&read_back, &query), expected(&now, &query), "read back {query:?}");
    }
}

#[test]
fn a_postings_counts_stay_with_their_documents_whatever_their_size() {
    let counts = [1, 254, 255, 256, 300, 7, u32::MAX, 0];
    let mut list = PostingList::default();
    // Pushed in descending document number: sorting moves each count with its document.
    for (number, &count) in counts.iter().enumerate().rev() {
        list.push(number as u32, count);
    }
    list.sort();
    let numbers: Vec<u32> = list.entries.iter().map(|entry| entry.number).collect();
    assert_eq!(numbers, (0..counts.len() as u32).collect::<Vec<_>>());
    let read: Vec<u32> = (0..list.len()).map(|entry| list.counts.get(entry)).collect();
    assert_eq!(read, counts);
}

#[test]
fn no_terms_no_scores() {
    assert!(index(&["alpha"]).score(&[], |_| true).is_empty());
    assert!(Bm25Index::default().score(&terms("alpha"), |_| true).is_empty());
}
