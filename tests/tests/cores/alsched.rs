//! alsched soft constraints (issue 36) over the real GM and LM cores: a preferring
//! job gets its preferred nodes when they are free and runs elsewhere (recording the
//! branch and why) when not; a `min` of two preferences needs both; an LM never
//! rejects because of a preference; a GM whose jobs have no tree decides as before.

use common::attributes::Attributes;
use common::messages::LaunchOutcome;
use common::utility::{compile, UtilityTree};
use common::{ConstraintSet, Micros, Resources, TaskId, TaskSpec};
use global_master::core::alsched::NotTaken;
use global_master::core::DecisionOutcome;
use std::sync::Arc;
use tests::{ClusterBuilder, Harness};

pub(crate) const GPU: u64 = 5;
const SSD: u64 = 6;

fn names() -> Attributes {
    let mut a = Attributes::new();
    a.name_bit("gpu", GPU as usize).expect("test fixture");
    a.name_bit("ssd", SSD as usize).expect("test fixture");
    a
}

pub(crate) fn tasks(job: u64, n: u32) -> Vec<TaskSpec> {
    (0..n)
        .map(|i| {
            TaskSpec::short(
                TaskId::new(job, i),
                Resources::cores(1, 1),
                Micros::from_secs(1),
            )
        })
        .collect()
}

pub(crate) fn utility(json: &str, n: u32) -> Arc<common::utility::Utility> {
    let tree: UtilityTree = serde_json::from_str(json).expect("test fixture");
    Arc::new(compile(&tree, &names(), n, "utility").expect("test fixture"))
}

pub(crate) fn nodes(out: &global_master::core::PassOutput) -> Vec<Option<u32>> {
    out.decisions
        .iter()
        .map(|d| match d.outcome {
            DecisionOutcome::Dispatched { node, .. } => Some(node.0),
            _ => None,
        })
        .collect()
}

/// One GM, one LM, 4 nodes of 1 core; nodes 2 and 3 have a GPU.
#[test]
fn a_job_preferring_gpus_gets_them_when_free_and_runs_elsewhere_when_not() {
    let cluster = ClusterBuilder::new(1, 1, 4)
        .node_constraints(0, 0, 2, &[GPU])
        .node_constraints(0, 0, 3, &[GPU])
        .build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    h.gms[0].set_utility(
        common::JobId(1),
        utility(r#"{"prefer": {"set": "gpu"}}"#, 3),
    );
    for t in tasks(1, 3) {
        h.gms[0].submit(Micros(0), t);
    }
    let out = h.gms[0].schedule(Micros(0));
    assert_eq!(nodes(&out), vec![Some(2), Some(3), Some(0)]);
    let soft = h.gms[0].soft();
    let choice = |i| {
        soft.choice(TaskId::new(1, i))
            .cloned()
            .expect("test fixture")
    };
    assert_eq!(choice(0).branch.as_deref(), Some("utility.prefer"));
    assert_eq!(choice(1).branch.as_deref(), Some("utility.prefer"));
    assert!((choice(1).utility - 2.0 / 3.0).abs() < 1e-9);
    let fell_back = choice(2);
    assert_eq!(
        fell_back.branch, None,
        "no GPU left: the task runs elsewhere"
    );
    assert_eq!(fell_back.passed_over.len(), 1);
    assert_eq!(fell_back.passed_over[0].branch, "utility.prefer");
    assert_eq!(
        fell_back.passed_over[0].why,
        NotTaken::NoRoomInSet { nodes: 2, free: 0 }
    );
    assert!((fell_back.utility - 2.0 / 3.0).abs() < 1e-9);
    // A driver that forgets the job forgets its choices too.
    h.gms[0].retain_soft_jobs(|job| job != common::JobId(1));
    assert!(h.gms[0].soft().choice(TaskId::new(1, 0)).is_none());
    assert_eq!(h.gms[0].soft().jobs_held(), 0);

    // The LM sees the tasks' own (empty) constraints and launches every one.
    let batch = out.batches.into_iter().next().expect("test fixture");
    assert!(batch
        .requests
        .iter()
        .all(|r| r.task.constraints == ConstraintSet::EMPTY));
    let effects = h.deliver(Micros(1), batch);
    assert_eq!(effects.starts.len(), 3);
}

/// An LM never rejects because of a preference: the GM's pick on a preferred node
/// and its fallback to a node outside the set both pass the LM's verification, and
/// the only rejection the LM can give is the hard one it gave before.
#[test]
fn an_lm_never_rejects_because_of_a_preference() {
    let cluster = ClusterBuilder::new(1, 1, 3)
        .node_constraints(0, 0, 1, &[GPU])
        .build();
    // Every shape of tree: a preferred set, a NOT, a min, an nCk that is never met.
    let trees = [
        r#"{"prefer": {"set": "gpu"}}"#,
        r#"{"prefer": {"set": {"not": "gpu"}}}"#,
        r#"{"min": [{"prefer": {"set": "gpu"}}, {"prefer": {"set": "ssd"}}]}"#,
        r#"{"nCk": {"set": "ssd", "k": 3, "u": 5}}"#,
    ];
    for tree in trees {
        let mut h = Harness::new(&cluster);
        h.heartbeat(Micros(0));
        h.gms[0].set_utility(common::JobId(1), utility(tree, 3));
        for t in tasks(1, 3) {
            h.gms[0].submit(Micros(0), t);
        }
        let out = h.gms[0].schedule(Micros(0));
        assert_eq!(nodes(&out).iter().flatten().count(), 3, "{tree}");
        let batch = out.batches.into_iter().next().expect("test fixture");
        let response = h.lms[0]
            .handle_launch_batch(Micros(1), batch)
            .expect("test fixture")
            .response
            .expect("test fixture");
        assert!(
            response
                .outcomes
                .iter()
                .all(|(_, o)| matches!(o, LaunchOutcome::Launched { .. })),
            "{tree}: {:?}",
            response.outcomes
        );
    }
}

/// `min` of two preferences needs both: only node 3 has GPU and SSD.
#[test]
fn min_of_two_preferences_needs_both() {
    let cluster = ClusterBuilder::new(1, 1, 4)
        .node_constraints(0, 0, 1, &[GPU])
        .node_constraints(0, 0, 2, &[SSD])
        .node_constraints(0, 0, 3, &[GPU, SSD])
        .build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    let both = r#"{"min": [{"prefer": {"set": "gpu"}}, {"prefer": {"set": "ssd"}}]}"#;
    h.gms[0].set_utility(common::JobId(1), utility(both, 2));
    for t in tasks(1, 2) {
        h.gms[0].submit(Micros(0), t);
    }
    let out = h.gms[0].schedule(Micros(0));
    assert_eq!(nodes(&out), vec![Some(3), Some(0)]);
    let soft = h.gms[0].soft();
    let second = soft.choice(TaskId::new(1, 1)).expect("test fixture");
    assert_eq!(second.branch, None);
    assert_eq!(
        second.passed_over[0].branch,
        "utility.min[0].prefer & utility.min[1].prefer"
    );
    assert_eq!(soft.job_utility(common::JobId(1)), Some(0.5));
}

/// Jobs without a tree decide exactly as on a GM that never heard of trees.
#[test]
fn jobs_without_a_tree_take_the_usual_path() {
    let cluster = ClusterBuilder::new(2, 2, 3)
        .node_constraints(0, 0, 1, &[GPU])
        .node_constraints(1, 1, 2, &[GPU])
        .build();
    let run = |with_tree: bool| {
        let mut h = Harness::new(&cluster);
        h.heartbeat(Micros(0));
        if with_tree {
            // A tree for a job that never comes.
            h.gms[0].set_utility(
                common::JobId(99),
                utility(r#"{"prefer": {"set": "gpu"}}"#, 1),
            );
        }
        let mut all = Vec::new();
        for job in 0..6 {
            let mut t = tasks(job, 2);
            if job % 3 == 0 {
                t.iter_mut().for_each(|t| {
                    t.constraints = ConstraintSet::from_ids([GPU]).expect("test fixture")
                });
            }
            t.into_iter().for_each(|t| h.gms[0].submit(Micros(0), t));
            let out = h.gms[0].schedule(Micros(job));
            all.extend(
                out.decisions
                    .into_iter()
                    .map(|d| (d.task, d.outcome, d.partitions, d.words)),
            );
        }
        all
    };
    assert_eq!(run(true), run(false));
}

/// Delay scheduling: a job preferring the one GPU node with `relax_after_s` 10
/// waits for it rather than fall back, and falls back once it has waited 10 s since
/// its first task was held back. The SPARK-18886 trap: a task of the job launching
/// on the GPU at 5 s does not restart the wait (it would have run to 15 s).
#[test]
fn relax_after_widens_on_time_and_a_launch_does_not_restart_the_wait() {
    use common::messages::WorkerReport;
    use common::reasons::PendingReason;
    let cluster = ClusterBuilder::new(1, 1, 3)
        .node_constraints(0, 0, 2, &[GPU])
        .build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    let tree = r#"{"prefer": {"set": "gpu", "relax_after_s": 10}}"#;
    h.gms[0].set_utility(common::JobId(1), utility(tree, 3));
    for t in tasks(1, 3) {
        h.gms[0].submit(Micros(0), t);
    }
    let waiting = |relax_s: u64| {
        Some(DecisionOutcome::Requeued(
            PendingReason::WaitingForPreferred {
                relax_at_us: relax_s * 1_000_000,
            },
        ))
    };
    let outcomes = |out: &global_master::core::PassOutput| -> Vec<Option<DecisionOutcome>> {
        out.decisions
            .iter()
            .map(|d| Some(d.outcome.clone()))
            .collect()
    };
    let out = h.gms[0].schedule(Micros(0));
    assert_eq!(nodes(&out), vec![Some(2), None, None]);
    assert_eq!(outcomes(&out)[1..], [waiting(10), waiting(10)]);
    assert_eq!(h.gms[0].pending().count(), 2, "held tasks are pending");
    h.deliver(Micros(0), out.batches.into_iter().next().expect("a batch"));

    // 5 s: the GPU frees; one held task takes it, the other waits on, to 10 s.
    let five = Micros::from_secs(5);
    let report = WorkerReport::Finished {
        used: None,
        node: common::NodeId(2),
        task: TaskId::new(1, 0),
        attempt: 1,
        at: five,
    };
    h.lms[0]
        .handle_worker_report(five, report)
        .expect("a known task");
    h.heartbeat(five);
    let out = h.gms[0].schedule(five);
    assert_eq!(nodes(&out), vec![Some(2), None]);
    assert_eq!(
        outcomes(&out)[1..],
        [waiting(10)],
        "the wait did not restart"
    );
    h.deliver(five, out.batches.into_iter().next().expect("a batch"));

    // 9 s: still waiting; 10 s: the wait is over, the last task runs elsewhere.
    let out = h.gms[0].schedule(Micros::from_secs(9));
    assert_eq!(outcomes(&out), [waiting(10)]);
    let out = h.gms[0].schedule(Micros::from_secs(10));
    assert_eq!(nodes(&out), vec![Some(0)]);
    let last = h.gms[0]
        .soft()
        .choice(TaskId::new(1, 2))
        .cloned()
        .expect("a choice");
    assert_eq!(last.branch, None);
    assert_eq!(
        last.passed_over[0].why,
        NotTaken::NoRoomInSet { nodes: 1, free: 0 }
    );
}

/// A soft placement the LM refuses (for room: another GM took the node first) no
/// longer counts in its job's utility, and its choice goes until it is placed again.
#[test]
fn a_refused_launch_no_longer_counts() {
    // 2 GMs, 1 LM, 2 nodes each; node 3 (GM 1's) is the only GPU node.
    let cluster = ClusterBuilder::new(2, 1, 2)
        .node_constraints(0, 1, 1, &[GPU])
        .build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    h.gms[0].set_utility(
        common::JobId(1),
        utility(r#"{"prefer": {"set": "gpu"}}"#, 1),
    );
    h.gms[0].submit(Micros(0), tasks(1, 1).remove(0));
    let soft_batch = h.gms[0].schedule(Micros(0)).batches.remove(0);
    assert_eq!(
        soft_batch.requests[0].node,
        common::NodeId(3),
        "a repartition onto the GPU"
    );
    assert_eq!(h.gms[0].soft().job_utility(common::JobId(1)), Some(1.0));
    // GM 1 takes its own GPU node first (a hard constraint).
    let mut hard = tasks(2, 1).remove(0);
    hard.constraints = ConstraintSet::from_ids([GPU]).expect("test fixture");
    h.gms[1].submit(Micros(0), hard);
    let first = h.gms[1].schedule(Micros(0)).batches.remove(0);
    assert_eq!(h.deliver(Micros(1), first).starts.len(), 1);
    let refused = h.deliver(Micros(2), soft_batch);
    assert!(refused.starts.is_empty(), "no room left on node 3");
    let soft = h.gms[0].soft();
    assert_eq!(soft.job_utility(common::JobId(1)), Some(0.0));
    assert!(soft.choice(TaskId::new(1, 0)).is_none());
}

/// An `nCk` pays nothing until its `k`-th task (a job ends with its last task): a
/// job of 3 whose tree is `nCk(gpu, 3)` does not spend the 2 GPU nodes (4 and 5) on
/// a partial placement; it runs elsewhere with the reason, and a job of 2 that the
/// GPUs can hold whole gets them.
#[test]
fn an_nck_branch_is_taken_only_when_the_set_has_room_for_all_it_needs() {
    let cluster = ClusterBuilder::new(1, 1, 6)
        .node_constraints(0, 0, 4, &[GPU])
        .node_constraints(0, 0, 5, &[GPU])
        .build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    let gm = &mut h.gms[0];
    gm.set_utility(
        common::JobId(1),
        utility(r#"{"nCk": {"set": "gpu", "k": 3, "u": 1}}"#, 3),
    );
    gm.set_utility(
        common::JobId(2),
        utility(r#"{"nCk": {"set": "gpu", "k": 2, "u": 1}}"#, 2),
    );
    for t in tasks(1, 3).into_iter().chain(tasks(2, 2)) {
        gm.submit(Micros(0), t);
    }
    let out = gm.schedule(Micros(0));
    assert_eq!(
        nodes(&out),
        vec![Some(0), Some(1), Some(2), Some(4), Some(5)],
        "job 1 off the GPUs (first fit), job 2 on both"
    );
    let soft = gm.soft();
    let first = soft.choice(TaskId::new(1, 0)).cloned().expect("a choice");
    assert_eq!(first.branch, None);
    assert_eq!(
        first.passed_over[0].why,
        NotTaken::CannotComplete { room: 2, need: 3 },
        "{first:?}"
    );
    assert!(first.passed_over[0]
        .why
        .describe()
        .contains("needs 3 more tasks in the set, which has room for 2"));
    let whole = soft.choice(TaskId::new(2, 1)).cloned().expect("a choice");
    assert_eq!(whole.branch.as_deref(), Some("utility.nCk"));
    assert!((whole.utility - 1.0).abs() < 1e-9, "{whole:?}");
}

/// QUEUEABLE work (Mercury's top-k placement) follows a tree too: the job's tasks
/// go to the top-k of its preferred set, although other nodes have shorter queues;
/// a job without a tree takes the top-k of every node as before.
#[test]
fn queueable_tasks_take_the_top_k_of_their_preferred_set() {
    use common::{GmId, TaskKind};
    use global_master::core::{GlobalMaster, GmConfig};
    use local_master::{LmConfig, LocalMaster, QueueableConfig};
    let cluster = ClusterBuilder::new(1, 1, 4)
        .node_constraints(0, 0, 2, &[GPU])
        .node_constraints(0, 0, 3, &[GPU])
        .build();
    let mut lm = LocalMaster::new(&cluster.lms[0], 1, LmConfig::default(), Micros(0))
        .with_queueable(QueueableConfig::default());
    let mut gm = GlobalMaster::new(GmConfig {
        queueable_top_k: 4,
        ..GmConfig::new(GmId(0), 1, 1)
    });
    gm.apply_snapshot(Micros(0), &lm.snapshot(Micros(0)));
    gm.set_utility(
        common::JobId(1),
        utility(r#"{"prefer": {"set": "gpu"}}"#, 4),
    );
    let queueable = |job| {
        tasks(job, 4)
            .into_iter()
            .map(|t| t.with_kind(TaskKind::Queueable))
    };
    for t in queueable(1).chain(queueable(2)) {
        gm.submit(Micros(0), t);
    }
    let out = gm.schedule(Micros(0));
    let placed = nodes(&out);
    assert_eq!(placed.len(), 8, "{placed:?}");
    assert!(
        placed[..4].iter().all(|n| matches!(n, Some(2 | 3))),
        "the tree's tasks on GPU nodes only: {placed:?}"
    );
    assert!(
        placed[4..].iter().any(|n| matches!(n, Some(0 | 1))),
        "no tree: the top-k of every node, GPU or not: {placed:?}"
    );
    let choice = gm
        .soft()
        .choice(TaskId::new(1, 3))
        .cloned()
        .expect("a choice");
    assert_eq!(
        choice.branch.as_deref(),
        Some("utility.prefer"),
        "{choice:?}"
    );
    assert!((choice.utility - 1.0).abs() < 1e-9, "{choice:?}");
}

/// Delay scheduling counted in passes (YARN's node-locality delay): with
/// `relax_after_passes` 2 a job preferring the busy GPU node waits through the
/// pass that held its task first and one more, then falls back at the third; the
/// held task's reason says it waits for passes, not for a time.
#[test]
fn relax_after_passes_widens_after_that_many_passes() {
    use common::reasons::PendingReason;
    let cluster = ClusterBuilder::new(1, 1, 3)
        .node_constraints(0, 0, 2, &[GPU])
        .build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    // Job 1 takes the GPU node; job 2 prefers it too, waiting 2 passes at most.
    h.gms[0].set_utility(
        common::JobId(1),
        utility(r#"{"prefer": {"set": "gpu"}}"#, 1),
    );
    let tree = r#"{"prefer": {"set": "gpu", "relax_after_passes": 2}}"#;
    h.gms[0].set_utility(common::JobId(2), utility(tree, 1));
    h.gms[0].submit(Micros(0), tasks(1, 1).remove(0));
    let out = h.gms[0].schedule(Micros(0));
    assert_eq!(nodes(&out), vec![Some(2)]);
    h.deliver(Micros(0), out.batches.into_iter().next().expect("a batch"));
    h.heartbeat(Micros(1));
    h.gms[0].submit(Micros(1), tasks(2, 1).remove(0));
    let held = Some(DecisionOutcome::Requeued(
        PendingReason::WaitingForPreferred {
            relax_at_us: u64::MAX,
        },
    ));
    for (pass, at) in [(1, 1), (2, 2)] {
        let out = h.gms[0].schedule(Micros::from_secs(at));
        let got: Vec<_> = out
            .decisions
            .iter()
            .map(|d| Some(d.outcome.clone()))
            .collect();
        assert_eq!(got, vec![held.clone()], "pass {pass} holds the task");
    }
    assert!(held
        .as_ref()
        .and_then(|d| match d {
            DecisionOutcome::Requeued(r) => Some(r.to_string()),
            _ => None,
        })
        .is_some_and(|r| r.contains("some more passes")));
    let out = h.gms[0].schedule(Micros::from_secs(3));
    assert_eq!(nodes(&out), vec![Some(0)], "the third pass falls back");
    let choice = h.gms[0]
        .soft()
        .choice(TaskId::new(2, 0))
        .cloned()
        .expect("a choice");
    assert_eq!(choice.branch, None);
}

/// An `exec` task is told the branch it got (issue 36 item 5): `MEGHA_BRANCH` in its
/// environment is the branch's tree path, or `none` for a task that took none,
/// whatever its spec said.
#[test]
fn exec_tasks_are_told_their_branch() {
    use common::{ExecCommand, Executor};
    let cluster = ClusterBuilder::new(1, 1, 2)
        .node_constraints(0, 0, 1, &[GPU])
        .build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    h.gms[0].set_utility(
        common::JobId(1),
        utility(r#"{"prefer": {"set": "gpu"}}"#, 2),
    );
    let mut command = ExecCommand {
        program: "sh".into(),
        ..ExecCommand::default()
    };
    command.env.insert("MEGHA_BRANCH".into(), "spoofed".into());
    let exec = Executor::Exec(Arc::new(command));
    for mut t in tasks(1, 2) {
        t.executor = Some(exec.clone());
        h.gms[0].submit(Micros(0), t);
    }
    let out = h.gms[0].schedule(Micros(0));
    assert_eq!(nodes(&out), vec![Some(1), Some(0)]);
    let told: Vec<(u32, Option<String>)> = out
        .batches
        .iter()
        .flat_map(|b| &b.requests)
        .map(|r| {
            let branch = match &r.task.executor {
                Some(Executor::Exec(c)) => c.env.get("MEGHA_BRANCH").cloned(),
                _ => None,
            };
            (r.task.id.index, branch)
        })
        .collect();
    assert_eq!(
        told,
        vec![
            (0, Some("utility.prefer".to_owned())),
            (1, Some("none".to_owned()))
        ]
    );
}

/// A burn by placement (issue 36 item 5) learns at each placement whether it took a
/// branch of its job's tree (it then burns its `duration`) or none (its
/// `slow_duration`), whatever its spec said.
#[test]
fn burn_tasks_run_slow_off_their_branch() {
    use common::{BurnByPlacement, Executor};
    let cluster = ClusterBuilder::new(1, 1, 2)
        .node_constraints(0, 0, 1, &[GPU])
        .build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    h.gms[0].set_utility(
        common::JobId(1),
        utility(r#"{"prefer": {"set": "gpu"}}"#, 2),
    );
    let spoofed = Executor::BurnByPlacement(BurnByPlacement {
        slow_duration: Micros::from_secs(30),
        preferred: true,
    });
    for mut t in tasks(1, 2) {
        t.executor = Some(spoofed.clone());
        h.gms[0].submit(Micros(0), t);
    }
    let out = h.gms[0].schedule(Micros(0));
    assert_eq!(nodes(&out), vec![Some(1), Some(0)]);
    let burns: Vec<(u32, Option<Micros>)> = out
        .batches
        .iter()
        .flat_map(|b| &b.requests)
        .map(|r| {
            let burn = r
                .task
                .executor
                .as_ref()
                .and_then(|e| e.burn_duration(r.task.duration));
            (r.task.id.index, burn)
        })
        .collect();
    let fast = tasks(1, 1)[0].duration;
    assert_eq!(
        burns,
        vec![(0, Some(fast)), (1, Some(Micros::from_secs(30)))],
        "the GPU task burns its duration, the other its slow duration"
    );
}
