//! Gangs are preempted whole or not at all (issue 37 item 3): an LM holds only its
//! part of a gang, so a member a gang commit launched is never a preemption
//! victim; the same task launched on its own is.

use common::messages::{
    GangOp, GangOutcome, GangRequest, LaunchOutcome, LaunchRequest, Placement, PreemptOutcome,
    PreemptRefusal, PreemptRequest,
};
use common::protocol::GmToLm;
use common::{GmId, JobId, LmId, Micros, NodeId, QueueId, Resources, TaskId, TaskSpec};
use lm_core::{LmInput, LocalMaster};

mod support;

/// One node of one core, in GM 0's partition; queues a (GM 0's) and b share it
/// half and half, and every preemption rule is off.
fn lm() -> LocalMaster {
    let fairness = common::fairness::FairnessConfig::parse(
        "a:0.5:0,b:0.5:1",
        common::fairness::SharePolicy::Drf,
        2,
    )
    .expect("queues")
    .with_rules(common::preemption::PreemptionRules::UNBOUNDED);
    support::lm(&[1, 0], 1).with_fairness(std::sync::Arc::new(fairness))
}

fn gang_step(lm: &mut LocalMaster, now: Micros, op: GangOp) -> GangOutcome {
    let request = GmToLm::Gang(GangRequest {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        job: JobId(1),
        generation: 1,
        op,
    });
    let out = lm.step(now, LmInput::Gm(request)).expect("for this LM");
    (out.to_gms.iter())
        .find_map(|(_, m)| match m {
            common::protocol::LmToGm::GangAnswer(a) => Some(a.outcome.clone()),
            _ => None,
        })
        .expect("answered")
}

/// Queue b's task asks to preempt queue a (over its share: it holds the node).
fn preempt(lm: &mut LocalMaster) -> (PreemptOutcome, usize) {
    let request = PreemptRequest {
        gm: GmId(1),
        life: 0,
        lm: LmId(0),
        task: TaskSpec::short(TaskId::new(2, 0), Resources::cores(1, 10), Micros(5))
            .with_queue(QueueId(1)),
        victim: QueueId(0),
        seq: 1,
    };
    let out = lm.handle_preempt(Micros(6), request).expect("for this LM");
    (
        out.preempt_response.expect("answered").outcome,
        out.kills.len(),
    )
}

#[test]
fn a_gang_member_is_never_a_preemption_victim() {
    let mut lm = lm();
    let member = TaskSpec::short(TaskId::new(1, 0), Resources::cores(1, 10), Micros(5));
    let reserve = GangOp::Reserve {
        requests: vec![LaunchRequest {
            task: member,
            node: NodeId(0),
            placement: Placement::Internal,
        }],
        hold_for: Micros(1_000_000),
    };
    assert_eq!(gang_step(&mut lm, Micros(1), reserve), GangOutcome::Held);
    assert_eq!(
        gang_step(&mut lm, Micros(2), GangOp::Commit),
        GangOutcome::Committed
    );
    assert!(lm.running().contains_key(&TaskId::new(1, 0)));
    let (outcome, kills) = preempt(&mut lm);
    assert_eq!(
        outcome,
        PreemptOutcome::Refused(PreemptRefusal::NothingToFree)
    );
    assert_eq!(kills, 0, "the member runs on");
}

/// The control: the same task launched on its own is taken.
#[test]
fn the_same_task_launched_alone_is_a_victim() {
    let mut lm = lm();
    assert!(matches!(
        support::launch_run(&mut lm, 0, 1, 1, 0, 1),
        LaunchOutcome::Launched { .. }
    ));
    let (outcome, kills) = preempt(&mut lm);
    assert!(
        matches!(outcome, PreemptOutcome::Launched { .. }),
        "{outcome:?}"
    );
    assert_eq!(kills, 1);
}
