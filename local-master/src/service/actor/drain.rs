//! Draining and undraining a node (`POST`/`DELETE /v1/nodes/{node}/drain`, from a
//! GM on an admin's behalf): a step of the core ([`LmInput::Drain`]: no new work
//! lands on a drained node, running work finishes, the GMs hear the new state at
//! once), then, with a data dir, the drained nodes written there before the answer
//! (see [`crate::service::drained`]), so a restarted LM keeps them.

use super::LmActor;
use actix::prelude::*;
use common::messages::NodeDrain;
use common::NodeId;
use lm_core::{LmError, LmInput};
use service_kit::clock;

/// Drain `node` (`drained`), or undrain it.
#[derive(Message, Debug)]
#[rtype(result = "Result<NodeDrain, DrainRefused>")]
pub struct Drain {
    pub node: NodeId,
    pub drained: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DrainRefused {
    #[error("node {0} is not a node of this LM")]
    UnknownNode(u32),
    #[error("the drain was applied but not written to the data dir: {0}")]
    NotWritten(String),
    #[error("the LM refused the drain: {0}")]
    Refused(String),
}

impl LmActor {
    /// Starts with the nodes drained in `dir` drained (see
    /// [`crate::service::drained`]); drains are written there from now on. A node
    /// the file names that this LM does not have is an error naming it.
    pub fn with_drained_in(mut self, dir: &std::path::Path) -> anyhow::Result<Self> {
        for node in crate::service::drained::read(dir)? {
            self.core
                .set_drained(node, true)
                .map_err(|e| anyhow::anyhow!("{}: {e}", dir.join("drained").display()))?;
            tracing::info!(lm = %self.core.id(), %node, "node drained (kept from the previous life)");
        }
        self.drain_dir = Some(dir.to_owned());
        Ok(self)
    }
}

impl Handler<Drain> for LmActor {
    type Result = Result<NodeDrain, DrainRefused>;

    fn handle(&mut self, msg: Drain, ctx: &mut Context<Self>) -> Self::Result {
        let input = LmInput::Drain {
            node: msg.node,
            drained: msg.drained,
        };
        let changed = self.core.is_drained(msg.node) != msg.drained;
        match self.core.step(clock::now(), input) {
            Ok(out) => {
                self.apply(out, ctx);
            }
            Err(LmError::UnknownNode { node }) => return Err(DrainRefused::UnknownNode(node.0)),
            Err(e) => return Err(DrainRefused::Refused(e.to_string())),
        }
        let running_tasks = self
            .core
            .running()
            .values()
            .filter(|a| a.node == msg.node)
            .count();
        tracing::info!(lm = %self.core.id(), node = %msg.node, drained = msg.drained, changed, running_tasks, "node drain state set by an operator");
        if changed {
            self.counters.drain_changes += 1;
        }
        let durable = self.drain_dir.is_some();
        if let (true, Some(dir)) = (changed, &self.drain_dir) {
            if let Err(e) = crate::service::drained::write(dir, &self.core.drained_nodes()) {
                tracing::error!(node = %msg.node, error = %e, "drain state not written to the data dir: a restart would forget it");
                return Err(DrainRefused::NotWritten(format!("{e:#}")));
            }
        }
        Ok(NodeDrain {
            lm: self.core.id().0,
            node: msg.node.0,
            drained: msg.drained,
            changed,
            running_tasks,
            durable,
        })
    }
}
