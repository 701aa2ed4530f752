//! User queues in a replay: which queue each job belongs to, and so which GM it is
//! submitted to. The replay is given the same `--queue NAME:SHARE:GM` list as the
//! services; a trace job that names its queue keeps it, the others are spread over
//! the queues round-robin in arrival order, as the simulator does.

use anyhow::{bail, Result};
use common::fairness::FairnessConfig;
use common::QueueId;
use megha_sim::sim::workload::Job;
use megha_sim::trace::TraceJob;

/// Sets the queue of every task of `jobs` (built from `trace`).
pub fn assign_queues(
    jobs: &mut [Job],
    trace: &[TraceJob],
    fairness: &FairnessConfig,
) -> Result<()> {
    if fairness.queues.is_empty() {
        bail!("--queue: at least one queue is needed to assign jobs to queues");
    }
    for (k, job) in jobs.iter_mut().enumerate() {
        let named = trace.get(job.id as usize).and_then(|t| t.queue.as_deref());
        let queue = match named {
            Some(name) => match fairness.by_name(name) {
                Some(q) => q.id,
                None => bail!(
                    "trace job {} names queue `{name}`, which is not in --queue",
                    job.id
                ),
            },
            None => fairness.queues[k % fairness.queues.len()].id,
        };
        for t in &mut job.tasks {
            t.queue = queue;
        }
    }
    Ok(())
}

/// The GM (index) a job goes to: its queue's GM, or `fallback` without queues.
pub fn gm_for(job: &Job, fairness: Option<&FairnessConfig>, fallback: usize) -> usize {
    let queue = job.tasks.first().map_or(QueueId(0), |t| t.queue);
    fairness
        .and_then(|f| f.queue(queue))
        .map_or(fallback, |q| q.gm.index())
}

/// The name a queue id is submitted under (`None`: no queues, the field is left out).
pub fn queue_name(fairness: Option<&FairnessConfig>, queue: QueueId) -> Option<String> {
    fairness
        .and_then(|f| f.queue(queue))
        .map(|q| q.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::fairness::SharePolicy;
    use common::{Micros, Resources};
    use megha_sim::sim::workload::{build, ConstraintMode, WorkloadOptions};
    use megha_sim::trace::TraceTask;

    fn trace(queues: &[Option<&str>]) -> Vec<TraceJob> {
        queues
            .iter()
            .enumerate()
            .map(|(i, q)| TraceJob {
                id: i as u64,
                arrival: Micros(i as u64),
                queue: q.map(str::to_owned),
                stages: Vec::new(),
                tasks: vec![TraceTask::with_duration(Micros(1000))],
            })
            .collect()
    }

    fn jobs(t: &[TraceJob]) -> Vec<Job> {
        build(
            t,
            &WorkloadOptions {
                default_task: Resources::cores(1, 1),
                constraints: ConstraintMode::None,
                seed: 1,
            },
        )
    }

    #[test]
    fn named_queues_stay_and_the_rest_go_round_robin() {
        let f = FairnessConfig::parse("a:0.5:0,b:0.5:1", SharePolicy::Drf, 2).expect("valid");
        let t = trace(&[None, None, Some("a"), None, Some("a")]);
        let mut j = jobs(&t);
        assign_queues(&mut j, &t, &f).expect("assign");
        let got: Vec<(u16, usize)> = j
            .iter()
            .map(|job| (job.tasks[0].queue.0, gm_for(job, Some(&f), 9)))
            .collect();
        assert_eq!(got, vec![(0, 0), (1, 1), (0, 0), (1, 1), (0, 0)]);
        assert_eq!(queue_name(Some(&f), QueueId(1)).as_deref(), Some("b"));
        assert_eq!(queue_name(None, QueueId(0)), None);
        assert_eq!(gm_for(&j[0], None, 7), 7);
    }

    #[test]
    fn a_queue_the_replay_does_not_know_is_an_error() {
        let f = FairnessConfig::parse("a:1:0", SharePolicy::Drf, 1).expect("valid");
        let t = trace(&[Some("zz")]);
        let mut j = jobs(&t);
        let err = assign_queues(&mut j, &t, &f).expect_err("unknown");
        assert!(err.to_string().contains("`zz`"), "{err}");
    }
}
