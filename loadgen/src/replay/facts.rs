//! What a replay's reports need besides the task events: the cluster's size and the
//! GMs' preemption decisions, read from the GMs after the run.

/// What a replay's reports need besides the events, read from the GMs (`/healthz`
/// and `/metrics`, or the embedded actors) after the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterFacts {
    /// Nodes and total capacity as the GMs see them (0 when no GM answered).
    pub nodes: usize,
    pub capacity: common::Resources,
    /// Preemption attempts and refusals: GM decisions, which are not task events.
    pub preempt_attempts: u64,
    pub preempt_refused: u64,
}

impl ClusterFacts {
    /// Adds one GM's answers: the cluster it sees and its metrics page.
    pub fn add_gm(&mut self, nodes: usize, capacity: common::Resources, metrics: &str) {
        // Every GM sees every LM once its view is full: keep the largest view.
        if nodes > self.nodes {
            self.nodes = nodes;
            self.capacity = capacity;
        }
        let sum = service_kit::metrics::sum;
        self.preempt_attempts += sum(metrics, "megha_gm_preempt_attempts_total") as u64;
        self.preempt_refused += sum(metrics, "megha_gm_preempt_refused_total") as u64;
    }

    /// The counters of this run alone: GM counters run from the GM's start, which may
    /// be before the replay (`before` was read when it began).
    pub fn since(&self, before: &ClusterFacts) -> ClusterFacts {
        ClusterFacts {
            preempt_attempts: self
                .preempt_attempts
                .saturating_sub(before.preempt_attempts),
            preempt_refused: self.preempt_refused.saturating_sub(before.preempt_refused),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::Resources;

    fn page(attempts: u64, refused: &[(&str, u64)]) -> String {
        let mut out = service_kit::metrics::Page::new();
        service_kit::metrics::single(
            &mut out,
            "megha_gm_preempt_attempts_total",
            "counter",
            "h",
            attempts as f64,
        );
        let samples: Vec<(String, f64)> = refused
            .iter()
            .map(|(r, n)| (r.to_string(), *n as f64))
            .collect();
        service_kit::metrics::family(
            &mut out,
            "megha_gm_preempt_refused_total",
            "counter",
            "h",
            "reason",
            &samples,
        );
        out.encode()
    }

    #[test]
    fn facts_add_counters_over_gms_keep_the_largest_view_and_subtract_the_start() {
        let mut before = ClusterFacts::default();
        before.add_gm(
            8,
            Resources::cores(8, 8),
            &page(1, &[("not_over_share", 1)]),
        );
        let mut after = ClusterFacts::default();
        // A GM that has not heard from every LM sees fewer nodes.
        after.add_gm(
            4,
            Resources::cores(4, 4),
            &page(3, &[("not_over_share", 2), ("gone", 1)]),
        );
        after.add_gm(8, Resources::cores(8, 8), &page(2, &[]));
        assert_eq!((after.nodes, after.capacity), (8, Resources::cores(8, 8)));
        assert_eq!((after.preempt_attempts, after.preempt_refused), (5, 3));
        let run = after.since(&before);
        assert_eq!((run.preempt_attempts, run.preempt_refused), (4, 2));
        assert_eq!(run.nodes, 8);
    }
}
