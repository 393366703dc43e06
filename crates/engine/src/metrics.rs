//! Every metric of `/metrics`, in one registry of the Prometheus project's Rust client
//! (`prometheus-client`), exposed in the OpenMetrics text format. One `Metrics` is built at
//! start-up and shared through `AppState` and the `SearchService`: no process-wide statics.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Latency buckets in seconds: 1 ms to 10 s (a search takes about 1 ms; upstream calls seconds).
const BUCKETS: [f64; 12] = [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// The content type of [`Metrics::render`]'s text.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    /// The matched route template (`unmatched` for 404s: the label set stays bounded).
    route: String,
    /// One of [`method_label`]'s: a client cannot add label values.
    method: &'static str,
    status: u16,
}

/// The label (and log field) of an HTTP method: the standard methods by name, any other
/// (a client may send any token, of any length) as `other`.
pub fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "POST" => "POST",
        "HEAD" => "HEAD",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "other",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabels {
    tenant: String,
    level: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DifyLabels {
    /// `ok`, `degraded`, `lexical_fallback`, `blank_query`, or why the request failed (a closed set).
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    /// `ok` or `rejected`.
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: &'static str,
    outcome: &'static str,
}

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The service's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Searches that reached the cascade.
    pub(crate) searches: Counter,
    /// Queries embedded with pseudo-embeddings because the provider failed.
    pub(crate) embedding_fallbacks: Counter,
    /// Reranks that failed and kept the original order.
    pub(crate) rerank_failures: Counter,
    /// Searches answered by the text fallback.
    pub(crate) text_fallbacks: Counter,
    /// Requests answered 503 `overloaded` (`RETR_MAX_IN_FLIGHT_REQUESTS` in progress).
    pub requests_shed: Counter,
    /// Connections closed at once because `RETR_MAX_CONNECTIONS` were open and busy.
    pub connections_refused: Counter,
    /// Idle connections closed to make room for a new one at `RETR_MAX_CONNECTIONS`.
    pub connections_evicted: Counter,
    /// Connections open now.
    pub connections_open: Gauge,
    /// Requests in progress now (`/health` and `/metrics` included).
    pub requests_in_flight: Gauge,
    /// Log lines lost: dropped because the log sink could not keep up, or not written because
    /// the sink failed (the service's `log_writer`).
    pub log_lines_dropped: Counter,
    /// Dify queries longer than `RETR_MAX_QUERY_CHARS`, searched by their beginning.
    pub dify_queries_truncated: Counter,
    http_requests: Family<ClassLabels, Counter>,
    search_duration: Histogram,
    request_duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
    upstream_duration: Family<UpstreamLabels, Histogram, fn() -> Histogram>,
    replica_records_loaded: Counter,
    replica_age: Gauge<f64, std::sync::atomic::AtomicU64>,
    replica_last_load: Gauge<f64, std::sync::atomic::AtomicU64>,
    tenant_records: Family<TenantLabels, Gauge>,
    dify_requests: Family<DifyLabels, Counter>,
    config_reloads: Family<ReloadLabels, Counter>,
    /// 1 while the last config reload was rejected (the files in use are older than those on disk).
    config_reload_rejected: Gauge,
    /// The outcome of each upstream's last call, for `/health`.
    last_upstream_outcome: Mutex<BTreeMap<&'static str, &'static str>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("retrieval");
        let metrics = Self {
            searches: Counter::default(),
            embedding_fallbacks: Counter::default(),
            rerank_failures: Counter::default(),
            text_fallbacks: Counter::default(),
            requests_shed: Counter::default(),
            connections_refused: Counter::default(),
            connections_evicted: Counter::default(),
            connections_open: Gauge::default(),
            requests_in_flight: Gauge::default(),
            log_lines_dropped: Counter::default(),
            dify_queries_truncated: Counter::default(),
            http_requests: Family::default(),
            search_duration: histogram(),
            request_duration: Family::new_with_constructor(histogram),
            upstream_duration: Family::new_with_constructor(histogram),
            replica_records_loaded: Counter::default(),
            replica_age: Gauge::default(),
            replica_last_load: Gauge::default(),
            tenant_records: Family::default(),
            last_upstream_outcome: Mutex::default(),
            dify_requests: Family::default(),
            config_reloads: Family::default(),
            config_reload_rejected: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register("searches", "Searches that reached the cascade", metrics.searches.clone());
        registry.register(
            "embedding_fallbacks",
            "Queries embedded with pseudo-embeddings because the provider failed",
            metrics.embedding_fallbacks.clone(),
        );
        registry.register(
            "rerank_failures",
            "Reranks that failed and kept the original order",
            metrics.rerank_failures.clone(),
        );
        registry.register("text_fallbacks", "Searches answered by the text fallback", metrics.text_fallbacks.clone());
        registry.register(
            "requests_shed",
            "Requests answered 503 overloaded (RETR_MAX_IN_FLIGHT_REQUESTS in progress)",
            metrics.requests_shed.clone(),
        );
        registry.register(
            "connections_refused",
            "Connections closed at once (RETR_MAX_CONNECTIONS open, every one busy)",
            metrics.connections_refused.clone(),
        );
        registry.register(
            "connections_evicted",
            "Idle connections closed to make room for a new one (RETR_MAX_CONNECTIONS open)",
            metrics.connections_evicted.clone(),
        );
        registry.register("connections_open", "Connections open now", metrics.connections_open.clone());
        registry.register(
            "http_requests_in_flight",
            "HTTP requests in progress now",
            metrics.requests_in_flight.clone(),
        );
        registry.register(
            "log_lines_dropped",
            "Log lines lost: dropped (the log sink could not keep up) or failed by the sink (full disk)",
            metrics.log_lines_dropped.clone(),
        );
        registry.register(
            "dify_queries_truncated",
            "Dify queries longer than RETR_MAX_QUERY_CHARS, searched by their beginning",
            metrics.dify_queries_truncated.clone(),
        );
        registry.register("http_requests", "HTTP requests by status class", metrics.http_requests.clone());
        registry.register_with_unit(
            "search_duration",
            "Latency of /search",
            Unit::Seconds,
            metrics.search_duration.clone(),
        );
        registry.register_with_unit(
            "http_request_duration",
            "Latency of HTTP requests by route template, method and status",
            Unit::Seconds,
            metrics.request_duration.clone(),
        );
        registry.register_with_unit(
            "upstream_request_duration",
            "Latency of calls to upstream services (embedding, rerank, llm router, chroma) by outcome",
            Unit::Seconds,
            metrics.upstream_duration.clone(),
        );
        registry.register(
            "replica_records_loaded",
            "Records fetched by the replica's refreshes (snapshot file or Chroma) since start-up",
            metrics.replica_records_loaded.clone(),
        );
        registry.register_with_unit(
            "replica_age",
            "Since the replica was last confirmed current (loaded, or its source polled unchanged)",
            Unit::Seconds,
            metrics.replica_age.clone(),
        );
        registry.register_with_unit(
            "replica_last_load",
            "How long the replica's last full load or incremental refresh took",
            Unit::Seconds,
            metrics.replica_last_load.clone(),
        );
        registry.register("tenant_records", "Records per tenant and level", metrics.tenant_records.clone());
        registry.register(
            "dify_requests",
            "Dify External Knowledge API requests by outcome: ok, degraded, lexical_fallback, or why they failed",
            metrics.dify_requests.clone(),
        );
        registry.register(
            "config_reloads",
            "Reloads of the themes, boosting and synonyms files by outcome: ok, or rejected (the files in use stay)",
            metrics.config_reloads.clone(),
        );
        registry.register(
            "config_reload_rejected",
            "1 while the last reload of the themes, boosting and synonyms files was rejected",
            metrics.config_reload_rejected.clone(),
        );
        Self { registry, ..metrics }
    }

    /// Brings the replica gauges up to date (called as `/metrics` is scraped): the records its
    /// refreshes fetched, its age and how long its last load took.
    pub fn observe_replica(&self, records_loaded_total: u64, age_seconds: Option<f64>, last_load_seconds: Option<f64>) {
        let counted = self.replica_records_loaded.get();
        if records_loaded_total > counted {
            self.replica_records_loaded.inc_by(records_loaded_total - counted);
        }
        self.replica_age.set(age_seconds.unwrap_or(f64::NAN));
        self.replica_last_load.set(last_load_seconds.unwrap_or(f64::NAN));
    }

    /// The record counts per tenant (docs, sections, chunks), replacing the last ones.
    pub fn observe_tenant_records<'a>(&self, tenants: impl IntoIterator<Item = (&'a str, [usize; 3])>) {
        self.tenant_records.clear();
        for (tenant, counts) in tenants {
            for (level, count) in ["doc", "section", "chunk"].into_iter().zip(counts) {
                let labels = TenantLabels { tenant: tenant.to_string(), level };
                self.tenant_records.get_or_create(&labels).set(count as i64);
            }
        }
    }

    /// Records one finished HTTP request. `route` is the matched route template, if any (a
    /// template, never the raw path); `method` is reduced to [`method_label`].
    pub fn observe_request(&self, route: Option<&str>, method: &str, status: u16, elapsed: Duration) {
        let class = match status / 100 {
            1 => "1xx",
            2 => "2xx",
            3 => "3xx",
            4 => "4xx",
            _ => "5xx",
        };
        self.http_requests.get_or_create(&ClassLabels { class }).inc();
        let labels =
            RouteLabels { route: route.unwrap_or("unmatched").to_string(), method: method_label(method), status };
        self.request_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
        if route.is_some_and(|route| route.ends_with("/search")) {
            self.search_duration.observe(elapsed.as_secs_f64());
        }
    }

    /// Records one call to an upstream service: `upstream` names it (`embedding`, `rerank`,
    /// `llm_router`, `chroma`), `outcome` is `ok` or the error kind.
    pub(crate) fn observe_upstream(&self, upstream: &'static str, outcome: &'static str, elapsed: Duration) {
        self.upstream_duration.get_or_create(&UpstreamLabels { upstream, outcome }).observe(elapsed.as_secs_f64());
        self.last_upstream_outcome.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(upstream, outcome);
    }

    /// The upstreams whose last call failed, with its outcome (`timeout`, `unauthorized`, …).
    pub fn failing_upstreams(&self) -> Vec<(&'static str, &'static str)> {
        let last = self.last_upstream_outcome.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        last.iter().filter(|(_, outcome)| **outcome != "ok").map(|(upstream, outcome)| (*upstream, *outcome)).collect()
    }

    /// A reload of the config files: accepted, or rejected with the old files kept.
    pub fn config_reload(&self, accepted: bool) {
        let outcome = if accepted { "ok" } else { "rejected" };
        self.config_reloads.get_or_create(&ReloadLabels { outcome }).inc();
        self.config_reload_rejected.set(i64::from(!accepted));
    }

    /// Counts one answer of the Dify endpoint; `outcome` comes from a closed set (`api::dify`),
    /// never from the request.
    pub fn observe_dify(&self, outcome: &'static str) {
        self.dify_requests.get_or_create(&DifyLabels { outcome }).inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_class_route_and_status() {
        let metrics = Metrics::new();
        metrics.observe_request(Some("/internal/retrieval/search"), "POST", 200, Duration::from_millis(3));
        metrics.observe_request(None, "GET", 404, Duration::from_millis(1));
        metrics.searches.inc();
        metrics.observe_upstream("embedding", "timeout", Duration::from_secs(2));
        let text = metrics.render();
        for line in [
            "retrieval_searches_total 1",
            "retrieval_http_requests_total{class=\"2xx\"} 1",
            "retrieval_http_requests_total{class=\"4xx\"} 1",
            "retrieval_search_duration_seconds_count 1",
            "retrieval_http_request_duration_seconds_count{route=\"/internal/retrieval/search\",method=\"POST\",status=\"200\"} 1",
            "retrieval_http_request_duration_seconds_count{route=\"unmatched\",method=\"GET\",status=\"404\"} 1",
            "retrieval_upstream_request_duration_seconds_count{upstream=\"embedding\",outcome=\"timeout\"} 1",
            "# EOF",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn unknown_methods_share_one_label_so_clients_cannot_grow_the_exposition() {
        let metrics = Metrics::new();
        let huge = "X".repeat(65_000);
        for n in 0..100 {
            metrics.observe_request(None, &format!("{huge}{n}"), 405, Duration::from_millis(1));
        }
        let text = metrics.render();
        assert!(text.len() < 20_000, "{} bytes", text.len());
        assert!(text.contains(
            "retrieval_http_request_duration_seconds_count{route=\"unmatched\",method=\"other\",status=\"405\"} 100"
        ));
    }
}
