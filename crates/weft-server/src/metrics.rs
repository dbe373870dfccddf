//! Prometheus metrics, kept in atomics and rendered as the text exposition format at `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use weft_agent::ExecuteResult;

/// The server's counters and gauges.
#[derive(Default)]
pub(crate) struct Metrics {
    runs_active: AtomicI64,
    /// Finished runs by status.
    runs_finished: Mutex<BTreeMap<&'static str, u64>>,
    events_streamed: AtomicU64,
    tokens_input: AtomicU64,
    tokens_output: AtomicU64,
    /// Cost in micro-dollars (integers keep the sum exact).
    cost_micros: AtomicU64,
    /// Responses by status code.
    responses: Mutex<BTreeMap<u16, u64>>,
    stream_clients: AtomicI64,
    store_calls: AtomicU64,
    store_micros: AtomicU64,
    connections_open: AtomicI64,
    /// Open connections whose writes are stalled now (their client takes no data); one replaced
    /// at the cap stops counting at once.
    connections_stalled: AtomicI64,
    /// Connections the server closed itself, by reason (`conn::Closed`).
    connections_closed: Mutex<BTreeMap<&'static str, u64>>,
    ws_queued_bytes: AtomicI64,
    ws_slow_closed: AtomicU64,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    *map.entry(key).or_insert(0) += 1;
}

impl Metrics {
    pub(crate) fn run_started(&self) {
        self.runs_active.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn run_finished(&self, result: &ExecuteResult) {
        self.runs_active.fetch_sub(1, Ordering::Relaxed);
        bump(&self.runs_finished, result.status.as_str());
        self.tokens_input.fetch_add(result.usage.input, Ordering::Relaxed);
        self.tokens_output.fetch_add(result.usage.output, Ordering::Relaxed);
        let micros = (result.cost.total * 1e6).round();
        if micros.is_finite() && micros > 0.0 {
            // Saturating: a provider's numbers are not trusted.
            self.cost_micros.fetch_add(micros.min(u64::MAX as f64) as u64, Ordering::Relaxed);
        }
    }

    pub(crate) fn events(&self, count: u64) {
        self.events_streamed.fetch_add(count, Ordering::Relaxed);
    }

    pub(crate) fn response(&self, status: u16) {
        bump(&self.responses, status);
    }

    pub(crate) fn stream_opened(&self) {
        self.stream_clients.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stream_closed(&self) {
        self.stream_clients.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn store_call(&self, took: Duration) {
        self.store_calls.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.store_micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub(crate) fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_released(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_stalled(&self, delta: i64) {
        self.connections_stalled.fetch_add(delta, Ordering::Relaxed);
    }

    pub(crate) fn connection_closed(&self, reason: crate::conn::Closed) {
        bump(&self.connections_closed, reason.as_str());
    }

    pub(crate) fn ws_queued(&self, bytes: i64) {
        self.ws_queued_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn ws_slow_closed(&self) {
        self.ws_slow_closed.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.render_runs(&mut out);
        self.render_http(&mut out);
        out
    }

    /// The metrics of runs: how many, their events, tokens and cost.
    fn render_runs(&self, out: &mut String) {
        metric(
            out,
            "weft_runs_active",
            "gauge",
            "Runs started by this server and not finished.",
            &plain(self.runs_active.load(Ordering::Relaxed).to_string()),
        );
        let finished: Vec<_> = {
            let map = self.runs_finished.lock().unwrap_or_else(|e| e.into_inner());
            map.iter().map(|(s, n)| (format!("{{status=\"{s}\"}}"), n.to_string())).collect()
        };
        metric(out, "weft_runs_finished_total", "counter", "Runs finished, by status.", &finished);
        metric(
            out,
            "weft_events_streamed_total",
            "counter",
            "Events sent to clients (SSE, NDJSON, WebSocket).",
            &plain(self.events_streamed.load(Ordering::Relaxed).to_string()),
        );
        metric(
            out,
            "weft_tokens_total",
            "counter",
            "Tokens used by finished runs.",
            &[
                ("{kind=\"input\"}".into(), self.tokens_input.load(Ordering::Relaxed).to_string()),
                (
                    "{kind=\"output\"}".into(),
                    self.tokens_output.load(Ordering::Relaxed).to_string(),
                ),
            ],
        );
        let cost = self.cost_micros.load(Ordering::Relaxed) as f64 / 1e6;
        metric(
            out,
            "weft_cost_usd_total",
            "counter",
            "Cost of finished runs in USD.",
            &plain(format!("{cost}")),
        );
    }

    /// The metrics of HTTP: responses, clients, connections, WebSockets, and store calls.
    fn render_http(&self, out: &mut String) {
        let responses: Vec<_> = {
            let map = self.responses.lock().unwrap_or_else(|e| e.into_inner());
            map.iter().map(|(s, n)| (format!("{{status=\"{s}\"}}"), n.to_string())).collect()
        };
        metric(
            out,
            "weft_http_responses_total",
            "counter",
            "HTTP responses, by status.",
            &responses,
        );
        let errors: u64 = {
            let map = self.responses.lock().unwrap_or_else(|e| e.into_inner());
            map.iter().filter(|(s, _)| **s >= 400).map(|(_, n)| n).sum()
        };
        metric(
            out,
            "weft_http_errors_total",
            "counter",
            "HTTP responses with a 4xx or 5xx status.",
            &plain(errors.to_string()),
        );
        metric(
            out,
            "weft_stream_clients",
            "gauge",
            "Clients reading an event stream now.",
            &plain(self.stream_clients.load(Ordering::Relaxed).to_string()),
        );
        metric(
            out,
            "weft_connections_open",
            "gauge",
            "HTTP connections open now (WebSockets included).",
            &plain(self.connections_open.load(Ordering::Relaxed).to_string()),
        );
        metric(
            out,
            "weft_connections_stalled",
            "gauge",
            "Open connections whose writes wait on a full socket now (the client takes no data).",
            &plain(self.connections_stalled.load(Ordering::Relaxed).to_string()),
        );
        let closed: Vec<_> = {
            let map = self.connections_closed.lock().unwrap_or_else(|e| e.into_inner());
            map.iter().map(|(r, n)| (format!("{{reason=\"{r}\"}}"), n.to_string())).collect()
        };
        metric(
            out,
            "weft_connections_closed_total",
            "counter",
            "Connections the server closed or refused itself, by reason (header_timeout, \
             idle_timeout, write_timeout, evicted, refused).",
            &closed,
        );
        metric(
            out,
            "weft_ws_queued_bytes",
            "gauge",
            "Bytes waiting in WebSocket send queues now.",
            &plain(self.ws_queued_bytes.load(Ordering::Relaxed).to_string()),
        );
        metric(
            out,
            "weft_ws_slow_closed_total",
            "counter",
            "WebSockets closed because the client took no data for limits.ws_send_timeout.",
            &plain(self.ws_slow_closed.load(Ordering::Relaxed).to_string()),
        );
        let calls = self.store_calls.load(Ordering::Relaxed);
        let seconds = self.store_micros.load(Ordering::Relaxed) as f64 / 1e6;
        metric(
            out,
            "weft_store_seconds",
            "summary",
            "Time spent in session store calls made by request handlers.",
            // The "labels" here are the summary's suffixes: `weft_store_seconds_sum …`.
            &[("_sum".into(), format!("{seconds}")), ("_count".into(), calls.to_string())],
        );
    }
}

/// Writes one metric to `out`: its help and type lines, then a line for each (labels, value).
fn metric(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// One sample with no labels.
fn plain(v: String) -> Vec<(String, String)> {
    vec![(String::new(), v)]
}
