//! Draining a node (an operator's `megha node drain`, like Slurm's
//! `scontrol update state=drain` or `nomad node drain`): no new work lands on it,
//! work running there runs to its end.
//!
//! The LM is the authority: a drained node is offered to no GM (its snapshots show it
//! with nothing free, so the GMs' views stop placing there) and every launch onto it
//! is refused with [`RejectReason::NodeDrained`] (a GM whose view is older learns it
//! then). Its own `free` stays true, so the resources of the tasks that end there
//! return as usual and the node is whole again when it is undrained. Draining a
//! drained node (or undraining one that is not) changes nothing.
//!
//! [`RejectReason::NodeDrained`]: common::reasons::RejectReason::NodeDrained

use super::LocalMaster;
use crate::effects::{LmEffects, LmError};
use common::NodeId;

impl LocalMaster {
    /// Drains `node` (`drained`) or undrains it: see the module documentation.
    /// Returns whether anything changed; an unknown node is an error and changes
    /// nothing.
    pub fn set_drained(&mut self, node: NodeId, drained: bool) -> Result<bool, LmError> {
        let n = node.index();
        let Some(current) = self.drained.get_mut(n) else {
            return Err(LmError::UnknownNode { node });
        };
        if *current == drained {
            return Ok(false);
        }
        *current = drained;
        self.touch(n);
        self.version += 1;
        Ok(true)
    }

    /// [`LocalMaster::set_drained`] as a step's effects: the new state goes to the
    /// GMs at once when anything changed.
    pub(super) fn drain_step(
        &mut self,
        now: common::Micros,
        node: NodeId,
        drained: bool,
    ) -> Result<LmEffects, LmError> {
        let mut effects = LmEffects::default();
        if self.set_drained(node, drained)? {
            effects.heartbeat = Some(self.snapshot(now));
        }
        Ok(effects)
    }

    /// True when `node` is drained.
    pub fn is_drained(&self, node: NodeId) -> bool {
        flagged(&self.drained, node)
    }

    /// The drained nodes.
    pub fn drained_nodes(&self) -> Vec<NodeId> {
        nodes_flagged(&self.drained)
    }
}

/// Whether `node`'s flag is set in a per-node vector (an unknown node's is not).
pub(super) fn flagged(flags: &[bool], node: NodeId) -> bool {
    flags.get(node.index()).copied().unwrap_or(false)
}

/// The nodes whose flag is set in a per-node vector.
pub(super) fn nodes_flagged(flags: &[bool]) -> Vec<NodeId> {
    (0..flags.len())
        .filter(|n| flags[*n])
        .map(|n| NodeId(n as u32))
        .collect()
}
