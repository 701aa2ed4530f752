//! What became of the replayed gangs (`--gangs`, docs/gangs.md), from the rebuilt
//! task records: how many started, how far apart their members' starts were, and
//! which ran *apart*: fewer than `min_members` of its members had started when the
//! first of them finished, so the gang never ran together. Start times come from the workers'
//! events; members of one commit start within the hops of the commit to their LMs
//! and of the LMs' orders to their workers, so the spread of a whole gang is that
//! delivery time, not a task duration.

use super::driver::Gangs;
use common::Micros;
use megha_sim::sim::ledger::TaskRecord;
use rustc_hash::FxHashMap;

/// The figures of a replay's gangs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GangFigures {
    /// Jobs submitted as gangs.
    pub gangs: usize,
    /// Gangs of which at least `min_members` members started.
    pub started: usize,
    /// The gangs (trace job ids) whose members did not all run together.
    pub apart: Vec<u64>,
    /// The largest spread between a started gang's first member start and its
    /// `min_members`-th.
    pub max_spread: Micros,
}

/// The figures of `gangs` in a replay's task records.
pub fn figures(records: &[TaskRecord], gangs: &Gangs) -> GangFigures {
    let mut members: FxHashMap<u64, Vec<&TaskRecord>> = FxHashMap::default();
    for r in records.iter().filter(|r| gangs.contains_key(&r.job)) {
        members.entry(r.job).or_default().push(r);
    }
    let mut f = GangFigures {
        gangs: gangs.len(),
        ..GangFigures::default()
    };
    let mut jobs: Vec<_> = members.into_iter().collect();
    jobs.sort_unstable_by_key(|(job, _)| *job);
    for (job, runs) in jobs {
        let need = gangs[&job].min_members.max(1) as usize;
        let mut starts: Vec<Micros> = runs.iter().filter_map(|r| r.start).collect();
        starts.sort_unstable();
        // The gang's start: its `min_members`-th member start (the rest of a gang
        // of fewer members than tasks start as ordinary tasks, when they fit).
        let Some(&gang_start) = starts.get(need - 1) else {
            continue;
        };
        f.started += 1;
        f.max_spread = f.max_spread.max(Micros(gang_start.0 - starts[0].0));
        let first_end = runs.iter().filter_map(|r| r.finish).min();
        if first_end.is_some_and(|end| end < gang_start) {
            f.apart.push(job);
        }
    }
    f
}

impl std::fmt::Display for GangFigures {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            out,
            "gangs: {} submitted, {} started together, {} ran apart, largest start spread {:.1} ms",
            self.gangs,
            self.started,
            self.apart.len(),
            self.max_spread.0 as f64 / 1000.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::gang::GangSpec;

    fn record(job: u64, index: u32, start: Option<u64>, finish: Option<u64>) -> TaskRecord {
        let mut r = TaskRecord::new(job, index, Micros(0));
        r.start = start.map(Micros);
        r.finish = finish.map(Micros);
        r
    }

    #[test]
    fn a_member_started_after_another_finished_is_a_gang_run_apart() {
        let records = vec![
            // Job 1: whole, 3 ms apart.
            record(1, 0, Some(10_000), Some(50_000)),
            record(1, 1, Some(13_000), Some(53_000)),
            // Job 2: its second member started after the first ended.
            record(2, 0, Some(10_000), Some(20_000)),
            record(2, 1, Some(30_000), Some(40_000)),
            // Job 3: not a gang, apart.
            record(3, 0, Some(10_000), Some(20_000)),
            record(3, 1, Some(30_000), Some(40_000)),
            // Job 5: 2 of its 3 together, the third later (min_members 2).
            record(5, 0, Some(10_000), Some(20_000)),
            record(5, 1, Some(11_000), Some(21_000)),
            record(5, 2, Some(30_000), Some(40_000)),
            // Job 4: a gang that never started.
            record(4, 0, None, None),
            record(4, 1, None, None),
        ];
        let mut gangs: Gangs = [1, 2, 4]
            .into_iter()
            .map(|j| (j, GangSpec::all(2, Micros(1))))
            .collect();
        gangs.insert(5, GangSpec::all(2, Micros(1)));
        let f = figures(&records, &gangs);
        assert_eq!(
            f,
            GangFigures {
                gangs: 4,
                started: 3,
                apart: vec![2],
                max_spread: Micros(20_000),
            }
        );
    }
}
