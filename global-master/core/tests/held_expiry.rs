//! The safe expiry of a held preemption request whose final answer does not come
//! (the LM died, is cut off, or the answer was lost): after the hold plus
//! `HELD_ANSWER_MARGIN` the GM asks the LM whether it still holds the request or
//! launched the task, again every `HELD_ASK_PERIOD` while it gets no answer, and
//! never queues the task again blind meanwhile. Launched: the task runs. Not
//! held: the LM voided the request, the task goes back to its queue, and a late
//! copy of the request is refused. Still held: the GM keeps waiting. Only a new
//! life of the LM voids its held requests at once; a final answer of the old
//! life that comes after that is late: a launch takes the task out of the queues.

use common::cluster::{LmSpec, NodeSpec};
use common::fairness::{FairnessConfig, SharePolicy};
use common::messages::{
    HeldPreemptState, PreemptOutcome, PreemptRefusal, PreemptRequest, PreemptResponse,
    ReconcileRequest, ReconcileResponse,
};
use common::preemption::PreemptionRules;
use common::protocol::{ClientToGm, GmToLm, LmToGm};
use common::{ConstraintSet, GmId, LmId, Micros, NodeId, QueueId, Resources, TaskId, TaskSpec};
use gm_core::fairness::{HELD_ANSWER_MARGIN, HELD_ASK_PERIOD};
use gm_core::{GlobalMaster, GmConfig, GmInput, GmOutput, Undelivered};
use lm_core::{LmConfig, LmInput, LmOutput, LocalMaster};
use std::sync::Arc;

const HOLD: Micros = Micros(60_000_000);

/// `hog` (50 %, GM 0) and `fair` (50 %, GM 1) under the default rules with a
/// 60-second hold.
fn shares() -> Arc<FairnessConfig> {
    shares_holding(HOLD)
}

/// [`shares`] with another hold.
fn shares_holding(hold: Micros) -> Arc<FairnessConfig> {
    let rules = PreemptionRules {
        hold,
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

/// One LM of two one-core nodes, both in GM 0's partition.
fn spec() -> LmSpec {
    let node = NodeSpec {
        capacity: Resources::cores(1, 1),
        constraints: ConstraintSet::EMPTY,
    };
    LmSpec {
        id: LmId(0),
        partitions: vec![vec![node, node], Vec::new()],
    }
}

/// One LM of two one-core nodes, both in GM 0's partition and both running
/// hog's tasks (100 % > 50 %); GM 1 knows its state.
fn full_lm(fairness: &Arc<FairnessConfig>) -> (LocalMaster, GlobalMaster) {
    full_lm_holding(fairness, fairness)
}

/// [`full_lm`], the LM under `lm_rules`' hold and the GMs under `fairness`'.
fn full_lm_holding(
    fairness: &Arc<FairnessConfig>,
    lm_rules: &Arc<FairnessConfig>,
) -> (LocalMaster, GlobalMaster) {
    let mut lm = LocalMaster::new(&spec(), 2, LmConfig::default(), Micros(0))
        .with_fairness(lm_rules.clone());
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
/// (for `hold`) and GM 1 takes the `held` answer at `at`: GM 1's output and
/// its request.
fn held_for(
    lm: &mut LocalMaster,
    gm1: &mut GlobalMaster,
    at: Micros,
    hold: Micros,
) -> (GmOutput, PreemptRequest) {
    gm1.step(at, GmInput::Client(ClientToGm::Submit(vec![task(1, 1)])));
    let out = gm1.step(at, GmInput::Schedule);
    let request = preempt_of(&out).expect("a preemption request");
    let answer = lm
        .step(at, LmInput::Gm(GmToLm::Preempt(request.clone())))
        .expect("our LM")
        .preempt_answer()
        .expect("an answer")
        .clone();
    assert_eq!(answer.outcome, PreemptOutcome::Held { until: at + hold });
    let out = gm1.step(at, GmInput::Lm(LmToGm::PreemptAnswer(Box::new(answer))));
    (out, request)
}

fn held_request(lm: &mut LocalMaster, gm1: &mut GlobalMaster, at: Micros) -> GmOutput {
    held_for(lm, gm1, at, HOLD).0
}

/// The asks about held requests among a GM's requests.
fn asks_of(out: &GmOutput) -> Vec<ReconcileRequest> {
    (out.to_lms.iter())
        .filter_map(|m| match m {
            GmToLm::Reconcile(r) if !r.preempts.is_empty() => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// The LM's answer to `ask`.
fn answer_of(lm: &mut LocalMaster, at: Micros, ask: ReconcileRequest) -> ReconcileResponse {
    let out = lm
        .step(at, LmInput::Gm(GmToLm::Reconcile(ask)))
        .expect("our LM");
    (out.to_gms.into_iter())
        .find_map(|(_, m)| match m {
            LmToGm::ReconcileAnswer(a) => Some(a),
            _ => None,
        })
        .expect("an answer")
}

/// GM 1's tick at `expires`: its one ask, and the LM's answer to it, which
/// says `state` of the held task.
fn ask_at(
    gm1: &mut GlobalMaster,
    lm: &mut LocalMaster,
    expires: Micros,
    state: HeldPreemptState,
) -> ReconcileResponse {
    let out = gm1.step(expires, GmInput::Tick);
    let [ask] = &asks_of(&out)[..] else {
        panic!("one ask: {:?}", out.to_lms);
    };
    let answer = answer_of(lm, expires, ask.clone());
    assert_eq!(answer.preempts, vec![(held_task(), state)]);
    answer
}

/// The final answers to held requests among an LM's messages (lost, in these
/// tests, unless delivered by hand).
fn final_answers(out: &LmOutput) -> Vec<PreemptResponse> {
    (out.to_gms.iter())
        .filter_map(|(_, m)| match m {
            LmToGm::PreemptAnswer(r) if r.held => Some((**r).clone()),
            _ => None,
        })
        .collect()
}

fn preempt_of(out: &GmOutput) -> Option<common::messages::PreemptRequest> {
    out.to_lms.iter().find_map(|m| match m {
        GmToLm::Preempt(p) => Some(p.clone()),
        _ => None,
    })
}

/// Fair's task, the one held.
fn held_task() -> TaskId {
    TaskId::new(1, 0)
}

#[test]
fn a_gm_never_requeues_while_the_lm_is_silent() {
    let f = shares();
    let (mut lm, mut gm1) = full_lm(&f);
    let at = Micros::from_secs(10);
    let (out, request) = held_for(&mut lm, &mut gm1, at, HOLD);
    let expires = at + HOLD + HELD_ANSWER_MARGIN;
    assert_eq!(
        out.next_wakeup,
        Some(expires),
        "a tick when the answer is overdue"
    );
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0));
    // Until then, the GM waits.
    let out = gm1.step(expires - Micros(1), GmInput::Tick);
    assert!(asks_of(&out).is_empty());
    // Then it asks the LM (silent: the ask is lost) and waits on.
    let out = gm1.step(expires, GmInput::Tick);
    let asks = asks_of(&out);
    let [ask] = &asks[..] else {
        panic!("one ask: {:?}", out.to_lms);
    };
    assert_eq!((ask.gm, ask.lm, ask.forget), (GmId(1), LmId(0), false));
    assert!(ask.tasks.is_empty(), "only about held requests");
    assert_eq!(ask.preempts, vec![(held_task(), request.task.attempt)]);
    assert_eq!(ask.preempt_seq, request.seq);
    assert!(!out.wants_pass);
    assert_eq!(out.next_wakeup, Some(expires + HELD_ASK_PERIOD));
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0));
    // The transport giving up on the ask changes nothing.
    let lost = Undelivered::of(&GmToLm::Reconcile(ask.clone()));
    let out = gm1.step(expires + Micros(1), GmInput::Undelivered(lost));
    assert!(asks_of(&out).is_empty());
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0));
    // No answer within a period: asked again, counted unanswered, never queued again.
    let mut now = expires;
    for _ in 0..20 {
        now += HELD_ASK_PERIOD;
        let out = gm1.step(now, GmInput::Tick);
        assert_eq!(asks_of(&out).len(), 1, "asked again");
        let out = gm1.step(now, GmInput::Schedule);
        assert!(preempt_of(&out).is_none() && asks_of(&out).is_empty());
        assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0));
    }
    assert_eq!(gm1.stats().held_asks_sent, 21);
    assert_eq!(gm1.stats().held_asks_unanswered, 20);
}

#[test]
fn a_lost_final_answer_of_a_launch_is_booked_from_the_lms_answer() {
    let f = shares();
    let (mut lm, mut gm1) = full_lm(&f);
    let at = Micros::from_secs(10);
    held_request(&mut lm, &mut gm1, at);
    // The hold ends: the LM kills a hog task and launches fair's; the final
    // answer is lost.
    let out = lm.step(at + HOLD, LmInput::Tick).expect("our LM");
    let finals = final_answers(&out);
    assert!(matches!(
        finals[..],
        [PreemptResponse {
            outcome: PreemptOutcome::Launched { .. },
            ..
        }]
    ));
    let expires = at + HOLD + HELD_ANSWER_MARGIN;
    let answer = ask_at(&mut gm1, &mut lm, expires, HeldPreemptState::Launched);
    let reply = GmInput::Lm(LmToGm::ReconcileAnswer(answer.clone()));
    let out = gm1.step(expires + Micros(2), reply);
    assert_eq!(out.answered.launched, vec![held_task()]);
    assert_eq!(
        (gm1.outstanding(), gm1.ready_len()),
        (0, 0),
        "it runs: not queued"
    );
    assert_eq!(gm1.stats().held_asks_launched, 1);
    assert_eq!(out.next_wakeup, None, "nothing left to ask");
    // The answer repeated: late, nothing booked twice.
    let launched = gm1.stats().launched;
    let reply = GmInput::Lm(LmToGm::ReconcileAnswer(answer));
    let out = gm1.step(expires + Micros(3), reply);
    assert!(out.answered.launched.is_empty());
    assert_eq!(gm1.stats().launched, launched);
    assert_eq!(gm1.stats().held_asks_late, 1);
    let out = gm1.step(expires + Micros(4), GmInput::Schedule);
    assert!(preempt_of(&out).is_none());
}

#[test]
fn not_held_queues_the_task_again_and_a_late_copy_of_its_request_is_void() {
    let f = shares();
    let (mut lm, mut gm1) = full_lm(&f);
    let at = Micros::from_secs(10);
    let (_, request) = held_for(&mut lm, &mut gm1, at, HOLD);
    let request_seq = request.seq;
    // Both nodes drained meanwhile: the hold ends refused; the final answer is lost.
    for node in 0..2 {
        let drain = LmInput::Drain {
            node: NodeId(node),
            drained: true,
        };
        lm.step(at + Micros(1), drain).expect("our LM");
    }
    let out = lm.step(at + HOLD, LmInput::Tick).expect("our LM");
    let finals = final_answers(&out);
    assert!(matches!(
        finals[..],
        [PreemptResponse {
            outcome: PreemptOutcome::Refused(_),
            ..
        }]
    ));
    let expires = at + HOLD + HELD_ANSWER_MARGIN;
    let answer = ask_at(&mut gm1, &mut lm, expires, HeldPreemptState::NotHeld);
    let reply = GmInput::Lm(LmToGm::ReconcileAnswer(answer.clone()));
    let out = gm1.step(expires + Micros(1), reply);
    assert!(out.wants_pass);
    assert_eq!(
        out.requeued.len(),
        1,
        "the tracker hears why it waits again"
    );
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (0, 1), "queued again");
    assert_eq!(gm1.stats().held_asks_not_held, 1);
    // A late copy of the request reaches the LM: refused, and nothing awaits it.
    let late = lm
        .step(expires + Micros(2), LmInput::Gm(GmToLm::Preempt(request)))
        .expect("our LM")
        .preempt_answer()
        .expect("answered")
        .clone();
    assert_eq!(late.outcome, PreemptOutcome::Refused(PreemptRefusal::Void));
    assert!(!lm.running().contains_key(&held_task()));
    // Meanwhile the task asked anew (a newer request): the late copy's refusal
    // does not pass for its answer.
    let out = gm1.step(expires + Micros(3), GmInput::Schedule);
    let anew = preempt_of(&out).expect("asked anew");
    assert!(anew.seq > request_seq);
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0));
    gm1.step(
        expires + Micros(3),
        GmInput::Lm(LmToGm::PreemptAnswer(Box::new(late))),
    );
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0), "still awaits");
    // The ask's answer repeated: late, the task is not queued twice.
    let reply = GmInput::Lm(LmToGm::ReconcileAnswer(answer));
    gm1.step(expires + Micros(4), reply);
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0));
    assert_eq!(gm1.stats().held_asks_late, 1);
}

#[test]
fn a_request_still_held_keeps_the_gm_waiting_for_its_final_answer() {
    let f = shares();
    // The LM holds longer than the GM reckons (its clock behind, or another
    // setting): it still holds the request when the GM asks.
    let long = HOLD + HELD_ANSWER_MARGIN + HELD_ASK_PERIOD + HELD_ASK_PERIOD;
    let (mut lm, mut gm1) = full_lm_holding(&f, &shares_holding(long));
    let at = Micros::from_secs(10);
    held_for(&mut lm, &mut gm1, at, long);
    let expires = at + HOLD + HELD_ANSWER_MARGIN;
    let answer = ask_at(&mut gm1, &mut lm, expires, HeldPreemptState::StillHeld);
    gm1.step(expires, GmInput::Lm(LmToGm::ReconcileAnswer(answer)));
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (1, 0), "waits on");
    assert_eq!(gm1.stats().held_asks_still_held, 1);
    // Asked again a period later: the first ask was answered.
    let out = gm1.step(expires + HELD_ASK_PERIOD, GmInput::Tick);
    let [again] = &asks_of(&out)[..] else {
        panic!("asked again");
    };
    assert_eq!(gm1.stats().held_asks_unanswered, 0);
    // The LM's hold ends: it launches, and its final answer comes.
    let out = lm.step(at + long, LmInput::Tick).expect("our LM");
    let [done] = &final_answers(&out)[..] else {
        panic!("the final answer");
    };
    let out = gm1.step(
        at + long,
        GmInput::Lm(LmToGm::PreemptAnswer(Box::new(done.clone()))),
    );
    assert_eq!(out.preempt_launched, Some(true));
    assert_eq!((gm1.outstanding(), gm1.ready_len()), (0, 0));
    // The second ask's answer comes after: late, nothing booked twice.
    let launched = gm1.stats().launched;
    let answer = answer_of(&mut lm, at + long + Micros(1), again.clone());
    assert_eq!(
        answer.preempts,
        vec![(held_task(), HeldPreemptState::Launched)]
    );
    let out = gm1.step(
        at + long + Micros(2),
        GmInput::Lm(LmToGm::ReconcileAnswer(answer)),
    );
    assert!(out.answered.launched.is_empty());
    assert_eq!(gm1.stats().launched, launched);
    assert_eq!(gm1.stats().held_asks_late, 1);
}

#[test]
fn a_new_life_of_the_lm_voids_its_held_requests_at_once_and_a_late_launch_is_withdrawn() {
    let f = shares();
    let (mut lm, mut gm1) = full_lm(&f);
    let at = Micros::from_secs(10);
    held_request(&mut lm, &mut gm1, at);
    // GM 1 hears a new life of the LM: the old one's held requests are void.
    let mut new_life =
        LocalMaster::new(&spec(), 2, LmConfig::default(), at + Micros(1)).with_fairness(f.clone());
    state(&mut gm1, &mut new_life, at + Micros(2));
    assert_eq!(
        (gm1.outstanding(), gm1.ready_len()),
        (0, 1),
        "queued again at once"
    );
    // A final answer of the old life still on its way says the task launched:
    // late; the task leaves the queue (it runs), nothing runs twice.
    let out = lm.step(at + HOLD, LmInput::Tick).expect("old life");
    let [answer] = &final_answers(&out)[..] else {
        panic!("the final answer");
    };
    assert!(matches!(answer.outcome, PreemptOutcome::Launched { .. }));
    let late = GmInput::Lm(LmToGm::PreemptAnswer(Box::new(answer.clone())));
    gm1.step(at + HOLD + Micros(1), late);
    assert_eq!(gm1.stats().held_answers_late, 1);
    assert_eq!(
        (gm1.outstanding(), gm1.ready_len()),
        (0, 0),
        "it runs: not queued, not asked for again"
    );
    let out = gm1.step(at + HOLD + Micros(2), GmInput::Schedule);
    assert!(preempt_of(&out).is_none() && asks_of(&out).is_empty());
    assert_eq!(gm1.stats().held_asks_sent, 0);
}
