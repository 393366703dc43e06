//! `route_query`: routes a query with the router a request's mode asks for.

use super::{LlmRouter, RouterConfig, RouterMode, RoutingResult, ThemeSet, UserMetadata};

/// Routes `query` in `mode` over `themes`. Never fails: with no themes the result is empty (mode
/// `none`); in mode `llm` a missing `llm` client or any LLM failure falls back to the heuristic and
/// says so in `degradation`. The LLM call is bounded by the client's timeout.
pub async fn route_query(
    query: &str,
    user_metadata: Option<&UserMetadata>,
    themes: &ThemeSet,
    mode: RouterMode,
    config: &RouterConfig,
    llm: Option<&LlmRouter>,
) -> RoutingResult {
    if themes.is_empty() {
        let mut result = RoutingResult::empty(RouterMode::None);
        if mode != RouterMode::None {
            result.degradation = Some("no themes configured: theme routing skipped".to_string());
        }
        return result;
    }
    let by_rules = || themes.route_heuristic(query, user_metadata, config);
    match mode {
        RouterMode::None => RoutingResult::empty(RouterMode::None),
        RouterMode::Heuristic => by_rules(),
        RouterMode::Llm => {
            let Some(llm) = llm else {
                let mut result = by_rules();
                result.degradation = Some("llm router not configured: heuristic routing used".to_string());
                return result;
            };
            match llm.route(query, user_metadata, themes, config).await {
                Ok(result) => result,
                Err(error) => {
                    tracing::warn!(kind = ?error.kind, error = %error, "llm theme routing failed, using heuristic");
                    let mut result = by_rules();
                    result.degradation = Some(format!("llm router failed ({error}): heuristic routing used"));
                    result
                }
            }
        }
    }
}
