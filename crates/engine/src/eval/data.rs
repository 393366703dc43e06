//! Readers for the BEIR-like evaluation files: `corpus.jsonl` {id, title, text},
//! `queries.jsonl` {id, text} and a qrels TSV `query_id  passage_id  relevance` (header optional).

use super::metrics::Judgments;
use super::EvalError;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Passage {
    pub id: String,
    #[serde(default)]
    pub title: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EvalQuery {
    pub id: String,
    pub text: String,
}

/// Judgments per query id.
pub type Qrels = HashMap<String, Judgments>;

fn read(path: &Path) -> Result<String, EvalError> {
    std::fs::read_to_string(path).map_err(|source| EvalError::Io { path: path.to_path_buf(), source })
}

fn parse_jsonl<T: for<'de> Deserialize<'de>>(path: &Path, text: &str) -> Result<Vec<T>, EvalError> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| {
            serde_json::from_str(line).map_err(|error| EvalError::Parse {
                path: path.to_path_buf(),
                line: number + 1,
                message: error.to_string(),
            })
        })
        .collect()
}

/// Reads a JSON-lines file of `T` (blank lines skipped; errors name the line).
pub(crate) fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, EvalError> {
    parse_jsonl(path, &read(path)?)
}

pub fn read_corpus(path: &Path) -> Result<Vec<Passage>, EvalError> {
    read_jsonl(path)
}

pub fn read_queries(path: &Path) -> Result<Vec<EvalQuery>, EvalError> {
    read_jsonl(path)
}

/// Parses qrels; a first line whose third column is not a number is taken as a header.
pub(crate) fn parse_qrels(path: &Path, text: &str) -> Result<Qrels, EvalError> {
    let mut qrels = Qrels::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        let bad = |message: String| EvalError::Parse { path: path.to_path_buf(), line: number + 1, message };
        let [query_id, passage_id, grade] = fields.as_slice() else {
            return Err(bad(format!("expected 3 tab-separated columns, got {}", fields.len())));
        };
        let grade = match grade.parse::<u32>() {
            Ok(grade) => grade,
            Err(_) if number == 0 => continue,
            Err(error) => return Err(bad(format!("relevance {grade:?}: {error}"))),
        };
        qrels.entry(query_id.to_string()).or_default().insert(passage_id.to_string(), grade);
    }
    Ok(qrels)
}

pub fn read_qrels(path: &Path) -> Result<Qrels, EvalError> {
    parse_qrels(path, &read(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qrels_with_and_without_header() {
        let path = Path::new("q.tsv");
        let with = parse_qrels(path, "query_id\tpassage_id\trelevance\nq1\tp1\t1\nq1\tp2\t2\nq2\tp3\t0\n").unwrap();
        assert_eq!(with["q1"].len(), 2);
        assert_eq!(with["q1"]["p2"], 2);
        assert_eq!(with["q2"]["p3"], 0);
        let without = parse_qrels(path, "q1\tp1\t1\n").unwrap();
        assert_eq!(without["q1"]["p1"], 1);
    }

    #[test]
    fn qrels_errors_name_the_line() {
        let error = parse_qrels(Path::new("q.tsv"), "q1\tp1\t1\nq2\tp2\tx\n").unwrap_err();
        assert!(matches!(error, EvalError::Parse { line: 2, .. }), "{error}");
        assert!(parse_qrels(Path::new("q.tsv"), "q1 p1 1\n").is_err());
    }

    #[test]
    fn jsonl_reads_and_reports_bad_lines() {
        let path = Path::new("c.jsonl");
        let passages: Vec<Passage> = parse_jsonl(
            path,
            "{\"id\":\"p1\",\"title\":\"T\",\"text\":\"один\"}\n\n{\"id\":\"p2\",\"text\":\"два\"}\n",
        )
        .unwrap();
        assert_eq!(passages.len(), 2);
        assert_eq!(passages[1].title, "");
        let error = parse_jsonl::<EvalQuery>(path, "{\"id\":\"q\",\"text\":\"a\"}\n{oops}\n").unwrap_err();
        assert!(matches!(error, EvalError::Parse { line: 2, .. }));
    }
}
