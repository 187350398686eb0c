//! The engine's counters, and their Prometheus text form (`/metrics`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of the time-to-first-token histogram's buckets.
const TTFT_BUCKETS: [f64; 10] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Counters and gauges, updated by the engine and the server.
#[derive(Default)]
pub struct Metrics {
    /// Requests submitted.
    pub requests: AtomicU64,
    /// Requests finished (any reason).
    pub finished: AtomicU64,
    /// Requests that failed in the engine.
    pub failed: AtomicU64,
    /// Requests refused before submission (bad requests).
    pub rejected: AtomicU64,
    /// Prompt tokens prefilled.
    pub prompt_tokens: AtomicU64,
    /// Tokens generated.
    pub generated_tokens: AtomicU64,
    /// Requests waiting for room in the KV cache.
    pub queue_length: AtomicU64,
    /// Requests running.
    pub running: AtomicU64,
    /// KV cache pages in use.
    pub pages_in_use: AtomicU64,
    /// KV cache pages.
    pub total_pages: AtomicU64,
    /// Decode steps run.
    pub decode_steps: AtomicU64,
    /// Time of the decode steps, whole (ns).
    pub decode_step_ns: AtomicU64,
    /// Of which in the model's `batch_decode` call (ns).
    pub decode_call_ns: AtomicU64,
    /// Time in the model's prefill calls (ns).
    pub prefill_call_ns: AtomicU64,
    ttft_buckets: [AtomicU64; TTFT_BUCKETS.len()],
    ttft_count: AtomicU64,
    ttft_sum_us: AtomicU64,
}

impl Metrics {
    /// Records a time to first token.
    pub fn observe_ttft(&self, d: Duration) {
        let s = d.as_secs_f64();
        for (b, &le) in self.ttft_buckets.iter().zip(&TTFT_BUCKETS) {
            if s <= le {
                b.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.ttft_count.fetch_add(1, Ordering::Relaxed);
        self.ttft_sum_us.fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self, model: &str) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut s = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{model=\"{model}\"}} {value}");
        };
        metric("tvmrt_requests_total", "counter", "Requests submitted.", g(&self.requests));
        metric("tvmrt_requests_finished_total", "counter", "Requests finished.", g(&self.finished));
        metric("tvmrt_requests_failed_total", "counter", "Requests failed in the engine.", g(&self.failed));
        metric("tvmrt_requests_rejected_total", "counter", "Requests refused as bad requests.", g(&self.rejected));
        metric("tvmrt_prompt_tokens_total", "counter", "Prompt tokens prefilled.", g(&self.prompt_tokens));
        metric("tvmrt_generation_tokens_total", "counter", "Tokens generated.", g(&self.generated_tokens));
        metric("tvmrt_queue_length", "gauge", "Requests waiting for room in the KV cache.", g(&self.queue_length));
        metric("tvmrt_requests_running", "gauge", "Requests running.", g(&self.running));
        metric("tvmrt_kv_cache_pages_in_use", "gauge", "KV cache pages in use.", g(&self.pages_in_use));
        metric("tvmrt_kv_cache_pages_total", "gauge", "KV cache pages.", g(&self.total_pages));
        let name = "tvmrt_time_to_first_token_seconds";
        let _ = writeln!(s, "# HELP {name} Time from submission to the first token.\n# TYPE {name} histogram");
        for (b, le) in self.ttft_buckets.iter().zip(TTFT_BUCKETS) {
            let _ = writeln!(s, "{name}_bucket{{model=\"{model}\",le=\"{le}\"}} {}", g(b));
        }
        let _ = writeln!(s, "{name}_bucket{{model=\"{model}\",le=\"+Inf\"}} {}", g(&self.ttft_count));
        let _ = writeln!(s, "{name}_sum{{model=\"{model}\"}} {}", g(&self.ttft_sum_us) as f64 / 1e6);
        let _ = writeln!(s, "{name}_count{{model=\"{model}\"}} {}", g(&self.ttft_count));
        s
    }
}
