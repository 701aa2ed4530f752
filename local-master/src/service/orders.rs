//! What the LM sends out besides answers: start, kill and promote orders to workers
//! (one ordered stream per worker, so a kill reaches the worker before the start that
//! reuses its room, and a promotion after the start it concerns) and preempted or
//! reclaimed tasks back to their GMs.

use common::messages::{KillTask, PreemptedTasks, PromoteTask, StartTask};
use common::protocol::LmToGm;
use service_kit::links::{fn_link, Link, LinkError};

/// Worker `POST /v1/start`.
pub type StartLink = Link<Vec<StartTask>, ()>;
/// Worker `POST /v1/kill`.
pub type KillLink = Link<Vec<KillTask>, ()>;
/// Worker `POST /v1/promote`.
pub type PromoteLink = Link<Vec<PromoteTask>, ()>;
/// To one GM: `POST /v1/internal/messages` (any [`LmToGm`] message the LM sends on
/// its own, today preempted tasks).
pub type RequeueLink = Link<LmToGm, ()>;

/// One order to a worker, in the order the LM decided them: the protocol's
/// LM -> worker message.
pub type WorkerOrder = common::protocol::LmToWorker;

/// The three endpoints of one worker.
#[derive(Clone)]
pub struct WorkerLinks {
    pub start: StartLink,
    pub kill: KillLink,
    pub promote: PromoteLink,
}

impl std::fmt::Debug for WorkerLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerLinks")
    }
}

/// Delivers a run of orders over the worker's endpoints, keeping their order: each
/// maximal run of orders of one kind is one call, made after the previous one
/// answered. A failed call fails the whole batch, which the ordered sender retries:
/// a kill or promotion of a task no longer there is skipped by the worker, and a
/// start of a task it already runs is refused as a duplicate.
pub fn worker_link(links: WorkerLinks) -> Link<Vec<WorkerOrder>, ()> {
    fn_link(move |orders: Vec<WorkerOrder>| {
        let links = links.clone();
        async move {
            for run in runs(orders) {
                match run {
                    Run::Starts(batch) => links.start.call(batch).await?,
                    Run::Kills(batch) => links.kill.call(batch).await?,
                    Run::Promotes(batch) => links.promote.call(batch).await?,
                }
            }
            Ok::<(), LinkError>(())
        }
    })
}

#[derive(Debug, PartialEq)]
enum Run {
    Starts(Vec<StartTask>),
    Kills(Vec<KillTask>),
    Promotes(Vec<PromoteTask>),
}

/// Splits orders into maximal runs of one kind, in order.
fn runs(orders: Vec<WorkerOrder>) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for order in orders {
        match (order, out.last_mut()) {
            (WorkerOrder::Start(s), Some(Run::Starts(v))) => v.push(s),
            (WorkerOrder::Kill(k), Some(Run::Kills(v))) => v.push(k),
            (WorkerOrder::Promote(p), Some(Run::Promotes(v))) => v.push(p),
            (WorkerOrder::Start(s), _) => out.push(Run::Starts(vec![s])),
            (WorkerOrder::Kill(k), _) => out.push(Run::Kills(vec![k])),
            (WorkerOrder::Promote(p), _) => out.push(Run::Promotes(vec![p])),
        }
    }
    out
}

/// Sends what queued up for one GM as a single `PreemptedTasks`.
pub fn requeue_batches(link: RequeueLink) -> Link<Vec<PreemptedTasks>, ()> {
    fn_link(move |batch: Vec<PreemptedTasks>| {
        let link = link.clone();
        async move {
            let mut it = batch.into_iter();
            let Some(mut merged) = it.next() else {
                return Ok(());
            };
            for more in it {
                merged.tasks.extend(more.tasks);
            }
            link.call(LmToGm::Requeue(merged)).await
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Micros, NodeId, Resources, TaskId, TaskSpec};

    fn start(job: u64) -> WorkerOrder {
        WorkerOrder::Start(StartTask {
            node: NodeId(0),
            task: TaskSpec::short(TaskId::new(job, 0), Resources::cores(1, 1), Micros(1)),
        })
    }

    fn kill(job: u64) -> WorkerOrder {
        WorkerOrder::Kill(KillTask {
            node: NodeId(0),
            task: TaskId::new(job, 0),
        })
    }

    fn promote(job: u64) -> WorkerOrder {
        WorkerOrder::Promote(PromoteTask {
            node: NodeId(0),
            task: TaskId::new(job, 0),
        })
    }

    #[test]
    fn runs_keep_the_order_of_kills_starts_and_promotions() {
        let got = runs(vec![
            start(1),
            kill(2),
            kill(3),
            start(4),
            start(5),
            promote(4),
            promote(5),
            kill(6),
        ]);
        let kinds: Vec<(char, usize)> = got
            .iter()
            .map(|r| match r {
                Run::Starts(v) => ('s', v.len()),
                Run::Kills(v) => ('k', v.len()),
                Run::Promotes(v) => ('p', v.len()),
            })
            .collect();
        assert_eq!(
            kinds,
            vec![('s', 1), ('k', 2), ('s', 2), ('p', 2), ('k', 1)]
        );
        assert!(runs(Vec::new()).is_empty());
    }
}
