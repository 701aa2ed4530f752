//! What the LM sends out besides answers: orders to workers (start, kill, promote, on
//! one ordered stream per worker, so a kill reaches the worker before the start that
//! reuses its room, and a promotion after the start it concerns) and preempted or
//! reclaimed tasks back to their GMs.

use common::protocol::LmToGm;
use service_kit::links::Link;

/// To one worker: `POST /v1/messages`, the LM's orders in the order it decided them.
pub type WorkerLink = Link<Vec<WorkerOrder>, ()>;
/// To one GM: `POST /v1/internal/messages`, the LM's own messages to it (preempted
/// tasks, task ends: any [`LmToGm`] that is not an answer), in order.
pub type GmLink = Link<Vec<LmToGm>, ()>;

/// One order to a worker, in the order the LM decided them: the protocol's
/// LM -> worker message.
pub type WorkerOrder = common::protocol::LmToWorker;

/// The first start order of a new registration of a worker: the lowest of the start
/// orders held for its slot, else `next` (the LM's next dispatch number). Whatever an
/// earlier registration's stream still carries is numbered below, and the worker
/// refuses it ([`common::messages::WorkerAssignment::orders_from`]).
pub fn first_of_registration(held: &[WorkerOrder], next: u64) -> u64 {
    (held.iter())
        .filter_map(|o| match o {
            WorkerOrder::Start(s) => Some(s.dispatch.seq),
            _ => None,
        })
        .min()
        .unwrap_or(next)
}
