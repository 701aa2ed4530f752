//! DAG jobs through the cores' `step` only (see `gm_core::dag`): a stage's tasks are
//! launched only once every task of each parent stage ended; a failed parent ends
//! its descendants without running them (or lets a `continue` stage run); cancel
//! takes the held stages too; a repeated end counts once; a restarted GM resumes a
//! half-done DAG where it was; and in the simulator, over many jobs, no task of a
//! stage starts before the last task of its parent stages finished.

use super::gm_lifecycle::{launches, policy, task, Harness};
use common::dag::{JobDag, OnParentFailure, Stage};
use common::messages::{EndsPublished, TaskEnd, TaskFailure, TasksEnded};
use common::protocol::{ClientToGm, LmToGm};
use common::retry::RetryPolicy;
use common::{GmId, JobId, LmId, Micros, NodeId, TaskId};
use global_master::core::{GlobalMaster, GmConfig, GmInput, GmOutput, Resumed, ResumedDag};
use loadgen::sim::workload::Job;
use loadgen::sim::{run, SchedulerKind, SimConfig};
use std::sync::Arc;
use tests::dag::{diamond_jobs, out_of_order};
use tests::ClusterBuilder;

const FAIL: OnParentFailure = OnParentFailure::Fail;
const CONTINUE: OnParentFailure = OnParentFailure::Continue;

/// a (tasks 0, 1) -> b (2) and c (3) -> d (4); d does `on_d` when a parent failed.
fn diamond(on_d: OnParentFailure) -> Arc<JobDag> {
    let stage = |name: &str, after: &[u16], on| Stage {
        name: name.into(),
        after: after.to_vec(),
        on_parent_failure: on,
    };
    Arc::new(JobDag {
        stages: vec![
            stage("a", &[], FAIL),
            stage("b", &[0], FAIL),
            stage("c", &[0], FAIL),
            stage("d", &[1, 2], on_d),
        ],
        task_stage: vec![0, 0, 1, 2, 3],
        after_jobs: Vec::new(),
    })
}

fn t(index: u32) -> TaskId {
    TaskId::new(1, index)
}

/// Job 1, the diamond, submitted to GM 0 with `retry`.
fn submit(h: &mut Harness, on_d: OnParentFailure, retry: RetryPolicy) -> Vec<GmOutput> {
    let submit = ClientToGm::SubmitJob {
        tasks: (0..5).map(|i| task(1, i)).collect(),
        retry,
        dag: Some(diamond(on_d)),
    };
    h.gm_step(0, 1, GmInput::Client(submit))
}

fn released(outs: &[GmOutput]) -> Vec<TaskId> {
    outs.iter().flat_map(|o| o.released.clone()).collect()
}

fn never_run(outs: &[GmOutput]) -> Vec<(TaskId, String)> {
    outs.iter()
        .flat_map(|o| o.never_run.iter())
        .map(|n| (n.task, n.cause.to_string()))
        .collect()
}

#[test]
fn a_diamond_launches_each_stage_once_its_parents_ended() {
    let mut h = Harness::new(1, 4);
    let outs = submit(&mut h, FAIL, RetryPolicy::NONE);
    let blocked: Vec<_> = outs[0].blocked.iter().map(|b| b.task).collect();
    assert_eq!(blocked, [t(2), t(3), t(4)]);
    assert_eq!(&*outs[0].blocked[0].waits_for, "a");
    assert_eq!(h.gms[0].dags().held(), 3);
    // Room for all five: only stage a goes.
    assert_eq!(launches(&h.pass(0, 2)), [t(0), t(1)]);
    assert!(released(&h.finish(3, t(0))).is_empty());
    assert_eq!(released(&h.finish(4, t(1))), [t(2), t(3)]);
    assert_eq!(launches(&h.pass(0, 5)), [t(2), t(3)]);
    let outs = h.finish(6, t(2));
    assert!(released(&outs).is_empty());
    let still: Vec<_> = outs.iter().flat_map(|o| o.blocked.clone()).collect();
    assert_eq!(still.len(), 1);
    assert_eq!(&*still[0].waits_for, "c", "d waits for c only now");
    assert_eq!(released(&h.finish(7, t(3))), [t(4)]);
    assert_eq!(launches(&h.pass(0, 8)), [t(4)]);
    h.finish(9, t(4));
    assert!(
        h.gms[0].dags().is_empty(),
        "the job left once every stage ended"
    );
    assert_eq!(h.gms[0].stats().tasks_finished, 5);
}

#[test]
fn a_failed_parent_ends_its_descendants_or_lets_a_continue_stage_run() {
    let mut h = Harness::new(1, 4);
    submit(&mut h, FAIL, RetryPolicy::NONE);
    h.pass(0, 2);
    h.finish(3, t(0));
    h.finish(4, t(1));
    h.pass(0, 5);
    // b fails for good: d never runs (at once, while c still runs).
    let outs = h.fail(6, t(2), TaskFailure::Exit { code: 2 });
    assert_eq!(
        never_run(&outs),
        [(t(4), "parent stage `b` failed".to_owned())]
    );
    assert_eq!(h.gms[0].stats().tasks_failed, 2);
    assert!(released(&h.finish(7, t(3))).is_empty());
    assert!(h.gms[0].dags().is_empty());

    let mut h = Harness::new(1, 4);
    submit(&mut h, CONTINUE, RetryPolicy::NONE);
    h.pass(0, 2);
    h.finish(3, t(0));
    h.finish(4, t(1));
    h.pass(0, 5);
    let outs = h.fail(6, t(2), TaskFailure::Exit { code: 2 });
    assert!(never_run(&outs).is_empty() && released(&outs).is_empty());
    assert_eq!(released(&h.finish(7, t(3))), [t(4)], "d continues");
}

#[test]
fn a_retried_failure_does_not_end_its_stage() {
    let mut h = Harness::new(1, 4);
    submit(&mut h, FAIL, policy(2));
    h.pass(0, 2);
    h.finish(3, t(0));
    let outs = h.fail(4, t(1), TaskFailure::Exit { code: 1 });
    assert_eq!(outs.iter().map(|o| o.retries.len()).sum::<usize>(), 1);
    assert!(released(&outs).is_empty() && never_run(&outs).is_empty());
    h.heartbeat(2_000_000);
    h.gm_step(0, 2_000_000, GmInput::Tick);
    assert_eq!(launches(&h.pass(0, 2_000_001)), [t(1)]);
    assert_eq!(released(&h.finish(2_000_002, t(1))), [t(2), t(3)]);
}

#[test]
fn a_repeated_end_counts_once() {
    let mut h = Harness::new(1, 4);
    submit(&mut h, FAIL, RetryPolicy::NONE);
    h.pass(0, 2);
    let outs = h.finish(3, t(0));
    let end = outs[0].ended[0].clone();
    // The LM's stream sends the same end again: stage a still waits for task 1.
    let again = TasksEnded {
        lm: LmId(0),
        publish: EndsPublished::ByLm,
        gm: GmId(0),
        ends: vec![end],
    };
    let outs = h.gm_step(0, 4, GmInput::Lm(LmToGm::Ended(again)));
    assert!(released(&outs).is_empty(), "{:?}", released(&outs));
    assert_eq!(released(&h.finish(5, t(1))), [t(2), t(3)]);
}

#[test]
fn cancel_takes_the_held_stages_too() {
    let mut h = Harness::new(1, 4);
    submit(&mut h, FAIL, RetryPolicy::NONE);
    h.pass(0, 2);
    h.finish(3, t(0));
    let outs = h.gm_step(0, 4, GmInput::Client(ClientToGm::Cancel(JobId(1))));
    let mut cancelled: Vec<_> = outs.iter().flat_map(|o| o.cancelled.clone()).collect();
    cancelled.sort();
    // b, c and d were held; task 1 runs and its LM stops it.
    assert!(
        [t(2), t(3), t(4)].iter().all(|x| cancelled.contains(x)),
        "{cancelled:?}"
    );
    assert!(h.gms[0].dags().is_empty());
    assert!(released(&h.finish(5, t(1))).is_empty());
}

#[test]
fn a_restarted_gm_resumes_a_half_done_dag_where_it_was() {
    let end = |index, failed: bool| (index, failed);
    let resume = |ended: Vec<(u32, bool)>, to_run: &[u32], on_d| {
        let mut gm = GlobalMaster::new(GmConfig::new(GmId(0), 1, 1));
        let out = gm.step(
            Micros(1),
            GmInput::Resume(Resumed {
                tasks: to_run.iter().map(|&i| (task(1, i), 0)).collect(),
                held: Vec::new(),
                retry: RetryPolicy::NONE,
                dags: vec![ResumedDag {
                    job: JobId(1),
                    dag: diamond(on_d),
                    ended,
                }],
                gangs: Vec::new(),
            }),
        );
        let queued: Vec<TaskId> = gm.queues().iter().map(|p| p.task.id).collect();
        (gm, out, queued)
    };
    // a ended (both tasks), b finished: c is queued again, d waits for c.
    let (gm, out, queued) = resume(
        vec![end(0, false), end(2, false), end(1, false)],
        &[3, 4],
        FAIL,
    );
    assert_eq!(queued, [t(3)]);
    assert_eq!(out.blocked.len(), 1);
    assert_eq!(&*out.blocked[0].waits_for, "c");
    assert_eq!(gm.dags().held(), 1);
    // Only task 0 of a ended: a's task 1 runs again, b, c, d wait.
    let (_, _, queued) = resume(vec![end(0, false)], &[1, 2, 3, 4], FAIL);
    assert_eq!(queued, [t(1)]);
    // b failed before the restart and the earlier life had not ended d yet: d
    // never runs; c runs.
    let (_, out, queued) = resume(
        vec![end(0, false), end(1, false), end(2, true)],
        &[3, 4],
        FAIL,
    );
    assert_eq!(queued, [t(3)]);
    assert_eq!(out.never_run.len(), 1);
    assert_eq!(out.never_run[0].task, t(4));
}

#[test]
fn in_the_simulator_no_stage_starts_before_its_parents_finished() {
    let cluster = ClusterBuilder::new(2, 2, 3).capacity(2, 2048).build();
    let jobs = diamond_jobs(12);
    let dag = jobs[0].dag.clone().expect("a DAG");
    // The same tasks without their DAG: the check can tell.
    let flat: Vec<Job> = jobs
        .iter()
        .map(|j| Job {
            dag: None,
            ..j.clone()
        })
        .collect();
    for scheduler in [SchedulerKind::Megha, SchedulerKind::Centralized] {
        let config = SimConfig {
            scheduler,
            ..SimConfig::default()
        };
        let outcome = run(&cluster, &jobs, &config, &mut |_, _| {});
        assert!(outcome.drained, "{scheduler:?}: resources leaked");
        assert_eq!(outcome.counters.dag_never_run, 0);
        let bad = out_of_order(&outcome, &jobs, &dag);
        assert!(bad.is_empty(), "{scheduler:?}: {bad:#?}");
        let free = run(&cluster, &flat, &config, &mut |_, _| {});
        assert!(
            !out_of_order(&free, &flat, &dag).is_empty(),
            "{scheduler:?}: without the DAG, no task started early: the check sees nothing"
        );
    }
}

#[test]
fn a_repeated_submission_of_ends_through_the_lm_is_harmless() {
    // An end for a task of a DAG job the GM does not know (another job) changes
    // nothing of the DAG job.
    let mut h = Harness::new(1, 4);
    submit(&mut h, FAIL, RetryPolicy::NONE);
    let stray = TasksEnded {
        lm: LmId(0),
        publish: EndsPublished::ByLm,
        gm: GmId(0),
        ends: vec![TaskEnd {
            used: None,
            task: TaskId::new(9, 0),
            attempt: 1,
            node: NodeId(0),
            at: Micros(2),
            failure: None,
        }],
    };
    let outs = h.gm_step(0, 2, GmInput::Lm(LmToGm::Ended(stray)));
    assert!(released(&outs).is_empty());
    assert_eq!(h.gms[0].dags().held(), 3);
}

#[test]
fn a_job_after_another_waits_for_the_drivers_word_of_its_end() {
    let mut h = Harness::new(1, 4);
    let mut dag = (*diamond(FAIL)).clone();
    dag.after_jobs = vec![common::dag::AfterJob {
        job: JobId(7),
        when: common::dag::AfterWhen::Ok,
    }];
    let submit = ClientToGm::SubmitJob {
        tasks: (0..5).map(|i| task(1, i)).collect(),
        retry: RetryPolicy::NONE,
        dag: Some(Arc::new(dag)),
    };
    let outs = h.gm_step(0, 1, GmInput::Client(submit));
    assert_eq!(outs[0].blocked.len(), 5);
    assert!(
        launches(&h.pass(0, 2)).is_empty(),
        "nothing runs before job 7 ended"
    );
    assert!(h.gms[0].dags().awaits(JobId(7)));
    let outs = h.gm_step(
        0,
        3,
        GmInput::JobEnded {
            job: JobId(7),
            ok: true,
        },
    );
    assert_eq!(released(&outs), [t(0), t(1)]);
    assert!(outs[0].wants_pass);
    assert_eq!(launches(&h.pass(0, 4)), [t(0), t(1)]);
}
