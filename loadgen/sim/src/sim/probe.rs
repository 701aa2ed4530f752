//! Wall-clock timing of the cores' steps during a simulation (`loadgen calibrate`).
//! The simulator calls the very code the services run (`GlobalMaster::step`,
//! `LocalMaster::step`, `Worker::step`), so timing those calls on a realistic run
//! measures the services' processing costs on this machine. Off by default; the
//! schedule never depends on it (virtual time is charged from the cost model).

use std::time::Instant;

/// Samples of one kind of step: the units it handled and the nanoseconds it took.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// (units a, units b, nanoseconds) per step.
    pub rows: Vec<(u64, u64, u64)>,
}

impl Samples {
    pub fn add(&mut self, a: u64, b: u64, ns: u64) {
        self.rows.push((a, b, ns));
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Median nanoseconds per step.
    pub fn median_ns(&self) -> u64 {
        let mut ns: Vec<u64> = self.rows.iter().map(|r| r.2).collect();
        ns.sort_unstable();
        ns.get(ns.len() / 2).copied().unwrap_or(0)
    }

    /// Total nanoseconds over total units `a` (0 without units).
    pub fn ns_per_a(&self) -> f64 {
        let units: u64 = self.rows.iter().map(|r| r.0).sum();
        let ns: u64 = self.rows.iter().map(|r| r.2).sum();
        if units == 0 {
            0.0
        } else {
            ns as f64 / units as f64
        }
    }

    /// Least-squares fit of `ns = x * a + y * b` (no intercept), the costs of the
    /// two units; a negative coefficient is clamped to zero and the other refitted.
    pub fn fit_two(&self) -> (f64, f64) {
        let (mut aa, mut ab, mut bb, mut an, mut bn) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(a, b, ns) in &self.rows {
            let (a, b, ns) = (a as f64, b as f64, ns as f64);
            aa += a * a;
            ab += a * b;
            bb += b * b;
            an += a * ns;
            bn += b * ns;
        }
        let det = aa * bb - ab * ab;
        let only_a = if aa > 0.0 { an / aa } else { 0.0 };
        if det.abs() < 1e-9 {
            return (only_a.max(0.0), 0.0);
        }
        let x = (an * bb - bn * ab) / det;
        let y = (aa * bn - ab * an) / det;
        match (x >= 0.0, y >= 0.0) {
            (true, true) => (x, y),
            (_, false) => (only_a.max(0.0), 0.0),
            (false, true) => (0.0, if bb > 0.0 { (bn / bb).max(0.0) } else { 0.0 }),
        }
    }

    /// Least-squares fit of `ns = c + x * a` (a fixed cost and a cost per unit `a`),
    /// after subtracting `b * per_b` from every sample; both clamped at zero.
    pub fn fit_affine(&self, per_b: f64) -> (f64, f64) {
        let n = self.rows.len() as f64;
        if n == 0.0 {
            return (0.0, 0.0);
        }
        let pts: Vec<(f64, f64)> = self
            .rows
            .iter()
            .map(|&(a, b, ns)| (a as f64, (ns as f64 - b as f64 * per_b).max(0.0)))
            .collect();
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let slope = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
        ((my - slope * mx).max(0.0), slope)
    }
}

/// Every timed step of a run, by kind.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// GM scheduling passes: (decisions, bit-vector words scanned).
    pub gm_pass: Samples,
    /// GM handling an LM message carrying a snapshot: (nodes, 0).
    pub gm_snapshot: Samples,
    /// LM handling a launch batch: (requests, nodes of the LM).
    pub lm_batch: Samples,
    /// LM heartbeat ticks that built a snapshot: (nodes, 0).
    pub lm_tick: Samples,
    /// LM handling a worker report: (1, 0).
    pub lm_report: Samples,
    /// Worker handling a start order: (1, 0).
    pub worker_start: Samples,
}

/// Starts a timing when probing (`None` costs nothing further).
pub fn start(on: bool) -> Option<Instant> {
    on.then(Instant::now)
}

/// Nanoseconds since [`start`] (0 when not probing).
pub fn stop(started: Option<Instant>) -> u64 {
    started.map_or(0, |t| {
        t.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64
    })
}

#[cfg(test)]
mod tests {
    use super::Samples;

    #[test]
    fn the_fits_recover_the_costs_that_made_the_samples() {
        let mut two = Samples::default();
        let mut affine = Samples::default();
        for (a, b) in [(1, 10), (3, 4), (5, 50), (2, 0), (8, 16)] {
            two.add(a, b, 300 * a + 7 * b);
            // 1,000 fixed + 40 per a + 2 per b (b subtracted before the fit).
            affine.add(a, b, 1_000 + 40 * a + 2 * b);
        }
        let (x, y) = two.fit_two();
        assert!(
            (x - 300.0).abs() < 1e-6 && (y - 7.0).abs() < 1e-6,
            "{x} {y}"
        );
        let (c, s) = affine.fit_affine(2.0);
        assert!(
            (c - 1_000.0).abs() < 1e-6 && (s - 40.0).abs() < 1e-6,
            "{c} {s}"
        );
        assert_eq!(Samples::default().fit_affine(1.0), (0.0, 0.0));
    }
}
