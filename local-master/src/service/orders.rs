//! What the LM sends out besides answers: orders to workers (start, kill, promote, on
//! one ordered stream per worker, so a kill reaches the worker before the start that
//! reuses its room, and a promotion after the start it concerns) and preempted or
//! reclaimed tasks back to their GMs.

use common::messages::PreemptedTasks;
use common::protocol::LmToGm;
use service_kit::links::{fn_link, Link};

/// To one worker: `POST /v1/messages`, the LM's orders in the order it decided them.
pub type WorkerLink = Link<Vec<WorkerOrder>, ()>;
/// To one GM: `POST /v1/internal/messages` (any [`LmToGm`] message the LM sends on
/// its own, today preempted tasks).
pub type RequeueLink = Link<LmToGm, ()>;

/// One order to a worker, in the order the LM decided them: the protocol's
/// LM -> worker message.
pub type WorkerOrder = common::protocol::LmToWorker;

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
