//! `GET /v1/nodes` on an LM: its authoritative state per node (home partition,
//! worker slot and whether that worker is registered, capacity, free and used
//! resources, machine constraints, the tasks running there, whether it is down and
//! whether an operator drained it, what it lends to other partitions as logical nodes), and which worker runs a node
//! (for task logs, proxied to it).

use super::LmActor;
use actix::prelude::*;
use common::messages::Placement;
use common::{NodeId, Resources, TaskId};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
pub struct LmNodesView {
    pub lm: u16,
    pub incarnation: u64,
    pub ready: bool,
    pub capacity: Resources,
    pub free: Resources,
    pub running_tasks: usize,
    pub nodes: Vec<LmNode>,
}

#[derive(Debug, Serialize)]
pub struct LmNode {
    pub node: u32,
    /// The GM whose internal partition holds the node.
    pub partition: u16,
    pub worker_slot: usize,
    /// False while that worker has not registered with this life of the LM.
    pub worker_registered: bool,
    pub capacity: Resources,
    pub free: Resources,
    pub used: Resources,
    pub constraints: Vec<usize>,
    /// Tasks holding resources on the node (`job.index`).
    pub tasks: Vec<String>,
    /// True once its worker was declared lost (no free resources are offered).
    pub down: bool,
    /// True while an operator has it drained (no free resources are offered, no new
    /// work lands there; what runs there runs on).
    pub drained: bool,
    /// Resources lent to other GMs' partitions (the paper's logical nodes): one entry
    /// per repartitioned task running here.
    pub lent: Vec<Lent>,
}

/// A repartitioned task's resources, lent to GM `gm`'s partition until it ends.
#[derive(Debug, Serialize)]
pub struct Lent {
    pub gm: u16,
    pub task: String,
    pub resources: Resources,
}

#[derive(Message, Debug)]
#[rtype(result = "LmNodesView")]
pub struct GetNodes;

impl Handler<GetNodes> for LmActor {
    type Result = MessageResult<GetNodes>;

    fn handle(&mut self, _: GetNodes, _: &mut Context<Self>) -> Self::Result {
        let topology = self.core.topology().clone();
        let free = self.core.free();
        let mut tasks: BTreeMap<NodeId, Vec<TaskId>> = BTreeMap::new();
        let mut lent: BTreeMap<NodeId, Vec<Lent>> = BTreeMap::new();
        for (task, alloc) in self.core.running() {
            tasks.entry(alloc.node).or_default().push(*task);
            if alloc.placement == Placement::Repartition {
                lent.entry(alloc.node).or_default().push(Lent {
                    gm: alloc.gm.0,
                    task: task.to_string(),
                    resources: alloc.resources,
                });
            }
        }
        let nodes = (0..topology.node_count())
            .map(|n| {
                let node = NodeId(n as u32);
                let slot = self.slot_of(node);
                let mut on_node = tasks.remove(&node).unwrap_or_default();
                on_node.sort_unstable();
                LmNode {
                    node: node.0,
                    partition: topology.home[n].0,
                    worker_slot: slot,
                    worker_registered: self.worker_sender(slot).is_some(),
                    capacity: topology.capacity[n],
                    free: free[n],
                    used: topology.capacity[n].saturating_sub(&free[n]),
                    constraints: topology.constraints[n].iter().collect(),
                    tasks: on_node.iter().map(ToString::to_string).collect(),
                    down: self.core.is_down(node),
                    drained: self.core.is_drained(node),
                    lent: lent.remove(&node).unwrap_or_default(),
                }
            })
            .collect();
        MessageResult(LmNodesView {
            lm: topology.lm.0,
            incarnation: self.incarnation,
            ready: self.ready(),
            capacity: self.core.total_capacity(),
            free: free.iter().sum(),
            running_tasks: self.core.running().len(),
            nodes,
        })
    }
}

/// The URL of the worker that runs `node` (or, without a node, the node where
/// `task` runs now), if it registered.
#[derive(Message, Debug)]
#[rtype(result = "Result<String, String>")]
pub struct WorkerUrl {
    pub node: Option<NodeId>,
    pub task: TaskId,
}

impl Handler<WorkerUrl> for LmActor {
    type Result = Result<String, String>;

    fn handle(&mut self, msg: WorkerUrl, _: &mut Context<Self>) -> Self::Result {
        let node = match msg.node {
            Some(node) => node,
            None => self
                .core
                .running()
                .get(&msg.task)
                .map(|a| a.node)
                .ok_or_else(|| {
                    format!(
                        "task {} does not run on this LM now; name its node (?node=N)",
                        msg.task
                    )
                })?,
        };
        if node.index() >= self.core.topology().node_count() {
            return Err(format!("{node} is not a node of this LM"));
        }
        let slot = self.slot_of(node);
        self.worker_urls
            .get(slot)
            .cloned()
            .flatten()
            .ok_or_else(|| format!("the worker of {node} (slot {slot}) has not registered"))
    }
}
