//! Theme router: decides which themes a query is about before the cascade runs,
//! whether the search may be hard-filtered to one theme, and whether the user should be asked to
//! choose; plus the theme-aware pieces after the search (hit labels, clarification, LLM context).
//!
//! Everything here is pure except `LlmRouter`, whose call is bounded by a timeout and falls back to
//! the heuristic, so routing never blocks or fails a search.

mod config;
pub(crate) mod context_format;
pub(crate) mod disambiguation;
pub(crate) mod heuristic;
pub(crate) mod label;
pub(crate) mod learned;
pub(crate) mod llm;
pub(crate) mod mode;
mod route;
mod routing;
mod theme_set;
pub(crate) mod themes;

pub use config::RouterConfig;
pub(crate) use config::LEARNED_NAMED_PROBABILITY;
pub(crate) use context_format::FormattedContext;
pub use context_format::{format_context, ContextSource, MULTI_THEME_RULE};
pub use disambiguation::{build_clarification, Clarification, ClarificationOption};
pub use heuristic::route_heuristic;
pub(crate) use heuristic::KeywordRules;
pub use label::infer_theme_label;
pub(crate) use label::ThemeLabels;
pub use llm::LlmRouter;
pub use mode::RouterMode;
pub use route::route_query;
pub(crate) use routing::{FieldsView, TopicFields};
pub use routing::{RoutingResult, ThemeFields, UserMetadata};
pub use theme_set::ThemeSet;
pub use themes::{parse_themes_yaml, Theme, ThemesFile, ThemesProvider, YamlThemesProvider};
