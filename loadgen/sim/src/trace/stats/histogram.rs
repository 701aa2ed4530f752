//! A log-bucketed histogram of durations: bounded memory whatever the trace size,
//! percentiles within 1% of the true value.

use common::Micros;

/// Bucket `i >= 1` holds durations in `[GROWTH^(i-1), GROWTH^i)` microseconds;
/// bucket 0 holds zero-length durations.
const GROWTH: f64 = 1.01;

#[derive(Clone, Debug, Default)]
pub struct LogHistogram {
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    min: Option<Micros>,
    max: Micros,
}

fn index(d: Micros) -> usize {
    if d.0 == 0 {
        0
    } else {
        1 + ((d.0 as f64).ln() / GROWTH.ln()).floor() as usize
    }
}

impl LogHistogram {
    pub fn record(&mut self, d: Micros) {
        let i = index(d);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.total += 1;
        self.sum += u128::from(d.0);
        self.min = Some(self.min.map_or(d, |m| m.min(d)));
        self.max = self.max.max(d);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn min(&self) -> Micros {
        self.min.unwrap_or(Micros::ZERO)
    }

    pub fn max(&self) -> Micros {
        self.max
    }

    pub fn mean(&self) -> Micros {
        if self.total == 0 {
            Micros::ZERO
        } else {
            Micros((self.sum / u128::from(self.total)) as u64)
        }
    }

    /// The `q`-quantile (`q` in `[0, 1]`): the smallest bucket bound below which at
    /// least `q` of the durations lie, clamped to the observed min and max (exact for
    /// `q = 0` and `q = 1`).
    pub fn quantile(&self, q: f64) -> Micros {
        if self.total == 0 {
            return Micros::ZERO;
        }
        if q <= 0.0 {
            return self.min();
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let upper = if i == 0 { 0.0 } else { GROWTH.powi(i as i32) };
                return Micros(upper.round() as u64).clamp(self.min(), self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_one_percent() {
        let mut h = LogHistogram::default();
        for s in 1..=1000u64 {
            h.record(Micros::from_secs(s));
        }
        for (q, exact) in [(0.5, 500.0), (0.9, 900.0), (0.99, 990.0)] {
            let got = h.quantile(q).as_secs_f64();
            assert!(
                (got - exact).abs() / exact <= 0.011,
                "q{q}: {got} vs {exact}"
            );
        }
        assert_eq!(h.quantile(1.0), Micros::from_secs(1000));
        assert_eq!(h.quantile(0.0), Micros::from_secs(1));
        assert_eq!(h.mean(), Micros(500_500_000));
    }

    #[test]
    fn zero_durations_and_empty() {
        let mut h = LogHistogram::default();
        assert_eq!(h.quantile(0.5), Micros::ZERO);
        h.record(Micros::ZERO);
        h.record(Micros::ZERO);
        h.record(Micros(10));
        assert_eq!(h.quantile(0.5), Micros::ZERO);
        assert_eq!(h.quantile(1.0), Micros(10));
    }
}
