//! The MCP tools: each with an input schema, an output schema (its result is structured content
//! plus a short text rendering) and read-only annotations. Each one is the HTTP API's service call
//! (`SearchService::search_with_texts`, `context`, `passage`, `topics`, `outline`) with the same
//! tenant check as the HTTP handlers; nothing of the search is done again here.
//!
//! A failing tool answers a tool error (`isError`) whose text says what to change: the error code
//! of the HTTP API and its message (an internal error's cause stays in the log). An unknown tool
//! is a JSON-RPC error (-32602), as the protocol asks.
//!
//! Token budgets count a token as [`CHARS_PER_TOKEN`] characters, an estimate on the safe side for
//! Russian and English text.

use crate::api::auth::TenantKey;
use crate::error::{ApiError, ErrorCode};
use crate::AppState;
use retrieval_engine::{SearchFilters, SearchRequest, TenantId, WindowQuery, MAX_CONTEXT_CHARS, MAX_RESULTS_CAP};
use rmcp::handler::server::common::{schema_for_output, schema_for_type};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, InitializeResult,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::sync::Arc;

/// Characters counted as one token in a budget.
pub(crate) const CHARS_PER_TOKEN: usize = 3;
const DEFAULT_SNIPPET_TOKENS: usize = 800;
const MAX_SNIPPET_TOKENS: usize = 20_000;
const DEFAULT_CONTEXT_TOKENS: usize = 2_000;
const DEFAULT_PASSAGE_TOKENS: usize = 2_000;
const MAX_PASSAGE_TOKENS: usize = 30_000;
/// Largest `before` / `after` of `read_passage` (as `/chunks/window`).
const MAX_WINDOW: usize = crate::api::window::MAX_WINDOW as usize;
/// At most this many tenants are named when a call must say which tenant it means.
const NAMED_TENANTS: usize = 20;

/// The server: the tool catalogue, built once, and the state the tools call into.
#[derive(Clone)]
pub(crate) struct Tools {
    state: AppState,
    catalogue: Arc<Vec<Tool>>,
}

impl Tools {
    pub(crate) fn new(state: AppState) -> Self {
        Self { state, catalogue: Arc::new(catalogue()) }
    }
}

fn tool<In: JsonSchema + 'static, Out: JsonSchema + 'static>(
    name: &'static str,
    title: &str,
    description: &'static str,
) -> Tool {
    let mut tool = Tool::new(name, description, standard_formats(&schema_for_type::<In>()));
    tool.title = Some(title.to_string());
    tool.output_schema = Some(standard_formats(&schema_for_output::<Out>()));
    tool.annotations =
        Some(ToolAnnotations::with_title(title).read_only(true).destructive(false).idempotent(true).open_world(false));
    tool
}

/// `schema` without the number formats of the generator (`uint`, `int64`, `float`, …), which are
/// not JSON Schema's and which validators in clients warn about; `type` and `minimum` say the same.
fn standard_formats(schema: &JsonObject) -> Arc<JsonObject> {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(object) => {
                let numeric = object.get("format").and_then(|format| format.as_str()).is_some_and(|format| {
                    ["int", "uint", "float", "double"].iter().any(|prefix| format.starts_with(prefix))
                });
                if numeric {
                    object.remove("format");
                }
                object.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::Value::Object(schema.clone());
    strip(&mut value);
    match value {
        serde_json::Value::Object(object) => Arc::new(object),
        _ => Arc::new(schema.clone()),
    }
}

fn catalogue() -> Vec<Tool> {
    vec![
        tool::<SearchDocsArgs, SearchDocsOutput>(
            "search_docs",
            "Search the documentation",
            "Searches one tenant's product documentation for a question: the pages' sections or chunks that \
             answer it, best first, each with title, URL, section path and a snippet (all snippets within \
             `max_tokens`), and `confidence`, the probability that the first hit answers the question. When \
             the answer differs between products or roles, `clarification` says so: ask the user which one, \
             then search again with `theme` set to the chosen option's `theme_id`. Read more around a hit \
             with read_passage.",
        ),
        tool::<ReadPassageArgs, ReadPassageOutput>(
            "read_passage",
            "Read around a hit",
            "The text around a hit of search_docs (or any section or chunk of a page): the hit's chunks plus \
             `before` and `after` chunks of the same page, in reading order, within `max_tokens`.",
        ),
        tool::<GetContextArgs, GetContextOutput>(
            "get_context",
            "Get an answer context",
            "Searches like search_docs and returns the hits' text as one prompt-ready context within \
             `max_tokens`: sources numbered [1], [2], … and grouped by theme when the question spans several \
             (then `system_prompt_rule` says how to answer per theme). Answer from it and cite the numbers.",
        ),
        tool::<ListTopicsArgs, ListTopicsOutput>(
            "list_topics",
            "List the topics",
            "The themes (products, areas, roles) a tenant's documentation is organised in, each with its \
             number of pages; a theme's `id` is what search_docs and get_context take as `theme`.",
        ),
        tool::<OutlineArgs, OutlineOutput>(
            "outline",
            "Outline a page",
            "A page's section headings in reading order, each with its section id, so a long page can be \
             navigated: read a section with read_passage (`hit_id` = the section id).",
        ),
    ]
}

impl ServerHandler for Tools {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("retrieval-service", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Product documentation search. Start with search_docs; when it returns a clarification, ask \
                 the user and search again with the chosen theme; read around a hit with read_passage; use \
                 get_context for a ready-made, cited context.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.catalogue.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.catalogue.iter().find(|tool| tool.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // `mcp::serve` puts the key there; without it (never) nothing is read.
        let key = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<TenantKey>());
        let Some(key) = key else {
            return Ok(failure("internal: the request carries no credentials").into());
        };
        let arguments = request.arguments.unwrap_or_default();
        let call = Call { state: &self.state, key };
        let result = match request.name.as_ref() {
            "search_docs" => call.search_docs(arguments).await,
            "read_passage" => call.read_passage(arguments).await,
            "get_context" => call.get_context(arguments).await,
            "list_topics" => call.list_topics(arguments).await,
            "outline" => call.outline(arguments).await,
            other => {
                let names: Vec<&str> = self.catalogue.iter().map(|tool| tool.name.as_ref()).collect();
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other:?}; the tools are {}", names.join(", ")),
                    None,
                ));
            }
        };
        Ok(result.unwrap_or_else(|error| failure(&error.0)).into())
    }
}

/// A tool's failure: the text an agent reads.
struct ToolError(String);

impl From<ApiError> for ToolError {
    fn from(error: ApiError) -> Self {
        let code = error.code.as_str();
        let hint = match error.code {
            ErrorCode::Forbidden => " Use a tenant this API key is granted, or leave `tenant` out when it has one.",
            ErrorCode::TenantNotFound => " Check the tenant id.",
            ErrorCode::NotFound => " Take doc_id and hit_id from a search_docs hit or an outline.",
            ErrorCode::IndexNotReady
            | ErrorCode::IndexNotFound
            | ErrorCode::BackendUnavailable
            | ErrorCode::Overloaded
            | ErrorCode::Timeout => " Try again shortly.",
            _ => "",
        };
        if error.code == ErrorCode::Internal {
            tracing::error!(error = %error.message, "internal error in an MCP tool");
            return ToolError("internal: internal error. Try again shortly.".into());
        }
        if error.code.status().is_server_error() {
            tracing::warn!(code, error = %error.message, "MCP tool failed");
        }
        ToolError(format!("{code}: {}.{hint}", error.message.trim_end_matches('.')))
    }
}

impl From<retrieval_engine::SearchError> for ToolError {
    fn from(error: retrieval_engine::SearchError) -> Self {
        ApiError::from(error).into()
    }
}

fn failure(message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// A tool's success: the structured content and its short text rendering.
fn success<T: Serialize>(output: &T, text: String) -> Result<CallToolResult, ToolError> {
    let value = serde_json::to_value(output).map_err(|error| ApiError::new(ErrorCode::Internal, error.to_string()))?;
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    Ok(result)
}

/// The arguments of a call as `T` (unknown fields refused; the endpoint already refused repeated keys).
fn arguments<T: DeserializeOwned>(tool: &str, arguments: JsonObject) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(serde_json::Value::Object(arguments)).map_err(|error| {
        let path = error.path().to_string();
        let at = if path.is_empty() || path == "." { String::new() } else { format!("{path}: ") };
        ToolError(format!(
            "invalid_request: the arguments of {tool}: {at}{}. See its input schema.",
            error.into_inner()
        ))
    })
}

/// `value` as the decimal `/search` writes for it (an `f32` widened to `f64` would gain digits).
fn decimal(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(f64::from(value))
}

/// A budget in tokens within `1..=max` (`default` when absent).
fn budget(field: &str, value: Option<i64>, default: usize, max: usize) -> Result<usize, ToolError> {
    match value {
        None => Ok(default),
        Some(value) if (1..=max as i64).contains(&value) => Ok(value as usize),
        Some(value) => Err(ApiError::invalid(format!("{field}: must be within 1..={max}, got {value}")).into()),
    }
}

/// `text` cut to at most `chars` characters at a word boundary when one is near, with `…` when cut;
/// runs of white space become one space.
fn cut(text: &str, chars: usize) -> (String, bool) {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= chars {
        return (flat, false);
    }
    if chars == 0 {
        return (String::new(), true);
    }
    let keep = chars.saturating_sub(1);
    let end = flat.char_indices().nth(keep).map_or(flat.len(), |(at, _)| at);
    let head = &flat[..end];
    let head = match head.rfind(' ') {
        Some(space) if space * 5 >= head.len() * 4 => &head[..space],
        _ => head,
    };
    (format!("{}…", head.trim_end()), true)
}

/// The metadata filters of `search_docs` and `get_context`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Filters {
    /// Only pages of this product.
    product: Option<String>,
    /// Only pages of this product version.
    version: Option<String>,
    /// Only pages with all of these tags.
    #[serde(default)]
    tags: Vec<String>,
    /// Only these pages (doc ids).
    doc_ids: Option<Vec<String>>,
    /// Only these sections (section ids).
    section_ids: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchDocsArgs {
    /// The question, in the user's words.
    query: String,
    /// The tenant (knowledge base) to search; may be left out when the API key reads exactly one.
    tenant: Option<String>,
    /// How many hits (1–50); by default the service's `max_results`, as `/search`.
    #[schemars(range(min = 1, max = 50))]
    top_k: Option<i64>,
    /// Search only pages that match every set filter.
    filters: Option<Filters>,
    /// A theme id chosen by the user after a clarification (or from list_topics): only that theme's pages.
    theme: Option<String>,
    /// The budget of all snippets together, in tokens (default 800, at most 20000).
    #[schemars(range(min = 1, max = 20000))]
    max_tokens: Option<i64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Hit {
    /// 1 for the best hit.
    rank: usize,
    /// The section's or chunk's id (`hit_id` of read_passage).
    id: String,
    /// `section` or `chunk`.
    level: String,
    /// The page's id.
    doc_id: String,
    title: String,
    url: String,
    /// The headings from the page's top down to the hit.
    section_path: Vec<String>,
    /// The start of the hit's text, within the budget.
    snippet: String,
    /// The fused relevance in [0, 1].
    relevance: f64,
    /// The theme the page belongs to.
    theme: Option<String>,
    product: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ClarificationOption {
    /// Pass as `theme` to search within this option.
    theme_id: String,
    display_name: String,
}

/// The question to ask the user when the answer splits between products or roles.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Clarification {
    question: String,
    options: Vec<ClarificationOption>,
}

impl From<retrieval_engine::Clarification> for Clarification {
    fn from(clarification: retrieval_engine::Clarification) -> Self {
        Self {
            question: clarification.question,
            options: clarification
                .options
                .into_iter()
                .map(|option| ClarificationOption { theme_id: option.theme_id, display_name: option.display_name })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchDocsOutput {
    tenant: String,
    /// The probability that the first hit answers the question, in [0, 1] (0 without hits).
    confidence: f64,
    /// Best first: the same first page as `/search` for the same question.
    hits: Vec<Hit>,
    /// Present when the answer differs between products or roles: ask the user, then search again with `theme`.
    clarification: Option<Clarification>,
    /// Whether a snippet was cut to keep within `max_tokens`.
    truncated: bool,
    /// What the answer had to do without (e.g. `embedding_fallback`), by code.
    degradations: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadPassageArgs {
    /// The tenant; may be left out when the API key reads exactly one.
    tenant: Option<String>,
    /// The page's id (`doc_id` of a hit).
    doc_id: String,
    /// A hit's `id`: a section (all of its chunks), a chunk, or the `doc_id` itself (the page's start).
    hit_id: String,
    /// Chunks before the hit (default 1, at most 50).
    #[schemars(range(min = 0, max = 50))]
    before: Option<i64>,
    /// Chunks after the hit (default 1, at most 50).
    #[schemars(range(min = 0, max = 50))]
    after: Option<i64>,
    /// The budget of the passage's text, in tokens (default 2000, at most 30000).
    #[schemars(range(min = 1, max = 30000))]
    max_tokens: Option<i64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PassageChunk {
    chunk_id: String,
    section_id: Option<String>,
    /// The headings from the page's top down to the chunk.
    section_path: Vec<String>,
    text: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReadPassageOutput {
    tenant: String,
    doc_id: String,
    title: String,
    url: String,
    /// In reading order.
    chunks: Vec<PassageChunk>,
    /// Whether text was cut or left out to keep within `max_tokens`.
    truncated: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetContextArgs {
    /// The question, in the user's words.
    query: String,
    /// The tenant (knowledge base); may be left out when the API key reads exactly one.
    tenant: Option<String>,
    /// How many hits to build it from (1–50); by default the service's `max_results`.
    #[schemars(range(min = 1, max = 50))]
    top_k: Option<i64>,
    /// Search only pages that match every set filter.
    filters: Option<Filters>,
    /// A theme id chosen by the user after a clarification: only that theme's pages.
    theme: Option<String>,
    /// The context's budget in tokens (default 2000, at most 33333).
    #[schemars(range(min = 1, max = 33333))]
    max_tokens: Option<i64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ContextSource {
    /// As numbered in the context: [1], [2], …
    number: usize,
    id: String,
    doc_id: String,
    title: String,
    url: String,
    theme: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct GetContextOutput {
    tenant: String,
    /// The prompt-ready text: numbered sources, grouped by theme when the question spans several.
    context: String,
    /// How to answer a context grouped by theme, for the system prompt (absent otherwise).
    system_prompt_rule: Option<String>,
    sources: Vec<ContextSource>,
    /// Whether a source was cut or left out to keep within `max_tokens`.
    truncated: bool,
    /// The probability that the first hit answers the question, in [0, 1].
    confidence: f64,
    /// Present when the answer differs between products or roles: ask the user, then call again with `theme`.
    clarification: Option<Clarification>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListTopicsArgs {
    /// The tenant; may be left out when the API key reads exactly one.
    tenant: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Topic {
    /// Pass as `theme` to search_docs or get_context.
    id: String,
    name: String,
    description: String,
    /// How many of the tenant's pages belong to it.
    pages: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListTopicsOutput {
    tenant: String,
    /// Every page of the tenant.
    pages: usize,
    /// Most pages first.
    topics: Vec<Topic>,
    /// Pages no topic covers.
    other_pages: usize,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutlineArgs {
    /// The tenant; may be left out when the API key reads exactly one.
    tenant: Option<String>,
    /// The page's id (`doc_id` of a hit).
    doc_id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Heading {
    /// Pass as `hit_id` to read_passage to read the section.
    section_id: String,
    heading: String,
    /// The headings from the page's top down to this one.
    path: Vec<String>,
    /// 1 for a top-level heading.
    depth: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OutlineOutput {
    tenant: String,
    doc_id: String,
    title: String,
    url: String,
    /// In reading order.
    headings: Vec<Heading>,
}

/// One tool call: the state and the caller's key.
struct Call<'a> {
    state: &'a AppState,
    key: &'a TenantKey,
}

impl Call<'_> {
    /// The tenant a call means: the one given (when the key may read it), else the only tenant
    /// the key may read; an error naming the readable tenants otherwise.
    async fn tenant(&self, given: Option<String>) -> Result<TenantId, ToolError> {
        if let Some(tenant) = given {
            self.key.check(&tenant)?;
            return Ok(TenantId::new(tenant)?);
        }
        let stats = self.state.search.index().stats().await.map_err(retrieval_engine::SearchError::from)?;
        let readable: Vec<String> = stats.tenants.into_keys().filter(|tenant| self.key.allows(tenant)).collect();
        match readable.as_slice() {
            [only] => Ok(TenantId::new(only.clone())?),
            [] => Err(ToolError("invalid_request: tenant: this API key may read no tenant of this index.".into())),
            many => {
                let named: Vec<&str> = many.iter().take(NAMED_TENANTS).map(String::as_str).collect();
                let more = if many.len() > NAMED_TENANTS { ", …" } else { "" };
                Err(ToolError(format!(
                    "invalid_request: tenant: required, this API key may read several tenants: {}{more}.",
                    named.join(", ")
                )))
            }
        }
    }

    /// The `/search` request of `search_docs` and `get_context`: the filters given are applied
    /// (`enable_filters`), the rest is `/search`'s defaults.
    fn request(
        tenant: TenantId,
        query: String,
        top_k: Option<i64>,
        filters: Option<Filters>,
        theme: Option<String>,
    ) -> Result<SearchRequest, ToolError> {
        if let Some(top_k) = top_k.filter(|top_k| !(1..=MAX_RESULTS_CAP as i64).contains(top_k)) {
            return Err(ApiError::invalid(format!("top_k: must be within 1..={MAX_RESULTS_CAP}, got {top_k}")).into());
        }
        let mut request = SearchRequest { max_results: top_k, theme, ..SearchRequest::new(tenant, query) };
        if let Some(filters) = filters {
            let value =
                serde_json::to_value(filters).map_err(|error| ApiError::new(ErrorCode::Internal, error.to_string()))?;
            request.filters = serde_json::from_value::<SearchFilters>(value)
                .map_err(|error| ToolError(format!("invalid_request: filters: {error}.")))?;
            request.enable_filters = Some(true);
        }
        Ok(request)
    }

    async fn search_docs(&self, arguments: JsonObject) -> Result<CallToolResult, ToolError> {
        let args: SearchDocsArgs = self::arguments("search_docs", arguments)?;
        let tenant = self.tenant(args.tenant).await?;
        let tokens = budget("max_tokens", args.max_tokens, DEFAULT_SNIPPET_TOKENS, MAX_SNIPPET_TOKENS)?;
        let request = Self::request(tenant, args.query, args.top_k, args.filters, args.theme)?;
        let (answer, texts) = self.state.search.search_with_texts(&request).await?;
        let per_hit = (tokens * CHARS_PER_TOKEN).checked_div(answer.hits.len()).unwrap_or(0);
        let mut truncated = false;
        let hits: Vec<Hit> = answer
            .hits
            .iter()
            .enumerate()
            .map(|(position, hit)| {
                let (snippet, cut_short) = cut(texts.get(&hit.id).map_or("", String::as_str), per_hit);
                truncated |= cut_short;
                Hit {
                    rank: position + 1,
                    id: hit.id.clone(),
                    level: hit.level.as_str().to_string(),
                    doc_id: hit.doc_id.clone(),
                    title: hit.title.clone(),
                    url: hit.metadata.url.clone(),
                    section_path: hit.metadata.heading_path.clone(),
                    snippet,
                    relevance: decimal(hit.relevance),
                    theme: hit.metadata.theme_label.clone(),
                    product: hit.metadata.product.clone(),
                }
            })
            .collect();
        let output = SearchDocsOutput {
            tenant: request.tenant_id.to_string(),
            confidence: decimal(answer.confidence()),
            hits,
            clarification: answer.clarification.map(Clarification::from),
            truncated,
            degradations: answer.degradations.into_iter().map(|degradation| degradation.code).collect(),
        };
        let mut text = format!("confidence {:.2}; {} hits", output.confidence, output.hits.len());
        for hit in &output.hits {
            // The section path starts with the page's title.
            let heading = if hit.section_path.is_empty() { hit.title.clone() } else { hit.section_path.join(" › ") };
            let _ = write!(text, "\n{}. {heading} <{}> [{}]\n   {}", hit.rank, hit.url, hit.id, hit.snippet);
        }
        if let Some(clarification) = &output.clarification {
            let _ = write!(text, "\n{}", render_clarification(clarification));
        }
        success(&output, text)
    }

    async fn read_passage(&self, arguments: JsonObject) -> Result<CallToolResult, ToolError> {
        let args: ReadPassageArgs = self::arguments("read_passage", arguments)?;
        let tenant = self.tenant(args.tenant).await?;
        let window = |field: &str, value: Option<i64>| match value {
            None => Ok(1),
            Some(value) if (0..=MAX_WINDOW as i64).contains(&value) => Ok(value as usize),
            Some(value) => Err(ToolError::from(ApiError::invalid(format!(
                "{field}: must be within 0..={MAX_WINDOW}, got {value}"
            )))),
        };
        let tokens = budget("max_tokens", args.max_tokens, DEFAULT_PASSAGE_TOKENS, MAX_PASSAGE_TOKENS)?;
        let query = WindowQuery {
            before: window("before", args.before)?,
            after: window("after", args.after)?,
            tenant_id: tenant,
            doc_id: args.doc_id,
            anchor_chunk_id: args.hit_id,
        };
        let records = self.state.search.passage(&query).await?;
        let mut left = tokens * CHARS_PER_TOKEN;
        let mut truncated = false;
        let mut chunks = Vec::new();
        for record in &records {
            if left == 0 {
                truncated = true;
                break;
            }
            let (text, cut_short) = cut(&record.text, left);
            truncated |= cut_short;
            left = left.saturating_sub(text.chars().count());
            chunks.push(PassageChunk {
                chunk_id: record.id.clone(),
                section_id: record.meta.section_id.clone(),
                section_path: record.meta.heading_path.clone(),
                text,
            });
        }
        let first = records.first().map(|record| &record.meta);
        let output = ReadPassageOutput {
            tenant: query.tenant_id.to_string(),
            doc_id: query.doc_id.clone(),
            title: first.map(|meta| meta.title.to_string()).unwrap_or_default(),
            url: first.map(|meta| meta.url.to_string()).unwrap_or_default(),
            chunks,
            truncated,
        };
        let mut text = format!("{} <{}>", output.title, output.url);
        for chunk in &output.chunks {
            let _ = write!(text, "\n\n{}", chunk.text);
        }
        if output.truncated {
            text.push_str("\n\n(cut to max_tokens)");
        }
        success(&output, text)
    }

    async fn get_context(&self, arguments: JsonObject) -> Result<CallToolResult, ToolError> {
        let args: GetContextArgs = self::arguments("get_context", arguments)?;
        let tenant = self.tenant(args.tenant).await?;
        let tokens =
            budget("max_tokens", args.max_tokens, DEFAULT_CONTEXT_TOKENS, MAX_CONTEXT_CHARS / CHARS_PER_TOKEN)?;
        let request = Self::request(tenant, args.query, args.top_k, args.filters, args.theme)?;
        let answer = self.state.search.context(&request, tokens * CHARS_PER_TOKEN).await?;
        let sources = answer
            .formatted
            .order
            .iter()
            .enumerate()
            .map(|(number, &source_index)| {
                let hit = &answer.search.hits[answer.source_hits[source_index]];
                ContextSource {
                    number: number + 1,
                    id: hit.id.clone(),
                    doc_id: hit.doc_id.clone(),
                    title: hit.title.clone(),
                    url: hit.metadata.url.clone(),
                    theme: hit.metadata.theme_label.clone(),
                }
            })
            .collect();
        let confidence = decimal(answer.search.confidence());
        let output = GetContextOutput {
            tenant: request.tenant_id.to_string(),
            context: answer.formatted.context,
            system_prompt_rule: answer.formatted.system_prompt_rule,
            sources,
            truncated: answer.formatted.truncated,
            confidence,
            clarification: answer.search.clarification.map(Clarification::from),
        };
        let mut text = output.context.clone();
        if let Some(clarification) = &output.clarification {
            let _ = write!(text, "\n\n{}", render_clarification(clarification));
        }
        success(&output, text)
    }

    async fn list_topics(&self, arguments: JsonObject) -> Result<CallToolResult, ToolError> {
        let args: ListTopicsArgs = self::arguments("list_topics", arguments)?;
        let tenant = self.tenant(args.tenant).await?;
        let topics = self.state.search.topics(&tenant).await?;
        let output = ListTopicsOutput {
            tenant: tenant.to_string(),
            pages: topics.pages,
            topics: topics
                .topics
                .into_iter()
                .map(|topic| Topic {
                    id: topic.id,
                    name: topic.display_name,
                    description: topic.description,
                    pages: topic.pages,
                })
                .collect(),
            other_pages: topics.unlabelled_pages,
        };
        let mut text = format!("{}: {} pages", output.tenant, output.pages);
        for topic in &output.topics {
            let _ = write!(text, "\n- {} (theme `{}`): {} pages", topic.name, topic.id, topic.pages);
        }
        if output.other_pages > 0 {
            let _ = write!(text, "\n- other: {} pages", output.other_pages);
        }
        success(&output, text)
    }

    async fn outline(&self, arguments: JsonObject) -> Result<CallToolResult, ToolError> {
        let args: OutlineArgs = self::arguments("outline", arguments)?;
        let tenant = self.tenant(args.tenant).await?;
        let sections = self.state.search.outline(&tenant, &args.doc_id).await?;
        let first = sections.first().map(|record| &record.meta);
        let output = OutlineOutput {
            tenant: tenant.to_string(),
            doc_id: args.doc_id,
            title: first.map(|meta| meta.title.to_string()).unwrap_or_default(),
            url: first.map(|meta| meta.url.to_string()).unwrap_or_default(),
            headings: sections
                .iter()
                .map(|section| Heading {
                    section_id: section.id.clone(),
                    heading: section.meta.heading.clone(),
                    path: section.meta.heading_path.clone(),
                    depth: section.meta.heading_path.len().max(1),
                })
                .collect(),
        };
        let mut text = format!("{} <{}>", output.title, output.url);
        for heading in &output.headings {
            let indent = "  ".repeat(heading.depth.saturating_sub(1));
            let _ = write!(text, "\n{indent}- {} [{}]", heading.heading, heading.section_id);
        }
        success(&output, text)
    }
}

fn render_clarification(clarification: &Clarification) -> String {
    let options: Vec<String> = clarification
        .options
        .iter()
        .map(|option| format!("{} (theme `{}`)", option.display_name, option.theme_id))
        .collect();
    format!("Clarify: {} Options: {}", clarification.question, options.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schemas_state_the_limits_the_tools_check() {
        let maximum = |schema: &JsonObject, field: &str| schema["properties"][field]["maximum"].as_u64();
        let search = schema_for_type::<SearchDocsArgs>();
        assert_eq!(maximum(&search, "top_k"), Some(MAX_RESULTS_CAP as u64));
        assert_eq!(maximum(&search, "max_tokens"), Some(MAX_SNIPPET_TOKENS as u64));
        let context = schema_for_type::<GetContextArgs>();
        assert_eq!(maximum(&context, "top_k"), Some(MAX_RESULTS_CAP as u64));
        assert_eq!(maximum(&context, "max_tokens"), Some((MAX_CONTEXT_CHARS / CHARS_PER_TOKEN) as u64));
        let passage = schema_for_type::<ReadPassageArgs>();
        assert_eq!(maximum(&passage, "max_tokens"), Some(MAX_PASSAGE_TOKENS as u64));
        assert_eq!(maximum(&passage, "before"), Some(MAX_WINDOW as u64));
        assert_eq!(maximum(&passage, "after"), Some(MAX_WINDOW as u64));
    }

    #[test]
    fn a_cut_keeps_within_the_budget_and_says_so() {
        assert_eq!(cut("short  text\n here", 100), ("short text here".to_string(), false));
        let (snippet, cut_short) = cut("один два три четыре пять шесть", 12);
        assert!(cut_short);
        assert!(snippet.chars().count() <= 12, "{snippet}");
        assert!(snippet.ends_with('…'), "{snippet}");
        assert_eq!(cut("abc", 0), (String::new(), true));
    }
}
