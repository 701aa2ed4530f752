//! Validation of one launch request against the LM's authoritative state. Pure and
//! table-tested: this is the line between a GM's possibly stale belief and the truth.

use common::messages::{LaunchRequest, LmTopology, Placement};
use common::reasons::RejectReason;
use common::{GmId, Resources};

/// Checks, in order: the GM and node exist, the task asks for something in every
/// dimension, the placement matches the node's partition, the node has the task's
/// constraints, and the node has the requested resources free now.
pub fn validate(
    topology: &LmTopology,
    free: &[Resources],
    gm: GmId,
    request: &LaunchRequest,
) -> Result<(), RejectReason> {
    validate_placement(topology, gm, request)?;
    let node = request.node.index();
    let available = free.get(node).copied().unwrap_or(Resources::ZERO);
    if !available.fits(&request.task.resources) {
        return Err(RejectReason::InsufficientResources { free: available });
    }
    Ok(())
}

/// Every check of [`validate`] but the free resources: the GM and node exist, the task
/// asks for something in every dimension, the placement matches the node's partition
/// and the node has the task's constraints.
pub fn validate_placement(
    topology: &LmTopology,
    gm: GmId,
    request: &LaunchRequest,
) -> Result<(), RejectReason> {
    if gm.0 >= topology.gms {
        return Err(RejectReason::Invalid {
            detail: format!("{gm} is not one of the {} global masters", topology.gms),
        });
    }
    let node = request.node.index();
    let Some(&home) = topology.home.get(node) else {
        return Err(RejectReason::UnknownNode);
    };
    let task = &request.task;
    if task.resources.any_zero() {
        return Err(RejectReason::Invalid {
            detail: format!(
                "task {} asks for {}; every dimension must be positive",
                task.id, task.resources
            ),
        });
    }
    match request.placement {
        Placement::Internal if home != gm => return Err(RejectReason::NotInPartition { home }),
        Placement::Repartition if home == gm => return Err(RejectReason::NotExternal),
        _ => {}
    }
    match topology.constraints.get(node) {
        Some(c) if task.constraints.satisfied_by(*c) => Ok(()),
        _ => Err(RejectReason::ConstraintsNotMet),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{ConstraintSet, LmId, Micros, NodeId, TaskId, TaskSpec};

    /// Two GMs; node 0 in partition 0 with constraint {1}, node 1 in partition 1.
    fn topology() -> LmTopology {
        LmTopology {
            lm: LmId(0),
            gms: 2,
            home: vec![GmId(0), GmId(1)],
            constraints: vec![ConstraintSet::from_ids([1]).unwrap(), ConstraintSet::EMPTY],
            capacity: vec![Resources::cores(4, 4096); 2],
        }
    }

    fn request(node: u32, placement: Placement, cpu: u64, constraints: &[u64]) -> LaunchRequest {
        LaunchRequest {
            task: TaskSpec::short(TaskId::new(1, 0), Resources::new(cpu, 100), Micros(1))
                .with_constraints(ConstraintSet::from_ids(constraints.iter().copied()).unwrap()),
            node: NodeId(node),
            placement,
        }
    }

    #[test]
    fn table() {
        let topo = topology();
        let free = [Resources::cores(2, 4096), Resources::cores(4, 4096)];
        let cases: Vec<(&str, GmId, LaunchRequest, Result<(), RejectReason>)> = vec![
            (
                "internal fits",
                GmId(0),
                request(0, Placement::Internal, 2000, &[1]),
                Ok(()),
            ),
            (
                "internal but over free",
                GmId(0),
                request(0, Placement::Internal, 2001, &[]),
                Err(RejectReason::InsufficientResources { free: free[0] }),
            ),
            (
                "internal on another GM's node",
                GmId(0),
                request(1, Placement::Internal, 1000, &[]),
                Err(RejectReason::NotInPartition { home: GmId(1) }),
            ),
            (
                "repartition of external node",
                GmId(0),
                request(1, Placement::Repartition, 4000, &[]),
                Ok(()),
            ),
            (
                "repartition of own node",
                GmId(0),
                request(0, Placement::Repartition, 1000, &[]),
                Err(RejectReason::NotExternal),
            ),
            (
                "missing constraint",
                GmId(1),
                request(1, Placement::Internal, 1000, &[1]),
                Err(RejectReason::ConstraintsNotMet),
            ),
            (
                "unknown node",
                GmId(0),
                request(9, Placement::Internal, 1000, &[]),
                Err(RejectReason::UnknownNode),
            ),
        ];
        for (name, gm, req, want) in cases {
            assert_eq!(validate(&topo, &free, gm, &req), want, "{name}");
        }
    }

    #[test]
    fn zero_resources_and_unknown_gm_are_invalid() {
        let topo = topology();
        let free = [Resources::cores(2, 4096), Resources::cores(4, 4096)];
        let zero = request(0, Placement::Internal, 0, &[]);
        assert!(matches!(
            validate(&topo, &free, GmId(0), &zero),
            Err(RejectReason::Invalid { .. })
        ));
        let ok = request(0, Placement::Internal, 1, &[]);
        assert!(matches!(
            validate(&topo, &free, GmId(7), &ok),
            Err(RejectReason::Invalid { .. })
        ));
    }
}
