//! Priority classes (issue 37 item 2) in the cores: within a queue a higher class
//! goes first (aging lets a lower one through in the end), and a preempting class
//! takes the room of lower classes of its own queue only, so queues' shares hold.

use common::fairness::{FairnessConfig, SharePolicy};
use common::messages::{
    LaunchBatch, LaunchRequest, Placement, PreemptOutcome, PreemptRefusal, PreemptRequest,
    WorkerReport,
};
use common::priority::PriorityClasses;
use common::{GmId, LmId, Micros, NodeId, QueueId, Resources, TaskId, TaskSpec};
use global_master::core::{DecisionOutcome, GlobalMaster, GmConfig};
use local_master::{LmConfig, LocalMaster};
use std::sync::Arc;
use tests::ClusterBuilder;

fn classes(aging: u64) -> Arc<PriorityClasses> {
    let specs = ["low:0".to_owned(), "high:10:preempting".to_owned()];
    Arc::new(PriorityClasses::parse(&specs, None, aging).expect("valid classes"))
}

fn task(job: u64, queue: u16, priority: u16) -> TaskSpec {
    TaskSpec {
        priority,
        ..TaskSpec::short(
            TaskId::new(job, 0),
            Resources::cores(1, 1),
            Micros::from_secs(1000),
        )
        .with_queue(QueueId(queue))
    }
}

/// One LM with `nodes` one-core nodes, all in GM 0's partition (1 GM).
fn lm(nodes: usize, fairness: Option<Arc<FairnessConfig>>) -> LocalMaster {
    let cluster = ClusterBuilder::new(1, 1, nodes).build();
    let lm = LocalMaster::new(&cluster.lms[0], 1, LmConfig::default(), Micros(0));
    match fairness {
        Some(f) => lm.with_fairness(f),
        None => lm,
    }
}

fn gm(priorities: Arc<PriorityClasses>, fairness: Option<Arc<FairnessConfig>>) -> GlobalMaster {
    GlobalMaster::new(GmConfig {
        priorities,
        fairness,
        ..GmConfig::new(GmId(0), 1, 1)
    })
}

/// Starts `task` on node `node`.
fn start(lm: &mut LocalMaster, seq: u64, node: u32, task: TaskSpec) {
    let id = task.id;
    let batch = LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        seq,
        resend: false,
        requests: vec![LaunchRequest {
            task,
            node: NodeId(node),
            placement: Placement::Internal,
        }],
    };
    lm.handle_launch_batch(Micros(1), batch).expect("our LM");
    lm.handle_worker_report(
        Micros(1),
        WorkerReport::Started {
            attempt: 1,
            node: NodeId(node),
            task: id,
            at: Micros(1),
        },
    )
    .expect("launched");
}

fn dispatched(out: &global_master::core::PassOutput) -> Vec<TaskId> {
    out.decisions
        .iter()
        .filter(|d| matches!(d.outcome, DecisionOutcome::Dispatched { .. }))
        .map(|d| d.task)
        .collect()
}

#[test]
fn a_higher_class_overtakes_a_queued_lower_class() {
    // One free core; two low tasks queued before a high one.
    let mut lm = lm(1, None);
    let mut gm = gm(classes(1000), None);
    gm.apply_snapshot(Micros(0), &lm.snapshot(Micros(0)));
    gm.submit(Micros(0), task(1, 0, 0));
    gm.submit(Micros(0), task(2, 0, 0));
    gm.submit(Micros(1), task(3, 0, 10));
    let out = gm.schedule(Micros(2));
    assert_eq!(dispatched(&out), vec![TaskId::new(3, 0)]);
}

#[test]
fn aging_lets_a_lower_class_through_after_enough_higher_submissions() {
    // Aging 1: a high task (10 points) goes before low tasks queued fewer than
    // 10 submissions before it; the low task queued first is older than that.
    let mut lm = lm(1, None);
    let mut gm = gm(classes(1), None);
    gm.apply_snapshot(Micros(0), &lm.snapshot(Micros(0)));
    gm.submit(Micros(0), task(1, 0, 0));
    for job in 2..13 {
        gm.submit(Micros(0), task(job, 0, 0));
    }
    gm.submit(Micros(1), task(99, 0, 10));
    let out = gm.schedule(Micros(2));
    assert_eq!(
        dispatched(&out),
        vec![TaskId::new(1, 0)],
        "the oldest low task"
    );
    // With strict priority (aging 0) the high task goes first.
    let mut gm = self::gm(classes(0), None);
    gm.apply_snapshot(Micros(0), &lm.snapshot(Micros(0)));
    for job in 1..13 {
        gm.submit(Micros(0), task(job, 0, 0));
    }
    gm.submit(Micros(1), task(99, 0, 10));
    assert_eq!(
        dispatched(&gm.schedule(Micros(2))),
        vec![TaskId::new(99, 0)]
    );
}

#[test]
fn priority_preemption_takes_lower_classes_of_its_own_queue_only() {
    // Queues a (0) and b (1), half each; a is at its share with one low task, b
    // runs one low task. A high (preempting) task of a takes a's low task's room,
    // never b's: shares do not move.
    let f =
        Arc::new(FairnessConfig::parse("a:0.5:0,b:0.5:0", SharePolicy::Drf, 1).expect("queues"));
    let mut lm = lm(2, Some(f.clone()));
    start(&mut lm, 1, 0, task(10, 0, 0));
    start(&mut lm, 2, 1, task(20, 1, 0));
    let mut gm = gm(classes(1000), Some(f.clone()));
    gm.apply_snapshot(Micros(2), &lm.snapshot(Micros(2)));
    gm.submit(Micros(2), task(1, 0, 10));
    let out = gm.schedule(Micros(3));
    assert_eq!(
        out.decisions[0].outcome,
        DecisionOutcome::Preempting {
            lm: LmId(0),
            victim: QueueId(0)
        }
    );
    let request = out.preempts.into_iter().next().expect("a preemption");
    let fx = lm.handle_preempt(Micros(4), request).expect("our LM");
    let outcome = fx.preempt_response.expect("an answer").outcome;
    let PreemptOutcome::Launched { preempted, .. } = outcome else {
        panic!("refused: {outcome:?}");
    };
    assert_eq!(preempted, vec![TaskId::new(10, 0)], "a's own low task");
    assert_eq!(lm.usage(QueueId(0)), Resources::cores(1, 1));
    assert_eq!(lm.usage(QueueId(1)), Resources::cores(1, 1), "b untouched");

    // Another high task of a: a runs no lower class now; the LM, asked anyway,
    // refuses and leaves b's task alone. The GM does not ask.
    let request = PreemptRequest {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        task: task(2, 0, 10),
        victim: QueueId(0),
        seq: 1,
    };
    let fx = lm.handle_preempt(Micros(5), request).expect("our LM");
    assert_eq!(
        fx.preempt_response.expect("an answer").outcome,
        PreemptOutcome::Refused(PreemptRefusal::NothingToFree)
    );
    assert!(fx.kills.is_empty());
    assert_eq!(lm.usage(QueueId(1)), Resources::cores(1, 1), "b untouched");
    // A non-preempting class never preempts for priority.
    let mut gm = gm_with_low_only(&mut lm);
    gm.submit(Micros(6), task(3, 0, 5));
    let out = gm.schedule(Micros(7));
    assert!(out.preempts.is_empty());
}

/// A GM whose classes do not preempt (mid: 5), with `lm`'s state.
fn gm_with_low_only(lm: &mut LocalMaster) -> GlobalMaster {
    let specs = ["low:0".to_owned(), "mid:5".to_owned()];
    let classes = Arc::new(PriorityClasses::parse(&specs, None, 1000).expect("classes"));
    let mut gm = gm(classes, None);
    gm.apply_snapshot(Micros(6), &lm.snapshot(Micros(6)));
    gm
}
