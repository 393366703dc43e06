//! What every outbound OpenAI-compatible client (embeddings, reranker, LLM router) shares: the
//! one rule for turning a configured base URL into an endpoint.

/// `{base}/v1/{path}` for an OpenAI-style base given with or without its `/v1` segment
/// (`http://host:8000`, `http://host:8000/v1/` and `https://api.openai.com/v1` all work), so one
/// `RETR_*_API_BASE` value means the same server for every client that uses it.
pub fn openai_endpoint(api_base: &str, path: &str) -> String {
    let base = api_base.trim_end_matches('/');
    let path = path.trim_start_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/{path}")
    } else {
        format!("{base}/v1/{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::openai_endpoint;

    #[test]
    fn a_base_with_or_without_v1_gives_the_same_endpoint() {
        for base in ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"] {
            assert_eq!(openai_endpoint(base, "chat/completions"), "http://h:1/v1/chat/completions", "{base}");
            assert_eq!(openai_endpoint(base, "/embeddings"), "http://h:1/v1/embeddings", "{base}");
        }
        assert_eq!(openai_endpoint("https://api.openai.com/v1", "embeddings"), "https://api.openai.com/v1/embeddings");
    }
}
