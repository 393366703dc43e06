//! `ChatReranker`: asks an OpenAI-compatible chat-completions model to score sections and parses
//! whatever it answers as leniently as is safe.

use super::client::{RerankClientConfig, RerankHttp};
use super::{RerankCandidate, RerankError, RerankErrorKind, RerankScore, Reranker, Result};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::HashSet;

const MAX_QUERY_CHARS: usize = 1_000;
const MAX_TITLE_CHARS: usize = 200;
const MAX_EXCERPT_CHARS: usize = 500;
/// Candidates that would push the prompt past this size are left out (and so stay unscored).
const MAX_PROMPT_CHARS: usize = 12_000;

const SYSTEM_PROMPT: &str = "You rank documentation sections by how well they answer the user's question. \
Answer with JSON only, no prose: an array [{\"section_id\": \"<id>\", \"score\": <number from 0 to 1>}] \
with one entry per listed section, most relevant first. Use the section ids exactly as given.";

pub struct ChatReranker {
    http: RerankHttp,
    endpoint: String,
}

impl ChatReranker {
    pub fn new(config: RerankClientConfig) -> Result<Self> {
        let http = RerankHttp::new(config)?;
        let endpoint = http.v1_endpoint("chat/completions");
        Ok(Self { http, endpoint })
    }
}

#[async_trait]
impl Reranker for ChatReranker {
    async fn rerank(&self, query: &str, candidates: &[RerankCandidate]) -> Result<Vec<RerankScore>> {
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let user = build_user_prompt(query, candidates);
        let call = self.http.call(&self.endpoint);
        let content =
            crate::upstream::chat_completion(self.http.client(), &call, &self.http.config.model, SYSTEM_PROMPT, &user)
                .await?;
        let content = content.as_str();
        let known_ids: Vec<String> = candidates.iter().map(|candidate| candidate.section_id.clone()).collect();
        parse_rerank_answer(content, &known_ids)
    }
}

/// The user message: the question and as many size-capped candidates as fit `MAX_PROMPT_CHARS`.
pub(crate) fn build_user_prompt(query: &str, candidates: &[RerankCandidate]) -> String {
    let mut prompt = format!("Question: {}\n\nSections:\n", cap(query, MAX_QUERY_CHARS));
    for candidate in candidates {
        let entry = format!(
            "\nsection_id: {}\ntitle: {}\nheading: {}\nexcerpt: {}\n",
            candidate.section_id,
            cap(&candidate.title, MAX_TITLE_CHARS),
            cap(&candidate.heading, MAX_TITLE_CHARS),
            cap(&candidate.excerpt, MAX_EXCERPT_CHARS),
        );
        if prompt.chars().count() + entry.chars().count() > MAX_PROMPT_CHARS {
            break;
        }
        prompt.push_str(&entry);
    }
    prompt
}

fn cap(text: &str, max_chars: usize) -> String {
    let single_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match single_line.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &single_line[..cut]),
        None => single_line,
    }
}

/// Parses a model's answer into scores for `known_ids`.
///
/// Accepts the array bare, inside ```` ```json ```` fences or surrounded by prose, wrapped in an
/// object (`{"results": [...]}`), or as loose objects when the array itself is cut short; ids
/// (`section_id` or `id`) may be strings or numbers, scores numbers or numeric strings. Unknown ids,
/// repeated ids (the first wins) and non-numeric or non-finite scores are dropped. An empty array is
/// an empty answer; an answer with no usable entry at all is `InvalidResponse`.
pub(crate) fn parse_rerank_answer(answer: &str, known_ids: &[String]) -> Result<Vec<RerankScore>> {
    let sanitized = replace_non_json_numbers(answer);
    let mut saw_empty_array = false;
    let mut loose_items = Vec::new();
    let mut skip_until = 0;
    for (start, _) in sanitized.char_indices().filter(|(_, c)| *c == '[' || *c == '{') {
        if start < skip_until {
            continue;
        }
        let mut values = serde_json::Deserializer::from_str(&sanitized[start..]).into_iter::<Value>();
        let Some(Ok(value)) = values.next() else { continue };
        skip_until = start + values.byte_offset();
        if is_score_item(&value) {
            loose_items.push(value);
            continue;
        }
        match score_list(&value) {
            Some([]) => saw_empty_array = true,
            Some(items) => return usable_scores(items, known_ids),
            None => {}
        }
    }
    if !loose_items.is_empty() {
        return usable_scores(&loose_items, known_ids);
    }
    if saw_empty_array {
        return Ok(Vec::new());
    }
    let snippet: String = answer.chars().take(200).collect();
    tracing::warn!(answer = %crate::upstream::redact(&snippet), "no score list in the rerank answer");
    Err(RerankError::new(RerankErrorKind::InvalidResponse, "no score list in the answer"))
}

fn usable_scores(items: &[Value], known_ids: &[String]) -> Result<Vec<RerankScore>> {
    let known: HashSet<&str> = known_ids.iter().map(String::as_str).collect();
    let mut seen = HashSet::new();
    let scores: Vec<RerankScore> = items
        .iter()
        .filter_map(item_score)
        .filter(|score| known.contains(score.section_id.as_str()) && seen.insert(score.section_id.clone()))
        .collect();
    if scores.is_empty() {
        let message = format!("none of the {} entries names a known section with a numeric score", items.len());
        return Err(RerankError::new(RerankErrorKind::InvalidResponse, message));
    }
    Ok(scores)
}

fn is_score_item(value: &Value) -> bool {
    value.get("section_id").is_some() || value.get("id").is_some()
}

/// The list of score objects a JSON array or wrapper object holds, if it looks like an answer.
fn score_list(value: &Value) -> Option<&[Value]> {
    let list_of_items = |items: &[Value]| items.iter().all(Value::is_object) && items.iter().any(is_score_item);
    match value {
        Value::Array(items) if items.is_empty() || list_of_items(items) => Some(items),
        Value::Object(object) => object.values().find_map(|field| match field {
            Value::Array(items) if list_of_items(items) => Some(items.as_slice()),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) | Value::Object(_) => {
                None
            }
        }),
        Value::Array(_) | Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => None,
    }
}

fn item_score(item: &Value) -> Option<RerankScore> {
    let section_id = match item.get("section_id").or_else(|| item.get("id"))? {
        Value::String(id) => id.trim().to_string(),
        Value::Number(id) => id.to_string(),
        _ => return None,
    };
    let score = ["score", "relevance_score", "relevance"].iter().find_map(|name| item.get(*name))?;
    let score = match score {
        Value::Number(number) => number.as_f64()?,
        Value::String(text) => text.trim().parse::<f64>().ok()?,
        _ => return None,
    } as f32;
    score.is_finite().then_some(RerankScore { section_id, score })
}

/// Replaces the bare `NaN` / `Infinity` tokens some models emit (outside strings) with `null`, so
/// one bad score drops only its own entry instead of making the whole answer unparsable.
fn replace_non_json_numbers(text: &str) -> String {
    let mut output = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            in_string = c != '"' || escaped;
            escaped = c == '\\' && !escaped;
        } else if c == '"' {
            in_string = true;
        } else if let Some(token) = ["-Infinity", "Infinity", "NaN"].iter().find(|token| rest.starts_with(**token)) {
            output.push_str("null");
            rest = &rest[token.len()..];
            continue;
        }
        output.push(c);
        rest = &rest[c.len_utf8()..];
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> Vec<String> {
        ["s1", "s2", "s3"].iter().map(|id| id.to_string()).collect()
    }

    fn parsed(answer: &str) -> Vec<(String, f32)> {
        parse_rerank_answer(answer, &ids()).unwrap().into_iter().map(|score| (score.section_id, score.score)).collect()
    }

    fn pairs(expected: &[(&str, f32)]) -> Vec<(String, f32)> {
        expected.iter().map(|(id, score)| (id.to_string(), *score)).collect()
    }

    #[test]
    fn accepted_answer_shapes() {
        let expected = pairs(&[("s2", 0.9), ("s1", 0.4)]);
        let cases = [
            r#"[{"section_id": "s2", "score": 0.9}, {"section_id": "s1", "score": 0.4}]"#,
            "```json\n[{\"section_id\": \"s2\", \"score\": 0.9}, {\"section_id\": \"s1\", \"score\": 0.4}]\n```",
            "Here is the ranking you asked for:\n[{\"section_id\":\"s2\",\"score\":0.9},{\"section_id\":\"s1\",\"score\":0.4}]\nHope it helps [1].",
            r#"{"results": [{"section_id": "s2", "score": 0.9}, {"section_id": "s1", "score": 0.4}]}"#,
            r#"{"ranking": [{"section_id": "s2", "relevance_score": "0.9"}, {"section_id": "s1", "score": 0.4}]}"#,
            r#"Sure! {"note": "x"} [{"section_id": " s2 ", "score": 0.9}, {"section_id": "s1", "score": 0.4}]"#,
        ];
        for answer in cases {
            assert_eq!(parsed(answer), expected, "{answer}");
        }
    }

    #[test]
    fn bad_entries_are_dropped_one_by_one() {
        let answer = r#"[
            {"section_id": "s9", "score": 1.0},
            {"section_id": "s2", "score": 0.8},
            {"section_id": "s2", "score": 0.1},
            {"section_id": "s1", "score": "high"},
            {"section_id": "s3", "score": NaN},
            {"section_id": "s1", "score": null},
            {"score": 0.5},
            {"section_id": "s3", "score": 1e300}
        ]"#;
        assert_eq!(parsed(answer), pairs(&[("s2", 0.8)]));
    }

    #[test]
    fn truncated_array_keeps_its_complete_entries() {
        let answer = "```json\n[{\"section_id\": \"s3\", \"score\": 0.7}, {\"id\": \"s1\", \"score\": 0.5}, {\"section_id\": \"s2\", \"sco";
        assert_eq!(parsed(answer), pairs(&[("s3", 0.7), ("s1", 0.5)]));
    }

    #[test]
    fn numeric_ids_and_single_object() {
        let ids = vec!["7".to_string()];
        let scores = parse_rerank_answer(r#"{"section_id": 7, "score": 0.3}"#, &ids).unwrap();
        assert_eq!(scores, vec![RerankScore { section_id: "7".into(), score: 0.3 }]);
    }

    #[test]
    fn empty_array_is_an_empty_answer_and_garbage_is_an_error() {
        assert!(parsed("[]").is_empty());
        assert!(parsed("```json\n[]\n```").is_empty());
        let garbage_answers = [
            "",
            "I cannot help with that.",
            "[1, 2, 3]",
            "{\"section\": \"s1\"}",
            "[{\"section_id\": \"s1\"",
            "[{\"section_id\": \"unknown\", \"score\": 1}]",
            "[{\"section_id\": \"s1\", \"score\": \"high\"}]",
        ];
        for garbage in garbage_answers {
            let error = parse_rerank_answer(garbage, &ids()).unwrap_err();
            assert_eq!(error.kind, RerankErrorKind::InvalidResponse, "{garbage:?}");
        }
    }

    #[test]
    fn nan_inside_strings_is_left_alone() {
        assert_eq!(replace_non_json_numbers(r#"{"a": "NaN \" NaN", "b": NaN}"#), r#"{"a": "NaN \" NaN", "b": null}"#);
    }

    #[test]
    fn prompt_caps_excerpts_and_total_size() {
        let candidate = |id: usize| RerankCandidate {
            section_id: format!("s{id}"),
            title: "Заголовок".into(),
            heading: "Раздел".into(),
            excerpt: "слово ".repeat(400),
        };
        let candidates: Vec<_> = (0..100).map(candidate).collect();
        let prompt = build_user_prompt("как настроить?", &candidates);
        assert!(prompt.chars().count() <= MAX_PROMPT_CHARS);
        assert!(prompt.contains("section_id: s0\n") && prompt.contains("section_id: s5\n"));
        assert!(!prompt.contains("section_id: s99\n"));
        let first_excerpt = prompt.split("excerpt: ").nth(1).unwrap().lines().next().unwrap();
        assert_eq!(first_excerpt.chars().count(), MAX_EXCERPT_CHARS + 1);
    }
}
