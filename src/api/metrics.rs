//! HTTP request counters and a latency histogram, rendered in Prometheus text format.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const BUCKETS_MS: [u64; 10] = [1, 2, 5, 10, 25, 50, 100, 250, 1000, 5000];

#[derive(Debug, Default)]
pub struct HttpMetrics {
    by_class: [AtomicU64; 5],
    search_buckets: [AtomicU64; BUCKETS_MS.len()],
    search_count: AtomicU64,
    search_sum_us: AtomicU64,
    /// Requests answered 503 `overloaded` because too many were in progress.
    pub requests_shed: AtomicU64,
    /// Connections closed at once because `RETR_MAX_CONNECTIONS` were open.
    pub connections_refused: AtomicU64,
    /// Idle connections closed to make room for a new one at `RETR_MAX_CONNECTIONS`.
    pub connections_evicted: AtomicU64,
    /// Connections open now.
    pub connections_open: AtomicU64,
}

impl HttpMetrics {
    pub fn observe(&self, path: &str, status: u16, elapsed: Duration) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.by_class[class].fetch_add(1, Ordering::Relaxed);
        if path.ends_with("/search") {
            let millis = elapsed.as_secs_f64() * 1000.0;
            for (bucket, limit) in self.search_buckets.iter().zip(BUCKETS_MS) {
                if millis <= limit as f64 {
                    bucket.fetch_add(1, Ordering::Relaxed);
                }
            }
            self.search_count.fetch_add(1, Ordering::Relaxed);
            self.search_sum_us.fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
        }
    }

    pub fn render(&self, out: &mut String) {
        for (name, kind, help, value) in [
            (
                "retrieval_requests_shed_total",
                "counter",
                "Requests answered 503 overloaded (RETR_MAX_IN_FLIGHT_REQUESTS in progress).",
                &self.requests_shed,
            ),
            (
                "retrieval_connections_refused_total",
                "counter",
                "Connections closed at once (RETR_MAX_CONNECTIONS open, every one busy).",
                &self.connections_refused,
            ),
            (
                "retrieval_connections_evicted_total",
                "counter",
                "Idle connections closed to make room for a new one (RETR_MAX_CONNECTIONS open).",
                &self.connections_evicted,
            ),
            ("retrieval_connections_open", "gauge", "Connections open now.", &self.connections_open),
        ] {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}\n",
                value.load(Ordering::Relaxed)
            ));
        }
        out.push_str("# HELP retrieval_http_requests_total HTTP requests by status class.\n");
        out.push_str("# TYPE retrieval_http_requests_total counter\n");
        for (index, counter) in self.by_class.iter().enumerate() {
            out.push_str(&format!(
                "retrieval_http_requests_total{{class=\"{}xx\"}} {}\n",
                index + 1,
                counter.load(Ordering::Relaxed)
            ));
        }
        out.push_str("# HELP retrieval_search_duration_seconds Latency of /search.\n");
        out.push_str("# TYPE retrieval_search_duration_seconds histogram\n");
        for (bucket, limit) in self.search_buckets.iter().zip(BUCKETS_MS) {
            out.push_str(&format!(
                "retrieval_search_duration_seconds_bucket{{le=\"{}\"}} {}\n",
                limit as f64 / 1000.0,
                bucket.load(Ordering::Relaxed)
            ));
        }
        let count = self.search_count.load(Ordering::Relaxed);
        out.push_str(&format!("retrieval_search_duration_seconds_bucket{{le=\"+Inf\"}} {count}\n"));
        out.push_str(&format!(
            "retrieval_search_duration_seconds_sum {}\n",
            self.search_sum_us.load(Ordering::Relaxed) as f64 / 1e6
        ));
        out.push_str(&format!("retrieval_search_duration_seconds_count {count}\n"));
    }
}
