//! `GET /v1/nodes`: the GM's view of the data center (eventually consistent: the
//! LMs' last states, minus what this GM sent since). Per LM: whether its state
//! arrived, how old it is, its partitions (one per GM) and their nodes with capacity,
//! free resources and machine constraints. The LMs' own `GET /v1/nodes` is the
//! authoritative equivalent.

use crate::service::actor::GmActor;
use actix::prelude::*;
use common::{LmId, Micros, Resources};
use serde::Serialize;
use service_kit::clock;

#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct NodesView {
    pub gm: u16,
    pub lms: Vec<LmNodes>,
}

#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct LmNodes {
    pub lm: u16,
    /// False until this GM received the LM's state.
    pub known: bool,
    /// Age of the last state received (LM clock), in milliseconds.
    pub state_age_ms: Option<u64>,
    pub version: Option<u64>,
    pub nodes: usize,
    pub capacity: Resources,
    pub free: Resources,
    pub partitions: Vec<PartitionNodes>,
}

#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct PartitionNodes {
    /// The GM whose internal partition this is.
    pub gm: u16,
    pub capacity: Resources,
    pub free: Resources,
    /// Per node; left out with `?summary=true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<NodeView>>,
}

#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct NodeView {
    pub node: u32,
    pub capacity: Resources,
    pub free: Resources,
    pub used: Resources,
    pub constraints: Vec<usize>,
}

/// The view; `summary` leaves out the per-node lists.
#[derive(Message, Debug)]
#[rtype(result = "NodesView")]
pub struct GetNodes {
    pub summary: bool,
}

impl Handler<GetNodes> for GmActor {
    type Result = MessageResult<GetNodes>;

    fn handle(&mut self, msg: GetNodes, _: &mut Context<Self>) -> Self::Result {
        let now = clock::now();
        let lms = (0..self.lm_count())
            .map(|l| lm_nodes(self, now, LmId(l as u16), msg.summary))
            .collect();
        MessageResult(NodesView {
            gm: self.core().id().0,
            lms,
        })
    }
}

fn lm_nodes(gm: &GmActor, now: Micros, lm: LmId, summary: bool) -> LmNodes {
    let taken_at = gm
        .shell_metrics()
        .last_snapshot
        .get(lm.index())
        .copied()
        .flatten();
    let Some(view) = gm.core().view(lm) else {
        return LmNodes {
            lm: lm.0,
            known: false,
            state_age_ms: None,
            version: None,
            nodes: 0,
            capacity: Resources::ZERO,
            free: Resources::ZERO,
            partitions: Vec::new(),
        };
    };
    let partitions: Vec<PartitionNodes> = view
        .partitions
        .iter()
        .enumerate()
        .map(|(g, p)| PartitionNodes {
            gm: g as u16,
            capacity: p.capacity.iter().sum(),
            free: p.free.iter().sum(),
            nodes: (!summary).then(|| {
                (0..p.len())
                    .map(|slot| {
                        let node = p.nodes[slot];
                        NodeView {
                            node: node.0,
                            capacity: p.capacity[slot],
                            free: p.free[slot],
                            used: p.capacity[slot].saturating_sub(&p.free[slot]),
                            constraints: view.topology.constraints[node.index()].iter().collect(),
                        }
                    })
                    .collect()
            }),
        })
        .collect();
    LmNodes {
        lm: lm.0,
        known: true,
        state_age_ms: taken_at.map(|t| now.since(t).0 / 1000),
        version: Some(view.version),
        nodes: view.topology.node_count(),
        capacity: view.total_capacity,
        free: partitions.iter().map(|p| p.free).sum(),
        partitions,
    }
}
