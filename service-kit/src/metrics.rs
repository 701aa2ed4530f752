//! Prometheus metrics through the `prometheus` crate (tikv/rust-prometheus).
//!
//! A service's counters live in its state (the pure cores count in plain integers), so
//! each scrape builds a [`Page`]: a fresh registry the service's `RenderMetrics`
//! handler fills with one call per family ([`single`], [`family`], [`Page::histogram`]),
//! then [`Page::encode`] writes Prometheus text format 0.0.4. The registry validates
//! names, label names and duplicates, and the encoder escapes HELP text and label
//! values; a family it refuses is left out with an error log line naming it.
//!
//! Conventions (checked by `promtool check metrics` in `tests/tests/metrics_lint.rs`):
//! counters end in `_total`, units are base units in the name (`_seconds`, `_bytes`),
//! latencies are histograms. The list of families is in `docs/metrics.md`.
//!
//! A role declares its own families once as a [`table`] of [`table::Metric`]s.

pub mod table;

use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
use prometheus::{CounterVec, GaugeVec, Opts, Registry, TextEncoder};

/// The `Content-Type` of [`Page::encode`]'s text.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// The metric families of one scrape.
#[derive(Default)]
pub struct Page {
    registry: Registry,
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page")
            .field("families", &self.registry.gather().len())
            .finish()
    }
}

impl Page {
    pub fn new() -> Page {
        Page::default()
    }

    /// Adds a latency histogram (a clone sharing its buckets).
    pub fn histogram(&mut self, h: &Histogram) {
        self.register(h.0.clone());
    }

    /// The page in Prometheus text format 0.0.4, families sorted by name.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = TextEncoder::new().encode_utf8(&self.registry.gather(), &mut out) {
            tracing::error!(error = %e, "cannot encode the metrics page");
        }
        out
    }

    fn register(&mut self, c: impl Collector + 'static) {
        let name = c
            .desc()
            .first()
            .map(|d| d.fq_name.clone())
            .unwrap_or_default();
        if let Err(e) = self.registry.register(Box::new(c)) {
            tracing::error!(metric = %name, error = %e, "metric family left out of /metrics");
        }
    }

    fn add(&mut self, name: &str, kind: &str, help: &str, label: &str, samples: &[(String, f64)]) {
        let opts = Opts::new(name, help);
        let labels: &[&str] = if label.is_empty() { &[] } else { &[label] };
        let bad = |e: prometheus::Error| {
            tracing::error!(metric = name, error = %e, "metric family left out of /metrics");
        };
        match kind {
            "counter" => match CounterVec::new(opts, labels) {
                Ok(v) => {
                    for (value, n) in samples {
                        if !(n.is_finite() && *n >= 0.0) {
                            tracing::error!(
                                metric = name,
                                value = n,
                                "counter sample left out: not a finite count"
                            );
                            continue;
                        }
                        match child(&v, label, value) {
                            Ok(c) => c.inc_by(*n),
                            Err(e) => bad(e),
                        }
                    }
                    self.register(v);
                }
                Err(e) => bad(e),
            },
            "gauge" => match GaugeVec::new(opts, labels) {
                Ok(v) => {
                    for (value, n) in samples {
                        match child(&v, label, value) {
                            Ok(g) => g.set(*n),
                            Err(e) => bad(e),
                        }
                    }
                    self.register(v);
                }
                Err(e) => bad(e),
            },
            other => {
                tracing::error!(
                    metric = name,
                    kind = other,
                    "metric family left out of /metrics: kind is neither counter nor gauge"
                );
            }
        }
    }
}

/// The child of `v` for one sample: the unlabelled one, or the one of `value`.
fn child<T: MetricVecBuilder>(
    v: &MetricVec<T>,
    label: &str,
    value: &str,
) -> prometheus::Result<T::M> {
    let values: &[&str] = if label.is_empty() { &[] } else { &[value] };
    v.get_metric_with_label_values(values)
}

/// Declares one family with one label: `samples` are `(label value, value)`. `kind`
/// is `"counter"` (name ends in `_total`) or `"gauge"`.
pub fn family(
    out: &mut Page,
    name: &str,
    kind: &str,
    help: &str,
    label: &str,
    samples: &[(String, f64)],
) {
    out.add(name, kind, help, label, samples);
}

/// Declares one counter family with one label, read from atomic counters:
/// `counters` are `(label value, counter)`.
pub fn counters(
    out: &mut Page,
    name: &str,
    help: &str,
    label: &str,
    counters: &[(&str, &std::sync::atomic::AtomicU64)],
) {
    let samples: Vec<(String, f64)> = counters
        .iter()
        .map(|(v, c)| {
            (
                (*v).to_owned(),
                c.load(std::sync::atomic::Ordering::Relaxed) as f64,
            )
        })
        .collect();
    out.add(name, "counter", help, label, &samples);
}

/// Declares one unlabelled family with its value. `kind` is `"counter"` or `"gauge"`.
pub fn single(out: &mut Page, name: &str, kind: &str, help: &str, value: f64) {
    out.add(name, kind, help, "", &[(String::new(), value)]);
}

/// Sums every sample of a metric family (all label sets) in a Prometheus text page;
/// 0 when the family is absent. Used by observers that read the services' counters.
pub fn sum(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A latency histogram in seconds (the library's, observed as events happen).
#[derive(Clone, Debug)]
pub struct Histogram(prometheus::Histogram);

/// Bucket bounds for latencies: 0.5 ms to 60 s.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
];

impl Histogram {
    /// A histogram over [`LATENCY_BUCKETS`]. `name` must end in `_seconds`; an invalid
    /// name or empty help is a programming error, caught by the metrics tests.
    pub fn latency(name: &str, help: &str) -> prometheus::Result<Histogram> {
        let opts = prometheus::HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec());
        Ok(Histogram(prometheus::Histogram::with_opts(opts)?))
    }

    /// Records one latency; non-finite values are ignored.
    pub fn observe(&self, secs: f64) {
        if secs.is_finite() {
            self.0.observe(secs);
        }
    }

    pub fn count(&self) -> u64 {
        self.0.get_sample_count()
    }
}

#[cfg(test)]
mod tests;
