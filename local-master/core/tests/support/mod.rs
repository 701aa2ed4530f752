//! Fixtures the LM core's integration tests share (`mod support;` in each).
#![allow(dead_code)]

use common::cluster::{LmSpec, NodeSpec};
use common::messages::{LaunchBatch, LaunchOutcome, LaunchRequest, Placement};
use common::protocol::GmToLm;
use common::{ConstraintSet, GmId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use lm_core::{LmConfig, LmInput, LocalMaster};

/// LM 0 with one partition per entry of `partitions` (that many nodes of `cores`
/// cores and 1 GiB each), one GM per partition.
pub fn lm(partitions: &[usize], cores: u64) -> LocalMaster {
    let node = NodeSpec {
        capacity: Resources::cores(cores, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: partitions.iter().map(|n| vec![node; *n]).collect(),
    };
    LocalMaster::new(
        &spec,
        partitions.len() as u16,
        LmConfig::default(),
        Micros(0),
    )
}

/// Launches run `attempt` of a 1-core task (a retry when above 1) on `node`, in
/// `gm`'s partition, as batch `seq`: the outcome.
pub fn launch_run(
    lm: &mut LocalMaster,
    gm: u16,
    seq: u64,
    task: u64,
    node: u32,
    attempt: u32,
) -> LaunchOutcome {
    let mut spec = TaskSpec::short(TaskId::new(task, 0), Resources::cores(1, 10), Micros(5));
    spec.attempt = attempt;
    let batch = GmToLm::Launch(LaunchBatch {
        gm: GmId(gm),
        life: 0,
        lm: LmId(0),
        seq,
        resend: false,
        requests: vec![LaunchRequest {
            task: spec,
            node: NodeId(node),
            placement: Placement::Internal,
        }],
    });
    let out = lm.step(Micros(1), LmInput::Gm(batch)).expect("for this LM");
    out.launch_answer().expect("answered").outcomes[0].1.clone()
}
