//! Fairness (Megha Algorithm 2): contention-only preemption, verified by the LM.

use common::cluster::ClusterSpec;
use common::fairness::{FairnessConfig, SharePolicy};
use common::messages::{PreemptOutcome, PreemptRefusal, PreemptRequest, WorkerReport};
use common::reasons::PendingReason;
use common::{GmId, LmId, Micros, QueueId, Resources, TaskId, TaskSpec};
use global_master::core::{DecisionOutcome, GlobalMaster, GmConfig};
use loadgen::sim::workload::{self, ConstraintMode, WorkloadOptions};
use loadgen::sim::{self, SchedulerKind, SimConfig};
use local_master::{LmConfig, LocalMaster};
use proptest::prelude::*;
use std::sync::Arc;
use tests::{trace, ClusterBuilder};

/// Shares under the default rules, but without the preemption hold: these tests
/// follow Algorithm 2's immediate round trip (the hold has `preemption_hold.rs`).
fn shares(spec: &str, gms: u16) -> Arc<FairnessConfig> {
    let rules = common::preemption::PreemptionRules {
        hold: Micros::ZERO,
        ..Default::default()
    };
    Arc::new(
        FairnessConfig::parse(spec, SharePolicy::Drf, gms)
            .expect("valid queue spec")
            .with_rules(rules),
    )
}

fn queued_task(job: u64, queue: u16, secs: u64) -> TaskSpec {
    TaskSpec::short(
        TaskId::new(job, 0),
        Resources::cores(1, 1),
        Micros::from_secs(secs),
    )
    .with_queue(QueueId(queue))
}

/// One LM with `nodes` one-core nodes, all in GM 0's partition (2 GMs), with shares.
fn lm(nodes: usize, fairness: &Arc<FairnessConfig>) -> LocalMaster {
    let cluster = ClusterBuilder::new(1, 1, nodes).build();
    let mut spec = cluster.lms[0].clone();
    let all: Vec<_> = spec.partitions.iter().flatten().copied().collect();
    spec.partitions = vec![all, Vec::new()];
    LocalMaster::new(&spec, 2, LmConfig::default(), Micros(0)).with_fairness(fairness.clone())
}

fn gm(id: u16, fairness: &Arc<FairnessConfig>) -> GlobalMaster {
    GlobalMaster::new(GmConfig {
        fairness: Some(fairness.clone()),
        ..GmConfig::new(GmId(id), 2, 1)
    })
}

/// Fills the LM with `n` tasks of `queue` launched by GM `gm`.
fn fill(lm: &mut LocalMaster, gm: &mut GlobalMaster, queue: u16, n: u64) {
    let snapshot = lm.snapshot(Micros(0));
    gm.apply_snapshot(Micros(0), &snapshot);
    for job in 0..n {
        gm.submit(Micros(0), queued_task(100 + job, queue, 1000));
    }
    let out = gm.schedule(Micros(1));
    for batch in out.batches {
        let fx = lm.handle_launch_batch(Micros(2), batch).expect("our LM");
        for start in fx.starts {
            lm.handle_worker_report(
                Micros(3),
                WorkerReport::Started {
                    attempt: 1,
                    node: start.node,
                    task: start.task.id,
                    at: Micros(3),
                },
            )
            .expect("launched");
        }
    }
}

#[test]
fn a_queue_under_its_share_preempts_the_largest_violator_and_the_lm_frees_exactly_enough() {
    let f = shares("hog:0.5:0,fair:0.5:1", 2);
    let mut lm = lm(4, &f);
    let mut gm0 = gm(0, &f);
    let mut gm1 = gm(1, &f);
    fill(&mut lm, &mut gm0, 0, 4); // hog: 100 % > 50 %
    let snapshot = lm.snapshot(Micros(10));
    gm1.apply_snapshot(Micros(10), &snapshot);
    gm1.submit(Micros(10), queued_task(1, 1, 5));
    let out = gm1.schedule(Micros(10));
    assert_eq!(
        out.decisions[0].outcome,
        DecisionOutcome::Preempting {
            lm: LmId(0),
            victim: QueueId(0)
        }
    );
    let request = out.preempts.into_iter().next().expect("one preemption");
    let fx = lm.handle_preempt(Micros(11), request).expect("our LM");
    let response = fx.preempt_response.expect("an answer");
    let PreemptOutcome::Launched { node, preempted } = &response.outcome else {
        panic!("refused: {:?}", response.outcome);
    };
    assert_eq!(preempted.len(), 1, "one one-core task frees one core");
    assert_eq!(fx.kills.len(), 1);
    assert_eq!(fx.starts.len(), 1);
    assert_eq!(fx.starts[0].node, *node);
    assert_eq!(lm.free().iter().filter(|f| f.cpu_millis > 0).count(), 0);
    assert!(gm1.handle_preempt_response(Micros(12), &response));
    // The victim is requeued only once its worker confirms the kill.
    assert!(fx.requeues.is_empty());
    let killed = WorkerReport::Killed {
        attempt: 1,
        node: fx.kills[0].node,
        task: fx.kills[0].task,
        at: Micros(12),
    };
    let fx = lm
        .handle_worker_report(Micros(12), killed)
        .expect("pending kill");
    assert_eq!(fx.requeues.len(), 1);
    assert_eq!(fx.requeues[0].gm, GmId(0));
    gm0.requeue_preempted(Micros(13), &fx.requeues[0]);
    assert_eq!(gm0.queues().len(), 1);
}

#[test]
fn a_queue_over_its_share_never_preempts() {
    let f = shares("hog:0.5:0,fair:0.5:1", 2);
    let mut lm = lm(4, &f);
    let mut gm0 = gm(0, &f);
    fill(&mut lm, &mut gm0, 0, 4);
    let snapshot = lm.snapshot(Micros(10));
    gm0.apply_snapshot(Micros(10), &snapshot);
    gm0.submit(Micros(10), queued_task(1, 0, 5));
    let out = gm0.schedule(Micros(10));
    assert!(out.preempts.is_empty());
    assert_eq!(
        out.decisions[0].outcome,
        DecisionOutcome::Requeued(PendingReason::OverShare)
    );
    assert_eq!(gm0.stats().preempt_attempts, 0);
}

#[test]
fn the_lm_refuses_when_its_authoritative_state_shows_the_victim_within_share() {
    let f = shares("hog:0.5:0,fair:0.5:1", 2);
    let mut lm = lm(4, &f);
    let mut gm0 = gm(0, &f);
    let mut gm1 = gm(1, &f);
    fill(&mut lm, &mut gm0, 0, 4);
    // GM 1 sees the hog at 100 %...
    let stale = lm.snapshot(Micros(10));
    gm1.apply_snapshot(Micros(10), &stale);
    // ...but two hog tasks have finished since.
    for job in [100, 101] {
        let node = lm.running()[&TaskId::new(job, 0)].node;
        lm.handle_worker_report(
            Micros(20),
            WorkerReport::Finished {
                used: None,
                attempt: 1,
                node,
                task: TaskId::new(job, 0),
                at: Micros(20),
            },
        )
        .expect("running");
    }
    // Fill the freed room with "fair" work so that GM 1 has no free node either.
    for job in [200, 201] {
        let node = (0..4)
            .map(common::NodeId)
            .find(|n| lm.free()[n.index()].cpu_millis > 0)
            .expect("a free node");
        let batch = common::messages::LaunchBatch {
            gm: GmId(1),
            life: 0,
            lm: LmId(0),
            seq: job,
            resend: false,
            requests: vec![common::messages::LaunchRequest {
                task: queued_task(job, 1, 100),
                node,
                placement: common::messages::Placement::Repartition,
            }],
        };
        lm.handle_launch_batch(Micros(21), batch).expect("our LM");
    }
    let request = PreemptRequest {
        gm: GmId(1),
        life: 0,
        lm: LmId(0),
        task: queued_task(1, 1, 5),
        victim: QueueId(0),
        seq: 1,
    };
    let fx = lm.handle_preempt(Micros(30), request).expect("our LM");
    let response = fx.preempt_response.expect("an answer");
    assert!(matches!(
        response.outcome,
        PreemptOutcome::Refused(PreemptRefusal::VictimNotOverShare { .. })
    ));
    assert!(fx.kills.is_empty() && fx.starts.is_empty());
    assert_eq!(lm.running().len(), 4, "nothing was touched");
}

fn run(
    cluster: &ClusterSpec,
    jobs: &[(u32, Vec<u32>)],
    fairness: Arc<FairnessConfig>,
    heartbeat: Micros,
    seed: u64,
) -> sim::SimOutcome {
    let jobs = workload::build(
        &trace(jobs),
        &WorkloadOptions {
            default_task: Resources::cores(1, 64),
            constraints: ConstraintMode::None,
            seed,
        },
    );
    let config = SimConfig {
        scheduler: SchedulerKind::Megha,
        heartbeat,
        fairness: Some(fairness),
        seed,
        ..SimConfig::default()
    };
    sim::run(cluster, &jobs, &config, &mut |_, _| {})
}

#[test]
fn a_starved_queue_gets_its_share_within_a_heartbeat_and_its_preemption_round_trips() {
    // 8 one-core nodes. Queue "hog" (GM 0) fills them with 100 s tasks at t = 0;
    // queue "late" (GM 1, share 50 %) submits 4 one-second tasks at t = 1 s.
    let cluster = ClusterSpec::generate(2, 1, 4, Resources::cores(1, 1024), 3);
    let f = shares("hog:0.5:0,late:0.5:1", 2);
    let heartbeat = Micros::from_secs(2);
    let outcome = run(
        &cluster,
        &[(0, vec![100_000; 8]), (1000, vec![1000; 4])],
        f,
        heartbeat,
        3,
    );
    let late: Vec<_> = outcome
        .records
        .iter()
        .filter(|r| r.queue == QueueId(1))
        .collect();
    assert_eq!(late.len(), 4);
    // Bound: the GM learns the hog's usage within one heartbeat period; then one
    // preemption per LM is in flight at a time, each a GM -> LM -> worker round trip
    // (3 one-way delays of 0.5 ms) plus processing, for each of the 4 tasks.
    let per_preemption = Micros(3 * 500 + 200);
    let bound = heartbeat + Micros(4 * per_preemption.0);
    for r in &late {
        let alloc = r.allocation().expect("started");
        assert!(alloc <= bound, "allocation {alloc} above the bound {bound}");
    }
    assert_eq!(outcome.counters.preemptions, 4);
    assert_eq!(outcome.counters.over_commits, 0);
    assert!(outcome.drained);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn without_contention_nothing_is_ever_preempted(
        a in 0.05f64..0.9,
        jobs in prop::collection::vec((0u32..5_000, prop::collection::vec(1u32..2_000, 1..4)), 1..8),
        seed in any::<u64>(),
    ) {
        // More nodes than tasks: every task finds room at once.
        let cluster = ClusterSpec::generate(2, 2, 10, Resources::cores(1, 1024), seed);
        let spec = format!("a:{a}:0,b:{}:1", (1.0 - a).max(0.01));
        let f = shares(&spec, 2);
        let outcome = run(&cluster, &jobs, f, Micros::from_secs(10), seed);
        prop_assert_eq!(outcome.counters.preempt_attempts, 0);
        prop_assert_eq!(outcome.counters.preemptions, 0);
    }

    #[test]
    fn preemption_under_stale_views_never_over_commits_or_loses_a_task(
        gms in 2u16..4,
        per_partition in 1usize..4,
        heartbeat_ms in prop::sample::select(vec![1u64, 500, 5_000, 30_000]),
        jobs in prop::collection::vec((0u32..20_000, prop::collection::vec(500u32..20_000, 1..10)), 2..16),
        seed in any::<u64>(),
    ) {
        let cluster = ClusterSpec::generate(gms, 2, per_partition, Resources::cores(1, 1024), seed);
        let share = 1.0 / gms as f64;
        let spec: Vec<String> = (0..gms).map(|g| format!("q{g}:{share}:{g}")).collect();
        let f = shares(&spec.join(","), gms);
        let outcome = run(&cluster, &jobs, f, Micros::from_millis(heartbeat_ms), seed);
        prop_assert_eq!(outcome.counters.over_commits, 0);
        prop_assert!(outcome.drained, "resources leaked");
        for r in &outcome.records {
            prop_assert!(r.finish.is_some(), "task {}.{} never finished", r.job, r.index);
            prop_assert_eq!(r.starts, 1 + r.preemptions);
        }
    }
}

/// The services' transport around a preemption: a request that cannot be delivered
/// puts the task back in its queue (and frees the LM's preemption slot, so the next
/// pass asks again); a request applied whose answer was lost is resent, and the LM's
/// `Duplicate` answer counts as the launch it was.
#[test]
fn an_undelivered_preemption_requeues_and_a_resent_one_is_not_applied_twice() {
    let f = shares("hog:0.5:0,fair:0.5:1", 2);
    let mut lm = lm(4, &f);
    let mut gm0 = gm(0, &f);
    let mut gm1 = gm(1, &f);
    fill(&mut lm, &mut gm0, 0, 4);
    gm1.apply_snapshot(Micros(10), &lm.snapshot(Micros(10)));
    let task = queued_task(1, 1, 5);
    gm1.submit(Micros(10), task.clone());
    let out = gm1.schedule(Micros(10));
    assert_eq!(out.preempts.len(), 1);
    assert_eq!(gm1.outstanding(), 1);

    // Undelivered: back in the queue with the reason, asked again on the next pass.
    assert!(gm1.abandon_preempt(Micros(11), LmId(0), task.id));
    assert!(
        !gm1.abandon_preempt(Micros(11), LmId(0), task.id),
        "only once"
    );
    assert_eq!(gm1.outstanding(), 0);
    let waiting: Vec<_> = gm1.queues().iter().collect();
    assert_eq!(waiting.len(), 1);
    assert_eq!(
        waiting[0].reason,
        Some(PendingReason::LmUnreachable { lm: LmId(0) })
    );
    let again = gm1.schedule(Micros(12));
    let request = again.preempts.into_iter().next().expect("asked again");

    // Applied, answer lost, resent: the LM does not preempt twice.
    let first = lm
        .handle_preempt(Micros(13), request.clone())
        .expect("ours");
    assert_eq!(first.kills.len(), 1);
    let second = lm.handle_preempt(Micros(14), request).expect("ours");
    assert!(second.kills.is_empty() && second.starts.is_empty());
    let response = second.preempt_response.expect("an answer");
    assert_eq!(
        response.outcome,
        PreemptOutcome::Refused(PreemptRefusal::Duplicate)
    );
    assert!(gm1.handle_preempt_response(Micros(15), &response));
    assert_eq!(gm1.outstanding(), 0);
    assert!(gm1.queues().is_empty(), "the task is running, not queued");
}
