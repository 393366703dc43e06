//! How a search is routed to a theme: not at all, by the keyword heuristic, or by an LLM.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RouterMode {
    None,
    Heuristic,
    Llm,
}

impl RouterMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RouterMode::None => "none",
            RouterMode::Heuristic => "heuristic",
            RouterMode::Llm => "llm",
        }
    }

    /// Parses `none`, `heuristic` or `llm`.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "none" => Some(RouterMode::None),
            "heuristic" => Some(RouterMode::Heuristic),
            "llm" => Some(RouterMode::Llm),
            _ => None,
        }
    }
}
