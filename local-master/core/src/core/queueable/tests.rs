use super::*;
use common::cluster::{LmSpec, NodeSpec};
use common::messages::{LaunchBatch, LaunchOutcome, Placement, WorkerReport};
use common::{ConstraintSet, LmId, TaskSpec};

fn lm(nodes: usize, cores: u64, config: QueueableConfig) -> LocalMaster {
    let node = NodeSpec {
        capacity: Resources::cores(cores, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: vec![vec![node; nodes]],
    };
    LocalMaster::new(&spec, 1, crate::LmConfig::default(), Micros(0)).with_queueable(config)
}

fn task(id: u64, cores: u64, secs: u64, kind: TaskKind) -> TaskSpec {
    TaskSpec::short(
        TaskId::new(id, 0),
        Resources::cores(cores, 1),
        Micros::from_secs(secs),
    )
    .with_kind(kind)
}

fn send(lm: &mut LocalMaster, now: u64, seq: u64, tasks: &[(TaskSpec, u32)]) -> LmEffects {
    let batch = LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        seq,
        resend: false,
        requests: tasks
            .iter()
            .map(|(t, n)| LaunchRequest {
                task: t.clone(),
                node: NodeId(*n),
                placement: Placement::Internal,
            })
            .collect(),
    };
    lm.handle_launch_batch(Micros(now), batch).unwrap()
}

fn started(lm: &mut LocalMaster, id: u64, node: u32, at: u64) -> LmEffects {
    lm.handle_worker_report(
        Micros(at),
        WorkerReport::Started {
            attempt: 1,
            node: NodeId(node),
            task: TaskId::new(id, 0),
            at: Micros(at),
        },
    )
    .unwrap()
}

#[test]
fn queueable_work_is_accepted_beyond_free_resources_and_estimated() {
    let mut lm = lm(2, 1, QueueableConfig::default());
    let q = |id| (task(id, 1, 10, TaskKind::Queueable), 0);
    let fx = send(&mut lm, 0, 1, &[q(1), q(2), q(3)]);
    assert_eq!(
        fx.starts.len(),
        3,
        "every QUEUEABLE task goes to the worker"
    );
    assert_eq!(lm.queued_len(), 3);
    started(&mut lm, 1, 0, 0);
    let delays = lm.queue_delays(Micros::from_secs(4));
    let overhead = QueueableConfig::default().launch_overhead;
    // Two queued tasks of 10 s plus 6 s left of the running one.
    assert_eq!(delays[0], overhead + Micros::from_secs(26));
    assert_eq!(delays[1], overhead);
    // Running QUEUEABLE work is invisible to the GMs' view of free resources.
    assert_eq!(lm.snapshot(Micros(5)).free[0], Resources::cores(1, 1024));
    assert_eq!(lm.snapshot(Micros(5)).queue_delay.len(), 2);
}

#[test]
fn other_work_kills_the_fewest_queueable_tasks_most_recent_first() {
    let mut lm = lm(1, 4, QueueableConfig::default());
    let qs: Vec<_> = (1..=3)
        .map(|i| (task(i, 1, 100, TaskKind::Queueable), 0))
        .collect();
    send(&mut lm, 0, 1, &qs);
    for i in 1..=3 {
        started(&mut lm, i, 0, i * 10);
    }
    // 1 core free; a 2-core GUARANTEED task needs one QUEUEABLE task gone.
    let fx = send(&mut lm, 50, 2, &[(task(9, 2, 5, TaskKind::Guaranteed), 0)]);
    assert_eq!(
        fx.kills,
        vec![KillTask {
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(3, 0)
        }]
    );
    assert!(matches!(
        fx.response.unwrap().outcomes[0].1,
        LaunchOutcome::Launched { .. }
    ));
    let fx = lm
        .handle_worker_report(
            Micros(60),
            WorkerReport::Killed {
                attempt: 1,
                node: NodeId(0),
                task: TaskId::new(3, 0),
                at: Micros(60),
            },
        )
        .unwrap();
    assert_eq!(fx.requeues.len(), 1);
    assert_eq!(fx.requeues[0].tasks[0].0.id, TaskId::new(3, 0));
    // A Short task that would need more than QUEUEABLE work frees is refused.
    let fx = send(&mut lm, 70, 3, &[(task(10, 3, 5, TaskKind::Short), 0)]);
    assert!(fx.kills.is_empty());
    assert!(matches!(
        fx.response.unwrap().outcomes[0].1,
        LaunchOutcome::Rejected(RejectReason::InsufficientResources { .. })
    ));
}

#[test]
fn a_queueable_start_racing_other_work_is_killed_and_requeued_once() {
    let mut lm = lm(1, 1, QueueableConfig::default());
    send(&mut lm, 0, 1, &[(task(1, 1, 10, TaskKind::Queueable), 0)]);
    // The LM places GUARANTEED work before it hears that the QUEUEABLE task started.
    send(&mut lm, 1, 2, &[(task(2, 1, 10, TaskKind::Guaranteed), 0)]);
    let fx = started(&mut lm, 1, 0, 2);
    assert_eq!(fx.kills.len(), 1);
    let fx = lm
        .handle_worker_report(
            Micros(3),
            WorkerReport::Killed {
                attempt: 1,
                node: NodeId(0),
                task: TaskId::new(1, 0),
                at: Micros(3),
            },
        )
        .unwrap();
    assert_eq!(fx.requeues[0].tasks.len(), 1);
    assert_eq!(lm.free()[0], Resources::cores(0, 1023));
}

#[test]
fn the_cap_refuses_tasks_larger_than_the_queueable_share() {
    let mut lm = lm(
        1,
        4,
        QueueableConfig {
            cap: 0.5,
            ..QueueableConfig::default()
        },
    );
    let fx = send(&mut lm, 0, 1, &[(task(1, 3, 1, TaskKind::Queueable), 0)]);
    assert!(matches!(
        fx.response.unwrap().outcomes[0].1,
        LaunchOutcome::Rejected(RejectReason::OverQueueableCap { .. })
    ));
}

#[test]
fn shedding_drops_queued_work_from_outliers_only() {
    let mut lm = lm(
        4,
        1,
        QueueableConfig {
            shed_sigma: Some(0.5),
            ..QueueableConfig::default()
        },
    );
    let qs: Vec<_> = (1..=6)
        .map(|i| (task(i, 1, 10, TaskKind::Queueable), 0))
        .chain([(task(7, 1, 10, TaskKind::Queueable), 1)])
        .collect();
    send(&mut lm, 0, 1, &qs);
    started(&mut lm, 1, 0, 0);
    started(&mut lm, 7, 1, 0);
    let fx = lm.tick(Micros::from_secs(20));
    assert!(!fx.kills.is_empty());
    assert!(fx.kills.iter().all(|k| k.node == NodeId(0)));
    // Latest queued first; the running task is never shed.
    assert_eq!(fx.kills[0].task, TaskId::new(6, 0));
    assert!(fx.kills.iter().all(|k| k.task != TaskId::new(1, 0)));
}

fn finished(lm: &mut LocalMaster, id: u64, node: u32, at: u64) -> LmEffects {
    lm.handle_worker_report(
        Micros(at),
        WorkerReport::Finished {
            used: None,
            attempt: 1,
            node: NodeId(node),
            task: TaskId::new(id, 0),
            at: Micros(at),
        },
    )
    .unwrap()
}

fn job_task(job: u64, index: u32, kind: TaskKind) -> TaskSpec {
    TaskSpec::short(
        TaskId::new(job, index),
        Resources::cores(1, 1),
        Micros::from_secs(10),
    )
    .with_kind(kind)
}

fn outcomes(fx: LmEffects) -> Vec<LaunchOutcome> {
    fx.response
        .unwrap()
        .outcomes
        .into_iter()
        .map(|(_, o)| o)
        .collect()
}

#[test]
fn the_lm_enforces_the_absolute_quota_per_job_on_its_own_counts() {
    let quota = "max:2".parse().unwrap();
    let mut lm = lm(
        2,
        1,
        QueueableConfig {
            quota,
            ..QueueableConfig::default()
        },
    );
    let q = |job, i| (job_task(job, i, TaskKind::Queueable), 0);
    let got = outcomes(send(&mut lm, 0, 1, &[q(1, 0), q(1, 1), q(1, 2), q(2, 0)]));
    assert!(matches!(got[0], LaunchOutcome::Launched { .. }));
    assert!(matches!(got[1], LaunchOutcome::Launched { .. }));
    assert_eq!(
        got[2],
        LaunchOutcome::Rejected(RejectReason::OverQueueableQuota {
            job: common::JobId(1),
            limit: 2
        })
    );
    assert!(
        matches!(got[3], LaunchOutcome::Launched { .. }),
        "other jobs are not held back"
    );
    let jobs = lm.snapshot(Micros(1)).jobs;
    assert_eq!(jobs[0].0, common::JobId(1));
    assert_eq!(jobs[0].1.queueable, 2);
    // Queued and running both count; a finish makes room again.
    lm.handle_worker_report(
        Micros(2),
        WorkerReport::Started {
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(1, 0),
            at: Micros(2),
        },
    )
    .unwrap();
    let got = outcomes(send(&mut lm, 3, 2, &[q(1, 2)]));
    assert!(matches!(got[0], LaunchOutcome::Rejected(_)));
    finished(&mut lm, 1, 0, 4);
    assert_eq!(lm.job_containers(common::JobId(1)).queueable, 1);
    let got = outcomes(send(&mut lm, 5, 3, &[q(1, 2)]));
    assert!(matches!(got[0], LaunchOutcome::Launched { .. }));
}

#[test]
fn promotion_takes_the_longest_running_and_protects_it_from_reclaim() {
    let mut lm = lm(
        1,
        3,
        QueueableConfig {
            promotion: Some(PromotionPolicy {
                after: Micros::from_secs(5),
                per_tick: 1,
            }),
            ..QueueableConfig::default()
        },
    );
    let qs: Vec<_> = (1..=3)
        .map(|i| (task(i, 1, 100, TaskKind::Queueable), 0))
        .collect();
    send(&mut lm, 0, 1, &qs);
    started(&mut lm, 2, 0, 0);
    started(&mut lm, 1, 0, 1_000_000);
    started(&mut lm, 3, 0, 8_000_000);
    // At 10 s tasks 2 (10 s) and 1 (9 s) are due; one per tick, longest first.
    let fx = lm.tick(Micros::from_secs(10));
    assert_eq!(fx.promoted.len(), 1);
    assert_eq!(fx.promoted[0].task, TaskId::new(2, 0));
    assert_eq!(
        lm.running()[&TaskId::new(2, 0)].task.kind,
        TaskKind::Guaranteed
    );
    let job2 = lm.job_containers(common::JobId(2));
    assert_eq!((job2.queueable, job2.guaranteed), (0, 1));
    // The promoted core is no longer reclaimable: the GMs see two cores.
    assert_eq!(lm.snapshot(Micros(11)).free[0], Resources::cores(2, 1023));
    // A three-core GUARANTEED task cannot have it.
    let got = outcomes(send(
        &mut lm,
        12,
        2,
        &[(task(9, 3, 5, TaskKind::Guaranteed), 0)],
    ));
    assert!(matches!(
        got[0],
        LaunchOutcome::Rejected(RejectReason::InsufficientResources { .. })
    ));
    // A two-core one kills both other QUEUEABLE tasks, never the promoted one.
    let fx = send(&mut lm, 13, 3, &[(task(10, 2, 5, TaskKind::Guaranteed), 0)]);
    let mut killed: Vec<TaskId> = fx.kills.iter().map(|k| k.task).collect();
    killed.sort();
    assert_eq!(killed, vec![TaskId::new(1, 0), TaskId::new(3, 0)]);
    // Finishing releases it as GUARANTEED work; nothing leaks.
    finished(&mut lm, 2, 0, 20);
    assert_eq!(lm.job_containers(common::JobId(2)).guaranteed, 0);
}

#[test]
fn promotion_on_request_needs_a_running_queueable_task() {
    let mut lm = lm(1, 1, QueueableConfig::default());
    send(&mut lm, 0, 1, &[(task(1, 1, 10, TaskKind::Queueable), 0)]);
    assert_eq!(
        lm.promote(Micros(1), TaskId::new(1, 0)).unwrap_err(),
        PromoteRefusal::NotRunning(TaskId::new(1, 0)),
        "a queued task is not running yet"
    );
    started(&mut lm, 1, 0, 2);
    let fx = lm.promote(Micros(3), TaskId::new(1, 0)).unwrap();
    assert_eq!(fx.promoted.len(), 1);
    assert_eq!(
        lm.promote(Micros(4), TaskId::new(1, 0)).unwrap_err(),
        PromoteRefusal::NotQueueable(TaskId::new(1, 0))
    );
}
