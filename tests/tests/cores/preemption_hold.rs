//! The preemption hold (issue 37): an LM that would kill for a fairness preemption
//! holds the request first; room that frees by itself goes to the held task, with
//! no kill and ahead of any GM's launch; only a hold that ends unserved kills; a
//! cancelled task's hold kills nothing; priority preemptions are not held.

use common::fairness::{FairnessConfig, SharePolicy};
use common::messages::{
    CancelRequest, LaunchBatch, LaunchOutcome, LaunchRequest, Placement, PreemptOutcome,
    PreemptRefusal, PreemptRequest, PreemptResponse, WorkerReport,
};
use common::preemption::PreemptionRules;
use common::protocol::{GmToLm, LmRoute, LmToGm, LmToWorker, WorkerToLm};
use common::{GmId, JobId, LmId, Micros, NodeId, QueueId, Resources, TaskId, TaskSpec};
use local_master::core::step::{LmInput, LmOutput};
use local_master::{LmConfig, LocalMaster};
use std::sync::Arc;
use tests::ClusterBuilder;

const HOLD: Micros = Micros(60_000_000);

fn rules() -> PreemptionRules {
    PreemptionRules {
        hold: HOLD,
        ..PreemptionRules::UNBOUNDED
    }
}

/// `hog` (30 %) served by GM 0, `fair` (70 %) by GM 1; two one-core nodes in GM
/// 0's partition, both running hog's tasks (jobs 100 and 101).
fn busy_lm(rules: PreemptionRules) -> LocalMaster {
    let fairness = Arc::new(
        FairnessConfig::parse("hog:0.3:0,fair:0.7:1", SharePolicy::Drf, 2)
            .expect("valid queue spec")
            .with_rules(rules),
    );
    let cluster = ClusterBuilder::new(1, 1, 2).build();
    let mut spec = cluster.lms[0].clone();
    let all: Vec<_> = spec.partitions.iter().flatten().copied().collect();
    spec.partitions = vec![all, Vec::new()];
    let mut lm = LocalMaster::new(&spec, 2, LmConfig::default(), Micros(0)).with_fairness(fairness);
    for n in 0..2u32 {
        let t = task(100 + u64::from(n), 0);
        launch(&mut lm, u64::from(n) + 1, n, t.clone(), Micros(1));
        worker(&mut lm, started(n, t.id, Micros(1)));
    }
    lm
}

fn task(job: u64, queue: u16) -> TaskSpec {
    TaskSpec::short(
        TaskId::new(job, 0),
        Resources::cores(1, 1),
        Micros::from_secs(1000),
    )
    .with_queue(QueueId(queue))
}

fn launch(lm: &mut LocalMaster, seq: u64, node: u32, task: TaskSpec, at: Micros) -> LmOutput {
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
    lm.step(at, LmInput::Gm(GmToLm::Launch(batch)))
        .expect("our LM")
}

fn started(node: u32, task: TaskId, at: Micros) -> WorkerReport {
    WorkerReport::Started {
        node: NodeId(node),
        task,
        attempt: 1,
        at,
    }
}

fn worker(lm: &mut LocalMaster, report: WorkerReport) -> LmOutput {
    let at = report.at();
    lm.step(at, LmInput::Worker(WorkerToLm::Report(report)))
        .expect("a task of ours")
}

/// GM 1 asks to preempt queue `victim` for `task`.
fn ask(lm: &mut LocalMaster, task: TaskSpec, victim: u16, at: Micros) -> PreemptResponse {
    let request = PreemptRequest {
        gm: GmId(1),
        life: 0,
        lm: LmId(0),
        task,
        victim: QueueId(victim),
        seq: 1,
    };
    let out = lm
        .step(at, LmInput::Gm(GmToLm::Preempt(request)))
        .expect("our LM");
    let answer = out.preempt_answer().expect("an answer").clone();
    assert!(!answer.held, "the reply to the request itself");
    answer
}

/// The final answers to held requests among a step's messages.
fn held_answers(out: &LmOutput) -> Vec<&PreemptResponse> {
    out.to_gms
        .iter()
        .filter_map(|(_, m)| match m {
            LmToGm::PreemptAnswer(r) if r.held => {
                assert_eq!(m.route(), LmRoute::Stream, "after the reply: on the stream");
                Some(&**r)
            }
            _ => None,
        })
        .collect()
}

fn kills(out: &LmOutput) -> usize {
    (out.to_workers.iter())
        .filter(|o| matches!(o, LmToWorker::Kill(_)))
        .count()
}

#[test]
fn room_that_frees_goes_to_the_held_task_with_no_kill_and_before_any_launch() {
    let mut lm = busy_lm(rules());
    let at = Micros::from_secs(10);
    let answer = ask(&mut lm, task(1, 1), 0, at);
    assert_eq!(answer.outcome, PreemptOutcome::Held { until: at + HOLD });
    assert_eq!(lm.held_preempts(), 1);
    assert_eq!(lm.next_wakeup().min(at + HOLD), lm.next_wakeup());
    // Sent again while held: the same answer, still one hold.
    let again = ask(&mut lm, task(1, 1), 0, at + Micros(5));
    assert_eq!(again.outcome, answer.outcome);
    assert_eq!(lm.held_preempts(), 1);
    // Hog's task on node 1 ends by itself: its room goes to the held task.
    let ended = Micros::from_secs(20);
    let out = worker(
        &mut lm,
        WorkerReport::Finished {
            node: NodeId(1),
            task: TaskId::new(101, 0),
            attempt: 1,
            at: ended,
            used: None,
        },
    );
    let held = held_answers(&out);
    assert_eq!(held.len(), 1, "{:?}", out.to_gms);
    assert_eq!(held[0].gm, GmId(1));
    assert_eq!(
        held[0].outcome,
        PreemptOutcome::Launched {
            node: NodeId(1),
            preempted: Vec::new()
        }
    );
    assert_eq!(kills(&out), 0, "nothing killed");
    assert!(lm.running().contains_key(&TaskId::new(1, 0)));
    assert_eq!(lm.held_preempts(), 0);
    // GM 0, seeing node 1 free in an older view, finds it taken.
    let out = launch(&mut lm, 3, 1, task(102, 0), ended + Micros(1));
    let outcome = &out.launch_answer().expect("an answer").outcomes[0].1;
    assert!(matches!(outcome, LaunchOutcome::Rejected(_)), "{outcome:?}");
    // Nothing is left to do at the hold's end.
    let out = lm.step(at + HOLD, LmInput::Tick).expect("tick");
    assert!(held_answers(&out).is_empty());
    assert_eq!(kills(&out), 0);
}

#[test]
fn a_hold_that_ends_unserved_preempts_as_a_request_not_held() {
    let mut lm = busy_lm(rules());
    let at = Micros::from_secs(10);
    ask(&mut lm, task(1, 1), 0, at);
    let out = lm.step(at + HOLD - Micros(1), LmInput::Tick).expect("tick");
    assert!(held_answers(&out).is_empty(), "still held");
    let out = lm.step(at + HOLD, LmInput::Tick).expect("tick");
    let held = held_answers(&out);
    assert_eq!(held.len(), 1);
    let PreemptOutcome::Launched { preempted, .. } = &held[0].outcome else {
        panic!("preempted at the hold's end: {:?}", held[0].outcome);
    };
    assert_eq!(preempted.len(), 1);
    assert_eq!(kills(&out), 1);
}

#[test]
fn a_cancelled_task_s_hold_is_refused_and_kills_nothing() {
    let mut lm = busy_lm(rules());
    let at = Micros::from_secs(10);
    ask(&mut lm, task(1, 1), 0, at);
    let cancel = CancelRequest {
        gm: GmId(1),
        lm: LmId(0),
        job: JobId(1),
    };
    let out = lm
        .step(at + Micros(1), LmInput::Gm(GmToLm::Cancel(cancel)))
        .expect("our LM");
    let held = held_answers(&out);
    assert_eq!(held.len(), 1);
    assert_eq!(
        held[0].outcome,
        PreemptOutcome::Refused(PreemptRefusal::Cancelled)
    );
    let out = lm.step(at + HOLD, LmInput::Tick).expect("tick");
    assert_eq!(kills(&out), 0);
    assert_eq!(lm.running().len(), 2);
}

#[test]
fn without_a_hold_or_for_a_priority_class_the_lm_preempts_at_once() {
    // No hold: Algorithm 2's immediate kill.
    let mut lm = busy_lm(PreemptionRules::UNBOUNDED);
    let answer = ask(&mut lm, task(1, 1), 0, Micros::from_secs(10));
    assert!(matches!(answer.outcome, PreemptOutcome::Launched { .. }));
    // A priority preemption within hog's own queue is not held either.
    let mut lm = busy_lm(rules());
    let mut high = task(1, 0);
    high.priority = 10;
    let answer = ask(&mut lm, high, 0, Micros::from_secs(10));
    assert!(
        matches!(answer.outcome, PreemptOutcome::Launched { ref preempted, .. } if preempted.len() == 1),
        "{:?}",
        answer.outcome
    );
}

#[test]
fn a_victim_not_over_its_share_is_refused_not_held() {
    // GM 0 asks to preempt fair, which runs nothing here: refused at once, and
    // nothing is held or killed.
    let mut lm = busy_lm(rules());
    let request = PreemptRequest {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        task: task(1, 0),
        victim: QueueId(1),
        seq: 1,
    };
    let out = lm
        .step(Micros(10), LmInput::Gm(GmToLm::Preempt(request)))
        .expect("our LM");
    let answer = out.preempt_answer().expect("an answer");
    assert!(matches!(
        answer.outcome,
        PreemptOutcome::Refused(PreemptRefusal::VictimNotOverShare { .. })
    ));
    assert_eq!(lm.held_preempts(), 0);
}

#[test]
fn a_task_no_node_could_host_is_refused_at_once_and_kills_nothing() {
    let mut lm = busy_lm(rules());
    let mut big = task(1, 1);
    big.resources = Resources::cores(2, 1);
    let answer = ask(&mut lm, big, 0, Micros::from_secs(10));
    assert_eq!(
        answer.outcome,
        PreemptOutcome::Refused(PreemptRefusal::NothingToFree)
    );
    assert_eq!(lm.held_preempts(), 0);
    let out = lm
        .step(Micros::from_secs(10) + HOLD, LmInput::Tick)
        .expect("tick");
    assert_eq!(kills(&out), 0);
}

#[test]
fn the_gm_counts_a_held_task_as_its_queue_s_usage_until_the_final_answer() {
    use global_master::core::{DecisionOutcome, GlobalMaster, GmConfig};
    // fair may run one of the two nodes (70 %), not two.
    let rules = PreemptionRules {
        within_share_after: true,
        ..rules()
    };
    let mut lm = busy_lm(rules);
    let fairness = Arc::new(
        FairnessConfig::parse("hog:0.3:0,fair:0.7:1", SharePolicy::Drf, 2)
            .expect("valid queue spec")
            .with_rules(rules),
    );
    let mut gm1 = GlobalMaster::new(GmConfig {
        fairness: Some(fairness),
        ..GmConfig::new(GmId(1), 2, 1)
    });
    let at = Micros::from_secs(10);
    gm1.apply_snapshot(at, &lm.snapshot(at));
    gm1.submit(at, task(1, 1));
    gm1.submit(at, task(2, 1));
    let out = gm1.schedule(at);
    assert!(matches!(
        out.decisions[0].outcome,
        DecisionOutcome::Preempting { .. }
    ));
    let request = out.preempts.into_iter().next().expect("one preemption");
    let out = lm
        .step(at, LmInput::Gm(GmToLm::Preempt(request)))
        .expect("our LM");
    let held = out.preempt_answer().expect("an answer");
    assert!(!gm1.handle_preempt_response(at, held), "held: not launched");
    assert_eq!(
        gm1.outstanding(),
        1,
        "the held task still awaits its answer"
    );
    // The LM may take another request, but the claim counts as fair's usage: a
    // second task would take fair over its share, so it does not ask.
    let pass = gm1.schedule(at + Micros(1));
    assert!(pass.preempts.is_empty(), "{:?}", pass.decisions);
    // Room frees; the final answer launches the held task.
    let out = worker(
        &mut lm,
        WorkerReport::Finished {
            node: NodeId(0),
            task: TaskId::new(100, 0),
            attempt: 1,
            at: at + Micros(2),
            used: None,
        },
    );
    let last = held_answers(&out)[0].clone();
    assert!(gm1.handle_preempt_response(at + Micros(3), &last));
    assert_eq!(gm1.outstanding(), 0);
}
