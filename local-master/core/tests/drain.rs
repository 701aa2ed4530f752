//! A drained node (`LmInput::Drain`): nothing new lands there (its snapshots offer
//! nothing, launches are refused with `NodeDrained`), the task running there runs to
//! its end and returns its resources, and undraining offers the whole node again.

use common::messages::{LaunchOutcome, WorkerReport};
use common::protocol::WorkerToLm;
use common::reasons::RejectReason;
use common::{GmId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use lm_core::{LmError, LmInput, LocalMaster};

mod support;

/// One GM; two nodes of 2 cores each in its partition.
fn lm() -> LocalMaster {
    support::lm(&[2], 2)
}

fn launch(lm: &mut LocalMaster, seq: u64, task: u64, node: u32) -> LaunchOutcome {
    support::launch_run(lm, 0, seq, task, node, 1)
}

fn drain(lm: &mut LocalMaster, node: u32, drained: bool) -> lm_core::LmOutput {
    let input = LmInput::Drain {
        node: NodeId(node),
        drained,
    };
    lm.step(Micros(5), input).expect("a node of this LM")
}

#[test]
fn a_drained_node_takes_nothing_new_and_its_running_task_ends_there() {
    let mut lm = lm();
    assert!(matches!(
        launch(&mut lm, 1, 1, 0),
        LaunchOutcome::Launched { .. }
    ));
    let whole = Resources::cores(2, 1024);

    // Drained: the GMs hear at once that it offers nothing.
    let out = drain(&mut lm, 0, true);
    let heartbeat = out.heartbeat().expect("the new state goes out");
    assert_eq!(heartbeat.free[0], Resources::ZERO);
    assert_eq!(heartbeat.free[1], whole);
    assert!(lm.is_drained(NodeId(0)) && !lm.is_drained(NodeId(1)));
    assert_eq!(lm.drained_nodes(), vec![NodeId(0)]);
    // A GM with an older view is refused, with the reason; node 1 still takes work.
    assert_eq!(
        launch(&mut lm, 2, 2, 0),
        LaunchOutcome::Rejected(RejectReason::NodeDrained)
    );
    assert!(matches!(
        launch(&mut lm, 3, 3, 1),
        LaunchOutcome::Launched { .. }
    ));
    // The task that ran there keeps running, then ends as usual.
    assert!(lm.running().contains_key(&TaskId::new(1, 0)));
    let end = WorkerReport::Finished {
        used: None,
        node: NodeId(0),
        task: TaskId::new(1, 0),
        attempt: 1,
        at: Micros(9),
    };
    lm.step(Micros(10), LmInput::Worker(WorkerToLm::Report(end)))
        .expect("its end is taken");
    assert!(!lm.running().contains_key(&TaskId::new(1, 0)));
    assert_eq!(lm.free()[0], whole, "its resources returned");
    assert_eq!(
        lm.snapshot(Micros(11)).free[0],
        Resources::ZERO,
        "still drained"
    );

    // Draining again changes nothing (no new state to send).
    let again = drain(&mut lm, 0, true);
    assert!(again.heartbeat().is_none());

    // Undrained: offered whole again, and launches land.
    let out = drain(&mut lm, 0, false);
    assert_eq!(out.heartbeat().expect("new state").free[0], whole);
    assert!(matches!(
        launch(&mut lm, 4, 4, 0),
        LaunchOutcome::Launched { .. }
    ));
}

#[test]
fn draining_an_unknown_node_is_an_error_naming_it() {
    let mut lm = lm();
    let err = lm
        .step(
            Micros(5),
            LmInput::Drain {
                node: NodeId(7),
                drained: true,
            },
        )
        .expect_err("no node 7");
    assert_eq!(err, LmError::UnknownNode { node: NodeId(7) });
    assert!(err.to_string().contains("node 7") || err.to_string().contains('7'));
}

#[test]
fn a_preemption_never_makes_room_on_a_drained_node() {
    use common::messages::{PreemptOutcome, PreemptRefusal, PreemptRequest};
    use common::QueueId;
    let fairness = common::fairness::FairnessConfig::parse(
        "a:0.5:0,b:0.5:1",
        common::fairness::SharePolicy::Drf,
        2,
    )
    .expect("queues")
    // One node: taking a's only task takes it below its protected share.
    .with_rules(common::preemption::PreemptionRules::UNBOUNDED);
    let mut lm = support::lm(&[1, 0], 1).with_fairness(std::sync::Arc::new(fairness));
    assert!(matches!(
        launch(&mut lm, 1, 1, 0),
        LaunchOutcome::Launched { .. }
    ));
    drain(&mut lm, 0, true);
    // Queue a holds the whole LM, over its share: b's task may preempt it, but not
    // onto the drained node.
    let request = |task: u64| PreemptRequest {
        gm: GmId(1),
        life: 0,
        lm: LmId(0),
        task: TaskSpec::short(TaskId::new(task, 0), Resources::cores(1, 10), Micros(5))
            .with_queue(QueueId(1)),
        victim: QueueId(0),
        seq: 1,
    };
    let refused = lm
        .handle_preempt(Micros(6), request(2))
        .expect("for this LM");
    let outcome = refused.preempt_response.expect("answered").outcome;
    assert_eq!(
        outcome,
        PreemptOutcome::Refused(PreemptRefusal::NothingToFree)
    );
    assert!(
        refused.kills.is_empty(),
        "nothing killed for a drained node"
    );
    drain(&mut lm, 0, false);
    let launched = lm
        .handle_preempt(Micros(7), request(3))
        .expect("for this LM");
    assert!(matches!(
        launched.preempt_response.expect("answered").outcome,
        PreemptOutcome::Launched { .. }
    ));
}
