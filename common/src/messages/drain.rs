//! A node's drain state after an operator drained or undrained it: the LM's answer
//! to `POST`/`DELETE /v1/nodes/{node}/drain`, relayed by the GM as its own answer
//! (JSON both ways).

use serde::{Deserialize, Serialize};

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDrain {
    pub lm: u16,
    pub node: u32,
    pub drained: bool,
    /// False when the node already was so (a repeat changes nothing).
    pub changed: bool,
    /// Tasks still running there (they run to their end).
    pub running_tasks: usize,
    /// Kept in the LM's data dir (a restarted LM keeps it); false without one.
    pub durable: bool,
}
