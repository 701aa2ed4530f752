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
