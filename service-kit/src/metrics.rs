//! Prometheus text exposition, written by hand: counters, gauges and a fixed-bucket
//! histogram. Each service renders its own families into one `String`.

use std::fmt::Write;

/// Writes one metric family. `samples` are `(labels, value)`, labels already in
/// `key="value",...` form (empty for none).
pub fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}

/// A single unlabelled sample.
pub fn single(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    family(out, name, kind, help, &[(String::new(), value)]);
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

/// A cumulative histogram over fixed upper bounds (seconds).
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: Vec<f64>,
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    /// Buckets from 0.5 ms to 60 s, for latencies.
    pub fn latency() -> Histogram {
        let bounds = vec![
            0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
            30.0, 60.0,
        ];
        Histogram {
            counts: vec![0; bounds.len()],
            bounds,
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, secs: f64) {
        if !secs.is_finite() {
            return;
        }
        if let Some(i) = self.bounds.iter().position(|b| secs <= *b) {
            self.counts[i] += 1;
        }
        self.sum += secs;
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cumulative = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c;
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let mut h = Histogram::latency();
        h.observe(0.0001);
        h.observe(0.003);
        h.observe(100.0);
        let mut out = String::new();
        h.render(&mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"0.0005\"} 1\n"));
        assert!(out.contains("x_bucket{le=\"0.005\"} 2\n"));
        assert!(out.contains("x_bucket{le=\"60\"} 2\n"));
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3\n"));
        assert!(out.contains("x_count 3\n"));
    }

    #[test]
    fn sum_adds_every_label_set_of_one_family_only() {
        let mut page = String::new();
        family(
            &mut page,
            "refused_total",
            "counter",
            "h",
            &[("reason=\"a\"".into(), 2.0), ("reason=\"b\"".into(), 3.0)],
        );
        single(&mut page, "refused_total_seconds", "counter", "h", 100.0);
        single(&mut page, "attempts_total", "counter", "h", 7.0);
        assert_eq!(sum(&page, "refused_total"), 5.0);
        assert_eq!(sum(&page, "attempts_total"), 7.0);
        assert_eq!(sum(&page, "missing_total"), 0.0);
    }
}
