//! A held preemption request whose LM never gives its final answer (the LM died,
//! or restarted unseen) expires at the GM: after the hold plus
//! `HELD_ANSWER_MARGIN` the GM forgets the claim, queues the task again and may
//! ask again. A final answer that comes after that is late: a launch takes the
//! task out of the queues (it runs), nothing runs twice.

use common::cluster::{LmSpec, NodeSpec};
use common::fairness::{FairnessConfig, SharePolicy};
use common::messages::{PreemptOutcome, PreemptResponse};
use common::preemption::PreemptionRules;
use common::protocol::{ClientToGm, GmToLm, LmToGm};
use common::{ConstraintSet, GmId, LmId, Micros, QueueId, Resources, TaskId, TaskSpec};
use gm_core::fairness::HELD_ANSWER_MARGIN;
use gm_core::{GlobalMaster, GmConfig, GmInput, GmOutput};
use lm_core::{LmConfig, LmInput, LocalMaster};
use std::sync::Arc;

const HOLD: Micros = Micros(60_000_000);

/// `hog` (50 %, GM 0) and `fair` (50 %, GM 1) under the default rules with a
/// 60-second hold.
fn shares() -> Arc<FairnessConfig> {
    let rules = PreemptionRules {
        hold: HOLD,
        ..PreemptionRules::default()
    };
    Arc::new(
        FairnessConfig::parse("hog:0.5:0,fair:0.5:1", SharePolicy::Drf, 2)
            .expect("valid queue spec")
            .with_rules(rules),
    )
}

fn task(job: u64, queue: u16) -> TaskSpec {
    TaskSpec::short(
        TaskId::new(job, 0),
        Resources::cores(1, 1),
        Micros::from_secs(1000),
    )
    .with_queue(QueueId(queue))
}

fn gm(id: u16, fairness: &Arc<FairnessConfig>) -> GlobalMaster {
    GlobalMaster::new(GmConfig {
        fairness: Some(fairness.clone()),
        ..GmConfig::new(GmId(id), 2, 1)
    })
}

fn state(gm: &mut GlobalMaster, lm: &mut LocalMaster, at: Micros) {
    gm.step(at, GmInput::Lm(LmToGm::State(lm.snapshot(at))));
}

/// One LM of two one-core nodes, both in GM 0's partition and both running
/// hog's tasks (100 % > 50 %); GM 1 knows its state.
fn full_lm(fairness: &Arc<FairnessConfig>) -> (LocalMaster, GlobalMaster) {
    let node = NodeSpec {
        capacity: Resources::cores(1, 1),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: vec![vec![node, node], Vec::new()],
    };
    let mut lm =
        LocalMaster::new(&spec, 2, LmConfig::default(), Micros(0)).with_fairness(fairness.clone());
    let mut gm0 = gm(0, fairness);
    state(&mut gm0, &mut lm, Micros(0));
    let hog = vec![task(100, 0), task(101, 0)];
    gm0.step(Micros(0), GmInput::Client(ClientToGm::Submit(hog)));
    let out = gm0.step(Micros(1), GmInput::Schedule);
    assert_eq!(out.to_lms.len(), 1, "one launch batch");
    for message in out.to_lms {
        lm.step(Micros(2), LmInput::Gm(message)).expect("our LM");
    }
    let mut gm1 = gm(1, fairness);
    state(&mut gm1, &mut lm, Micros(3));
    (lm, gm1)
}

/// GM 1 submits fair's task and asks the LM to preempt; the LM holds the request
/// and GM 1 takes the `held` answer at `at`.
fn held_request(lm: &mut LocalMaster, gm1: &mut GlobalMaster, at: Micros) -> GmOutput {
    gm1.step(at, GmInput::Client(ClientToGm::Submit(vec![task(1, 1)])));
    let out = gm1.step(at, GmInput::Schedule);
    let request = preempt_of(&out).expect("a preemption request");
    let answer = lm
        .step(at, LmInput::Gm(GmToLm::Preempt(request)))
        .expect("our LM")
        .preempt_answer()
        .expect("an answer")
        .clone();
    assert_eq!(answer.outcome, PreemptOutcome::Held { until: at + HOLD });
    gm1.step(at, GmInput::Lm(LmToGm::PreemptAnswer(Box::new(answer))))
}

fn preempt_of(out: &GmOutput) -> Option<common::messages::PreemptRequest> {
    out.to_lms.iter().find_map(|m| match m {
        GmToLm::Preempt(p) => Some(p.clone()),
        _ => None,
    })
}

#[test]
fn a_held_request_never_answered_expires_and_the_task_asks_again() {
    let f = shares();
    let (mut lm, mut gm1) = full_lm(&f);
    let at = Micros::from_secs(10);
    let out = held_request(&mut lm, &mut gm1, at);
    let expires = at + HOLD + HELD_ANSWER_MARGIN;
    assert_eq!(
        out.next_wakeup,
        Some(expires),
        "a tick when the claim expires"
    );
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0));
    // The LM dies: no final answer. Until the expiry, the GM keeps waiting.
    let out = gm1.step(expires - Micros(1), GmInput::Tick);
    assert!(!out.wants_pass);
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0));
    // Then it forgets the claim: the task is back in its queue and asks again.
    let out = gm1.step(expires, GmInput::Tick);
    assert!(out.wants_pass);
    assert_eq!(out.next_wakeup, None, "no claim left");
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (0, 1));
    assert_eq!(gm1.stats().held_preempts_expired, 1);
    let out = gm1.step(expires, GmInput::Schedule);
    let again = preempt_of(&out).expect("asked again");
    assert_eq!((again.task.id, again.lm), (TaskId::new(1, 0), LmId(0)));
}

#[test]
fn a_final_answer_after_the_expiry_takes_a_launched_task_out_of_the_queue() {
    let f = shares();
    let (mut lm, mut gm1) = full_lm(&f);
    let at = Micros::from_secs(10);
    held_request(&mut lm, &mut gm1, at);
    // The LM's hold ends unserved: it kills a hog task and launches fair's.
    let out = lm.step(at + HOLD, LmInput::Tick).expect("our LM");
    let answer: PreemptResponse = out
        .to_gms
        .iter()
        .find_map(|(_, m)| match m {
            LmToGm::PreemptAnswer(r) if r.held => Some(PreemptResponse::clone(r)),
            _ => None,
        })
        .expect("the final answer");
    assert!(matches!(answer.outcome, PreemptOutcome::Launched { .. }));
    // The answer is delayed past the expiry: the GM had queued the task again.
    let expires = at + HOLD + HELD_ANSWER_MARGIN;
    gm1.step(expires, GmInput::Tick);
    assert_eq!(gm1.ready_len(), 1);
    gm1.step(
        expires + Micros(1),
        GmInput::Lm(LmToGm::PreemptAnswer(Box::new(answer))),
    );
    assert_eq!(gm1.stats().held_answers_late, 1);
    assert_eq!(
        (gm1.outstanding(), gm1.ready_len()),
        (0, 0),
        "it runs: not queued, not asked for again"
    );
    let out = gm1.step(expires + Micros(2), GmInput::Schedule);
    assert!(preempt_of(&out).is_none());
}
