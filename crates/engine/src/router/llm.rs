//! The LLM router (mode `llm`): one OpenAI chat-completions call that picks themes from their
//! descriptions and returns `[{"theme_id", "confidence"}]`. Every failure is an `LlmRouterError`;
//! `route_query` then falls back to the heuristic.

use super::heuristic::{fill_ranking, rank};
use super::RouterMode;
use super::{RouterConfig, RoutingResult, Theme, UserMetadata};
use crate::metrics::Metrics;
use crate::secret::Secret;
use crate::upstream::{Call, RetryPolicy};
use serde::Deserialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a routing call failed: the shared kind of every outbound client (`upstream`);
/// `InvalidResponse` also covers a 200 whose answer is not a usable theme list.
pub(crate) type LlmRouterErrorKind = crate::upstream::UpstreamErrorKind;

#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct LlmRouterError {
    pub(crate) kind: LlmRouterErrorKind,
    pub(crate) message: String,
}

impl LlmRouterError {
    fn new(kind: LlmRouterErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

impl From<crate::upstream::UpstreamError> for LlmRouterError {
    fn from(error: crate::upstream::UpstreamError) -> Self {
        LlmRouterError::new(error.kind, error.message)
    }
}

#[derive(Deserialize)]
struct ThemeConfidence {
    theme_id: String,
    confidence: f32,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ThemeAnswer {
    List(Vec<ThemeConfidence>),
    Wrapped { themes: Vec<ThemeConfidence> },
}

/// Parses the model's message into (theme index, confidence) pairs for known themes.
///
/// Accepts a bare JSON array or `{"themes": [...]}`, optionally inside a Markdown code fence.
/// Unknown ids and zero confidences are dropped; a confidence outside [0, 1] or an answer that names
/// no known theme is `InvalidResponse`.
pub(crate) fn parse_theme_answer(content: &str, themes: &[Theme]) -> Result<Vec<(usize, f32)>, LlmRouterError> {
    let invalid = |message: String| LlmRouterError::new(LlmRouterErrorKind::InvalidResponse, message);
    let start = content.find(['[', '{']).ok_or_else(|| invalid("no JSON in the answer".into()))?;
    let end =
        content.rfind([']', '}']).filter(|&end| end >= start).ok_or_else(|| invalid("unterminated JSON".into()))?;
    // serde's message may quote the model's answer: logs only (the error reaches degradations).
    let answer: ThemeAnswer = serde_json::from_str(&content[start..=end]).map_err(|error| {
        tracing::warn!(%error, "the llm router's answer is not a theme list");
        invalid("not a theme list".into())
    })?;
    let entries = match answer {
        ThemeAnswer::List(entries) | ThemeAnswer::Wrapped { themes: entries } => entries,
    };
    let mut picked: Vec<(usize, f32)> = Vec::new();
    for entry in entries {
        if !(0.0..=1.0).contains(&entry.confidence) {
            return Err(invalid(format!("a confidence of {} is outside [0, 1]", entry.confidence)));
        }
        let Some(index) = themes.iter().position(|theme| theme.id == entry.theme_id.trim()) else {
            continue;
        };
        if entry.confidence > 0.0 && !picked.iter().any(|(seen, _)| *seen == index) {
            picked.push((index, entry.confidence));
        }
    }
    if picked.is_empty() {
        return Err(invalid("the answer names no known theme".into()));
    }
    Ok(picked)
}

/// Turns LLM confidences into a routing result (scores are the confidences, not normalised).
///
/// Hard filter when the top confidence ≥ `llm_hard_filter_min_score` and no other theme is within
/// `ambiguity_gap`; clarification when two or more themes are that close and the top is below it.
pub(crate) fn llm_routing_result(picked: &[(usize, f32)], themes: &[Theme], config: &RouterConfig) -> RoutingResult {
    let mut scores = vec![0.0_f32; themes.len()];
    for &(index, confidence) in picked {
        scores[index] = confidence;
    }
    let order = rank(themes, &scores);
    let mut result = RoutingResult::empty(RouterMode::Llm);
    let Some(&primary) = order.first() else {
        return result;
    };
    let top = scores[primary];
    let close = order.iter().filter(|&&index| scores[index] >= top - config.ambiguity_gap).count();
    result.requires_disambiguation = close >= 2 && top < config.llm_hard_filter_min_score;
    if top >= config.llm_hard_filter_min_score && close == 1 {
        result.hard_filter = Some(themes[primary].fields());
    }
    result.named_themes = order
        .iter()
        .filter(|&&index| scores[index] >= config.llm_hard_filter_min_score)
        .map(|&index| themes[index].id.clone())
        .collect();
    fill_ranking(&mut result, &order, &scores, themes, config.max_themes);
    result
}

const SYSTEM_PROMPT: &str = "Ты классифицируешь вопросы пользователей к документации по тематикам. \
Выбери тематики, к которым относится вопрос, и оцени уверенность от 0 до 1. \
Ответь только JSON-массивом вида [{\"theme_id\": \"<id>\", \"confidence\": 0.0}] без пояснений. \
Используй только id из списка. Если вопрос подходит к нескольким тематикам одинаково, дай им близкие оценки.";

fn user_prompt(query: &str, user_metadata: Option<&UserMetadata>, themes: &[Theme]) -> String {
    let mut prompt = String::from("Тематики:\n");
    for theme in themes {
        prompt.push_str(&format!("- {}: {}", theme.id, theme.display_name));
        if !theme.description.is_empty() {
            prompt.push_str(&format!(" — {}", theme.description));
        }
        prompt.push('\n');
    }
    if let Some(user) = user_metadata {
        let known: Vec<String> = [("роль", &user.role), ("продукт", &user.product), ("платформа", &user.platform)]
            .into_iter()
            .filter_map(|(name, value)| value.as_ref().map(|value| format!("{name}: {value}")))
            .collect();
        if !known.is_empty() {
            prompt.push_str(&format!("\nО пользователе: {}\n", known.join(", ")));
        }
    }
    prompt.push_str(&format!("\nВопрос: {query}"));
    prompt
}

/// A chat-completions client for theme routing. One instance per process; cheap to clone.
#[derive(Debug, Clone)]
pub struct LlmRouter {
    client: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Secret,
    timeout: Duration,
    metrics: Option<Arc<Metrics>>,
}

impl LlmRouter {
    /// `api_base` is the OpenAI-compatible base, with or without `/v1` (the reranker's rule, so
    /// one `RETR_RERANK_API_BASE` serves both); requests go to `{base}/v1/chat/completions` and
    /// are abandoned after `timeout`.
    pub fn new(api_base: &str, model: &str, api_key: Secret, timeout: Duration) -> Result<Self, LlmRouterError> {
        let endpoint = crate::upstream::openai_endpoint(api_base, "chat/completions");
        reqwest::Url::parse(&endpoint)
            .map_err(|error| LlmRouterError::new(LlmRouterErrorKind::BadRequest, format!("bad api base: {error}")))?;
        let client = crate::upstream::http_client(timeout)?;
        Ok(Self { client, endpoint, model: model.to_string(), api_key, timeout, metrics: None })
    }

    /// Records every call in `metrics` (`retrieval_upstream_request_duration_seconds`).
    pub fn with_metrics(mut self, metrics: Option<Arc<Metrics>>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Asks the model which of `themes` the query is about and builds the routing result.
    #[tracing::instrument(name = "llm_route", skip_all, fields(num_themes = themes.len()))]
    pub(crate) async fn route(
        &self,
        query: &str,
        user_metadata: Option<&UserMetadata>,
        themes: &[Theme],
        config: &RouterConfig,
    ) -> Result<RoutingResult, LlmRouterError> {
        let started = Instant::now();
        let call = Call {
            upstream: "llm_router",
            url: &self.endpoint,
            bearer: Some(self.api_key.expose()),
            attempt_timeout: self.timeout,
            deadline: Some(started + self.timeout),
            retry: RetryPolicy::ONCE,
            metrics: self.metrics.as_deref(),
        };
        let prompt = user_prompt(query, user_metadata, themes);
        let content =
            crate::upstream::chat_completion(&self.client, &call, &self.model, SYSTEM_PROMPT, &prompt).await?;
        let picked = parse_theme_answer(&content, themes)?;
        tracing::debug!(latency_ms = started.elapsed().as_millis() as u64, num_picked = picked.len(), "llm routed");
        Ok(llm_routing_result(&picked, themes, config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn themes() -> Vec<Theme> {
        ["sdk_android", "user_agent", "user_admin"]
            .iter()
            .map(|id| Theme {
                id: id.to_string(),
                display_name: id.to_string(),
                domain: "d".into(),
                section: None,
                platform: Some(id.to_string()),
                role: None,
                description: String::new(),
                keywords: Vec::new(),
                priority: 1.0,
            })
            .collect()
    }

    #[test]
    fn classify_maps_statuses() {
        let table = [
            (400, LlmRouterErrorKind::BadRequest),
            (401, LlmRouterErrorKind::Unauthorized),
            (404, LlmRouterErrorKind::NotFound),
            (429, LlmRouterErrorKind::RateLimited),
            (500, LlmRouterErrorKind::Unavailable),
            (503, LlmRouterErrorKind::Unavailable),
            (504, LlmRouterErrorKind::Timeout),
            (302, LlmRouterErrorKind::InvalidResponse),
        ];
        for (status, kind) in table {
            assert_eq!(crate::upstream::classify(status, "x"), kind, "{status}");
        }
    }

    #[test]
    fn parses_fenced_wrapped_and_drops_unknown_ids() {
        let fenced = "```json\n[{\"theme_id\": \"sdk_android\", \"confidence\": 0.95}, {\"theme_id\": \"nope\", \"confidence\": 0.5}]\n```";
        assert_eq!(parse_theme_answer(fenced, &themes()).unwrap(), vec![(0, 0.95)]);
        let wrapped = "{\"themes\": [{\"theme_id\": \"user_admin\", \"confidence\": 0.4}]}";
        assert_eq!(parse_theme_answer(wrapped, &themes()).unwrap(), vec![(2, 0.4)]);
    }

    #[test]
    fn nonsense_is_invalid_response() {
        for content in [
            "не знаю",
            "[]",
            "[{\"theme_id\": \"nope\", \"confidence\": 1}]",
            "[{\"theme_id\": \"user_admin\", \"confidence\": 7}]",
            "[{\"id\": 1}]",
        ] {
            let error = parse_theme_answer(content, &themes()).unwrap_err();
            assert_eq!(error.kind, LlmRouterErrorKind::InvalidResponse, "{content}");
        }
    }

    #[test]
    fn confident_single_theme_filters_close_pair_asks() {
        let config = RouterConfig::default();
        let sure = llm_routing_result(&[(0, 0.95), (1, 0.2)], &themes(), &config);
        assert_eq!(sure.primary_theme.as_deref(), Some("sdk_android"));
        assert_eq!(sure.hard_filter.and_then(|fields| fields.platform).as_deref(), Some("sdk_android"));
        assert!(!sure.requires_disambiguation);
        let unsure = llm_routing_result(&[(1, 0.55), (2, 0.5)], &themes(), &config);
        assert!(unsure.requires_disambiguation && unsure.hard_filter.is_none());
        let both_named = llm_routing_result(&[(1, 0.95), (2, 0.93)], &themes(), &config);
        assert!(!both_named.requires_disambiguation && both_named.hard_filter.is_none());
        assert_eq!(both_named.themes.len(), 2);
    }
}
