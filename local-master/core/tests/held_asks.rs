//! A GM whose final answer to a held preemption request is overdue asks the LM
//! about it (`ReconcileRequest::preempts`). The LM answers still held, launched,
//! or not held; "not held" is final: the request is void from then on, so a late
//! copy of it never launches the task the GM queued again (it may run
//! elsewhere), while a newer request for the same task is served as usual.

use common::messages::{
    HeldPreemptState, PreemptOutcome, PreemptRefusal, PreemptRequest, ReconcileRequest,
    ReconcileResponse, WorkerReport,
};
use common::preemption::PreemptionRules;
use common::protocol::{GmToLm, LmToGm, WorkerToLm};
use common::{GmId, LmId, Micros, QueueId, Resources, TaskId, TaskSpec};
use lm_core::{LmInput, LocalMaster};

mod support;

const HOLD: Micros = Micros(60_000_000);

/// Two one-core nodes in GM 0's partition, both running tasks of queue a (jobs 1
/// and 2); a and b (GM 1's) share the LM half and half; requests are held.
fn busy_lm() -> LocalMaster {
    let rules = PreemptionRules {
        hold: HOLD,
        ..PreemptionRules::UNBOUNDED
    };
    let fairness = common::fairness::FairnessConfig::parse(
        "a:0.5:0,b:0.5:1",
        common::fairness::SharePolicy::Drf,
        2,
    )
    .expect("queues")
    .with_rules(rules);
    let mut lm = support::lm(&[2, 0], 1).with_fairness(std::sync::Arc::new(fairness));
    for (seq, node) in [(1, 0), (2, 1)] {
        support::launch_run(&mut lm, 0, seq, seq, node, 1);
    }
    lm
}

/// GM 1's request number `seq` to preempt queue a for job 10's task.
fn request(seq: u64) -> PreemptRequest {
    PreemptRequest {
        gm: GmId(1),
        life: 0,
        lm: LmId(0),
        task: TaskSpec::short(TaskId::new(10, 0), Resources::cores(1, 10), Micros(5))
            .with_queue(QueueId(1)),
        victim: QueueId(0),
        seq,
    }
}

fn preempt(lm: &mut LocalMaster, seq: u64, at: Micros) -> PreemptOutcome {
    let out = lm
        .step(at, LmInput::Gm(GmToLm::Preempt(request(seq))))
        .expect("for this LM");
    out.preempt_answer().expect("answered").outcome.clone()
}

/// GM 1 asks about its held request for job 10's task, having sent requests up
/// to `preempt_seq`.
fn ask(lm: &mut LocalMaster, preempt_seq: u64, at: Micros) -> HeldPreemptState {
    let ask = GmToLm::Reconcile(ReconcileRequest {
        gm: GmId(1),
        lm: LmId(0),
        tasks: Vec::new(),
        forget: false,
        life: 0,
        preempts: vec![(TaskId::new(10, 0), 1)],
        preempt_seq,
    });
    let out = lm.step(at, LmInput::Gm(ask)).expect("for this LM");
    let answers: Vec<&ReconcileResponse> = (out.to_gms.iter())
        .filter_map(|(_, m)| match m {
            LmToGm::ReconcileAnswer(a) => Some(a),
            _ => None,
        })
        .collect();
    let [answer] = answers[..] else {
        panic!("one answer: {:?}", out.to_gms);
    };
    assert!(answer.held.is_empty() && answer.finished.is_empty());
    let [(task, state)] = answer.preempts[..] else {
        panic!("one state: {answer:?}");
    };
    assert_eq!(task, TaskId::new(10, 0));
    state
}

#[test]
fn a_request_still_held_stays_held_and_launches_at_the_end_of_its_hold() {
    let mut lm = busy_lm();
    let at = Micros::from_secs(10);
    assert_eq!(
        preempt(&mut lm, 1, at),
        PreemptOutcome::Held { until: at + HOLD }
    );
    assert_eq!(ask(&mut lm, 1, at + Micros(1)), HeldPreemptState::StillHeld);
    assert_eq!(lm.held_preempts(), 1, "asking does not give up the hold");
    // The hold ends: the LM kills a task of a and launches job 10's.
    let out = lm.step(at + HOLD, LmInput::Tick).expect("tick");
    assert!(out.to_gms.iter().any(|(_, m)| matches!(
        m,
        LmToGm::PreemptAnswer(r) if r.held && matches!(r.outcome, PreemptOutcome::Launched { .. })
    )));
    // Its final answer lost, the GM asks: launched.
    assert_eq!(
        ask(&mut lm, 1, at + HOLD + HOLD),
        HeldPreemptState::Launched
    );
    // Still launched once it ended (the GM books it, its end reaches the GM).
    let node = lm.running().get(&TaskId::new(10, 0)).expect("runs").node;
    let finished = WorkerReport::Finished {
        node,
        task: TaskId::new(10, 0),
        attempt: 1,
        at: at + HOLD + HOLD + HOLD,
        used: None,
    };
    lm.step(
        at + HOLD + HOLD + HOLD,
        LmInput::Worker(WorkerToLm::Report(finished)),
    )
    .expect("ours");
    assert_eq!(
        ask(&mut lm, 1, at + HOLD + HOLD + HOLD + HOLD),
        HeldPreemptState::Launched
    );
}

#[test]
fn not_held_is_final_a_late_copy_is_void_a_newer_request_is_served() {
    let mut lm = busy_lm();
    let at = Micros::from_secs(10);
    // The LM never held job 10's request (its reply was the GM's last news of it,
    // the hold ended refused, or its copy is still on its way).
    assert_eq!(ask(&mut lm, 4, at), HeldPreemptState::NotHeld);
    // A late copy of request 4 (or an earlier one) never launches the task.
    for seq in [4, 3] {
        assert_eq!(
            preempt(&mut lm, seq, at + Micros(1)),
            PreemptOutcome::Refused(PreemptRefusal::Void)
        );
    }
    assert_eq!(lm.held_preempts(), 0);
    assert!(
        !lm.running().contains_key(&TaskId::new(10, 0)),
        "not launched"
    );
    // Asked again: still not held (a repeated ask, or its answer lost).
    assert_eq!(ask(&mut lm, 4, at + Micros(2)), HeldPreemptState::NotHeld);
    // The GM queued the task again and asks anew (request 5): served as usual.
    assert_eq!(
        preempt(&mut lm, 5, at + Micros(3)),
        PreemptOutcome::Held {
            until: at + Micros(3) + HOLD
        }
    );
}

#[test]
fn a_void_request_is_of_one_gm_life() {
    let mut lm = busy_lm();
    let at = Micros::from_secs(10);
    assert_eq!(ask(&mut lm, 4, at), HeldPreemptState::NotHeld);
    // The GM's next life numbers its requests from 1 again: not void.
    let mut next_life = request(1);
    next_life.life = 7;
    let out = lm
        .step(at + Micros(1), LmInput::Gm(GmToLm::Preempt(next_life)))
        .expect("for this LM");
    let outcome = &out.preempt_answer().expect("answered").outcome;
    assert!(
        matches!(outcome, PreemptOutcome::Held { .. }),
        "{outcome:?}"
    );
}
