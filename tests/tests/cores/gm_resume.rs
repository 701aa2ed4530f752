//! A GM restarted from its journal resumes tasks no LM holds (`GmInput::Resume`):
//! each as a new run number, with its failures so far, so that a late report of the
//! previous life's run is told apart and the job's retry budget goes on.

use super::gm_lifecycle::{launches, policy, task, Harness};
use common::messages::{TaskEnd, TaskFailure, TasksEnded};
use common::protocol::LmToGm;
use common::{GmId, LmId, Micros, NodeId, TaskId};
use global_master::core::{GmInput, Resumed};

/// The LM's report that run 1 of `task` (the previous life's) ended at `at`.
fn run_1_ended(task: TaskId, node: NodeId, at: u64, failure: Option<TaskFailure>) -> LmToGm {
    LmToGm::Ended(TasksEnded {
        lm: LmId(0),
        publish: common::messages::EndsPublished::ByLm,
        gm: GmId(0),
        ends: vec![TaskEnd {
            used: None,
            task,
            attempt: 1,
            node,
            at: Micros(at),
            failure,
        }],
    })
}

fn lost() -> TaskFailure {
    TaskFailure::Lost {
        reason: "worker silent".into(),
    }
}

/// A GM restarted from its journal resumes a task whose run 1 went out (its LM
/// holds nothing of it) as run 2: a late end of run 1 (lost with its worker, still
/// on its way) ends nothing but counts against the job's retry budget, once, as
/// it would have had the GM heard it (run 2 is its retry).
#[test]
fn a_resumed_task_goes_out_as_a_new_run_and_keeps_its_retry_budget() {
    let mut h = Harness::new(1, 1);
    let a = TaskId::new(1, 0);
    let mut spec = task(1, 0);
    spec.attempt = 2;
    let resume = Resumed {
        tasks: vec![(spec, 0)],
        held: Vec::new(),
        retry: policy(3),
        dags: Vec::new(),
        gangs: Vec::new(),
    };
    h.gm_step(0, 1, GmInput::Resume(resume));
    assert_eq!(launches(&h.pass(0, 2)), vec![a]);
    let (node, run) = h.start_of(a);
    assert_eq!(run, 2, "the start order names run 2");

    // The end of the previous life's run 1 arrives late: it ends nothing.
    let outs = h.gm_step(0, 3, GmInput::Lm(run_1_ended(a, node, 3, Some(lost()))));
    assert!(outs[0].ended.is_empty() && outs[0].retries.is_empty());
    assert_eq!(outs[0].stale, vec![(a, 1)]);

    // Run 2 fails: the second failure (of 3 attempts), so one retry (run 3).
    let outs = h.fail(10_000_000, a, TaskFailure::Exit { code: 3 });
    let retry = outs
        .iter()
        .flat_map(|o| o.retries.clone())
        .next()
        .expect("a retry");
    assert_eq!((retry.attempt, retry.failed), (3, 2));
    h.heartbeat(retry.at.0 + 1);
    h.gm_step(0, retry.at.0, GmInput::Tick);
    assert_eq!(launches(&h.pass(0, retry.at.0 + 1)), vec![a]);
    assert_eq!(h.start_of(a).1, 3);
    let outs = h.fail(retry.at.0 + 1_000_000, a, TaskFailure::Exit { code: 3 });
    assert!(
        outs.iter().all(|o| o.retries.is_empty()),
        "3 attempts spent: {outs:?}"
    );
    assert_eq!(outs[0].ended.len(), 1);
    assert_eq!(h.gms[0].lifecycle().tracked(), 0);
}

/// Resumes task 1.0 as run 2 on a GM of one LM, under `retry`.
fn resumed_as_run_2(h: &mut Harness, retry: common::retry::RetryPolicy) -> TaskId {
    let mut spec = task(1, 0);
    spec.attempt = 2;
    h.gm_step(
        0,
        1,
        GmInput::Resume(Resumed {
            tasks: vec![(spec, 0)],
            held: Vec::new(),
            retry,
            dags: Vec::new(),
            gangs: Vec::new(),
        }),
    );
    TaskId::new(1, 0)
}

/// With the default policy (no retry), the failure of the previous life's run,
/// heard while the resumed run still waits, is the task's one failure: the
/// resumed run leaves the queue unlaunched and the task ends failed.
#[test]
fn a_resumed_run_without_retries_is_withdrawn_when_the_earlier_run_failed() {
    let mut h = Harness::new(1, 1);
    let retry = h.gms[0].lifecycle().default_policy();
    let a = resumed_as_run_2(&mut h, retry);
    let outs = h.gm_step(
        0,
        2,
        GmInput::Lm(run_1_ended(a, NodeId(0), 2, Some(lost()))),
    );
    assert_eq!(outs[0].ended.len(), 1, "{:?}", outs[0].ended);
    assert!(outs[0].ended[0].failure.is_some());
    assert!(
        launches(&h.pass(0, 3)).is_empty(),
        "the resumed run was withdrawn"
    );
    assert_eq!(h.gms[0].lifecycle().tracked(), 0);
    assert_eq!(h.gms[0].stats().resumed_runs_withdrawn, 1);
}

/// ... but once the resumed run went out, it is the one that ends the task: the
/// earlier failure is stale, and the resumed run's finish ends it.
#[test]
fn a_resumed_run_that_went_out_ends_the_task_whatever_the_earlier_run_did() {
    let mut h = Harness::new(1, 1);
    let retry = h.gms[0].lifecycle().default_policy();
    let a = resumed_as_run_2(&mut h, retry);
    assert_eq!(launches(&h.pass(0, 2)), vec![a]);
    assert_eq!(h.start_of(a).1, 2);
    let outs = h.gm_step(
        0,
        3,
        GmInput::Lm(run_1_ended(a, NodeId(0), 3, Some(lost()))),
    );
    assert!(outs[0].ended.is_empty(), "{:?}", outs[0].ended);
    assert_eq!(outs[0].stale, vec![(a, 1)]);
    let (node, _) = h.start_of(a);
    let mut end = run_1_ended(a, node, 4, None);
    if let LmToGm::Ended(e) = &mut end {
        e.ends[0].attempt = 2;
    }
    let outs = h.gm_step(0, 4, GmInput::Lm(end));
    assert_eq!(outs[0].ended.len(), 1, "{outs:?}");
    assert_eq!(h.gms[0].lifecycle().tracked(), 0);
}

/// The previous life's run finished while the resumed run waits: the work is
/// done, the resumed run leaves the queue unlaunched.
#[test]
fn a_resumed_run_is_withdrawn_when_the_earlier_run_finished() {
    let mut h = Harness::new(1, 1);
    let a = resumed_as_run_2(&mut h, policy(3));
    let outs = h.gm_step(0, 2, GmInput::Lm(run_1_ended(a, NodeId(0), 2, None)));
    assert_eq!(outs[0].ended.len(), 1, "{outs:?}");
    assert!(outs[0].ended[0].failure.is_none());
    assert!(
        launches(&h.pass(0, 3)).is_empty(),
        "the resumed run was withdrawn"
    );
    assert_eq!(h.gms[0].lifecycle().tracked(), 0);
}

/// With retries left, the earlier run's failure counts against the budget once
/// (a repeat of it is stale) and the resumed run goes out as its retry.
#[test]
fn an_earlier_failure_counts_once_and_the_resumed_run_is_its_retry() {
    let mut h = Harness::new(1, 1);
    let a = resumed_as_run_2(&mut h, policy(2));
    for now in [2, 3] {
        let outs = h.gm_step(
            0,
            now,
            GmInput::Lm(run_1_ended(a, NodeId(0), 2, Some(lost()))),
        );
        assert!(
            outs[0].ended.is_empty() && outs[0].retries.is_empty(),
            "{outs:?}"
        );
    }
    assert_eq!(launches(&h.pass(0, 4)), vec![a]);
    // Run 2 fails: 2 failures of 2 attempts, no retry.
    let outs = h.fail(5_000_000, a, TaskFailure::Exit { code: 1 });
    assert!(outs.iter().all(|o| o.retries.is_empty()), "{outs:?}");
    assert_eq!(outs[0].ended.len(), 1);
}

/// The core names an LM whose new life its view takes up (`lm_new_lives`), once,
/// so that the driver asks it about the tasks it ran; not the first life it
/// hears of, nor an older life's late snapshot.
#[test]
fn the_gm_names_an_lm_that_restarted_once() {
    use common::cluster::{LmSpec, NodeSpec};
    use common::{ConstraintSet, Resources};
    use global_master::core::{GlobalMaster, GmConfig};
    use local_master::{LmConfig, LocalMaster};
    let node = NodeSpec {
        capacity: Resources::cores(2, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: vec![vec![node]],
    };
    let life = |start: u64| LocalMaster::new(&spec, 1, LmConfig::default(), Micros(start));
    let mut gm = GlobalMaster::new(GmConfig::new(GmId(0), 1, 1));
    let state = |gm: &mut GlobalMaster, lm: &mut LocalMaster, now: u64| {
        let snapshot = lm.snapshot(Micros(now));
        gm.step(Micros(now), GmInput::Lm(LmToGm::State(snapshot)))
            .lm_new_lives
    };
    let mut first = life(1);
    assert!(
        state(&mut gm, &mut first, 2).is_empty(),
        "the first life heard of"
    );
    assert!(state(&mut gm, &mut first, 3).is_empty());
    let mut second = life(10);
    assert_eq!(state(&mut gm, &mut second, 11), vec![LmId(0)]);
    assert!(state(&mut gm, &mut second, 12).is_empty(), "named once");
    assert!(
        state(&mut gm, &mut first, 13).is_empty(),
        "a late snapshot of the old life"
    );
}

/// A task an LM still held when its GM restarted is not queued again, but it is
/// tracked under its job's policy: a failure of the held run is retried (before,
/// the restarted GM's core did not know it, and the failure ended the task).
#[test]
fn a_task_held_at_a_gm_restart_is_retried_when_its_run_fails() {
    let mut h = Harness::new(1, 1);
    let a = TaskId::new(1, 0);
    let resume = Resumed {
        tasks: Vec::new(),
        held: vec![(task(1, 0), 0)],
        retry: policy(2),
        dags: Vec::new(),
        gangs: Vec::new(),
    };
    let outs = h.gm_step(0, 1, GmInput::Resume(resume));
    assert!(launches(&h.pass(0, 2)).is_empty(), "not placed again");
    assert!(outs[0].retries.is_empty());
    let failed = Some(TaskFailure::Exit { code: 1 });
    let outs = h.gm_step(0, 3, GmInput::Lm(run_1_ended(a, NodeId(0), 3, failed)));
    let retries: Vec<_> = outs.iter().flat_map(|o| o.retries.clone()).collect();
    assert_eq!(retries.len(), 1, "{outs:?}");
    assert_eq!((retries[0].task, retries[0].attempt), (a, 2));
}

/// A job cancelled while a restarted GM waited for its LMs' answers before resuming
/// its tasks: the resumed tasks leave the queues at once, as cancelled, and none
/// goes out.
#[test]
fn tasks_resumed_after_their_job_was_cancelled_end_cancelled_unlaunched() {
    use common::protocol::ClientToGm;
    let mut h = Harness::new(1, 1);
    h.gm_step(0, 1, GmInput::Client(ClientToGm::Cancel(common::JobId(1))));
    let (mut a, mut b) = (task(1, 0), task(1, 1));
    a.attempt = 2;
    b.attempt = 2;
    let resume = Resumed {
        tasks: vec![(a, 0), (b, 0)],
        held: Vec::new(),
        retry: policy(2),
        dags: Vec::new(),
        gangs: Vec::new(),
    };
    let outs = h.gm_step(0, 2, GmInput::Resume(resume));
    let mut cancelled: Vec<TaskId> = outs.iter().flat_map(|o| o.cancelled.clone()).collect();
    cancelled.sort();
    assert_eq!(cancelled, vec![TaskId::new(1, 0), TaskId::new(1, 1)]);
    assert!(
        launches(&h.pass(0, 3)).is_empty(),
        "nothing of a cancelled job goes out"
    );
}

/// Issue 33 (fault seed 57133): a GM restarted from its journal resumes a task as
/// run 4 (the journal: run 3 may have gone out, 2 failures counted). The failure
/// of run 2, which the previous life heard and counted (it sent run 3 for it),
/// arrives again (a worker listed it to a restarted LM): it is stale, not a third
/// failure that would spend the budget and end the task `failed` with a retry
/// left. The failure of run 3, unheard before, counts.
#[test]
fn a_failure_the_previous_life_counted_is_not_counted_again() {
    let mut h = Harness::new(1, 1);
    let a = TaskId::new(1, 0);
    let mut spec = task(1, 0);
    spec.attempt = 4;
    h.gm_step(
        0,
        1,
        GmInput::Resume(Resumed {
            tasks: vec![(spec, 2)],
            held: Vec::new(),
            retry: policy(4),
            dags: Vec::new(),
            gangs: Vec::new(),
        }),
    );
    let run_ended = |attempt: u32, at: u64| {
        LmToGm::Ended(TasksEnded {
            lm: LmId(0),
            gm: GmId(0),
            ends: vec![TaskEnd {
                used: None,
                task: a,
                attempt,
                node: NodeId(0),
                at: Micros(at),
                failure: Some(TaskFailure::Exit { code: 1 }),
            }],
            publish: common::messages::EndsPublished::ByGmAgain,
        })
    };
    let outs = h.gm_step(0, 2, GmInput::Lm(run_ended(2, 2)));
    assert!(outs[0].ended.is_empty(), "{:?}", outs[0].ended);
    assert_eq!(outs[0].stale, vec![(a, 2)]);
    // Run 3's failure (the third of 4 attempts) counts, while run 4 still waits:
    // run 4 is its retry, the last attempt. (Counted twice, run 2's failure would
    // have made this the fourth: run 4 withdrawn, the task ended `failed`.)
    let outs = h.gm_step(0, 4, GmInput::Lm(run_ended(3, 4)));
    assert!(outs[0].ended.is_empty(), "{:?}", outs[0].ended);
    assert_eq!(launches(&h.pass(0, 5)), vec![a], "run 4 goes out");
    let outs = h.fail(10_000_000, a, TaskFailure::Exit { code: 3 });
    assert!(outs.iter().all(|o| o.retries.is_empty()), "{outs:?}");
    assert_eq!(outs[0].ended.len(), 1, "4 attempts spent");
}
