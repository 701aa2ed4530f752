//! The rules that keep preemption from churning (issue 37 item 3), on one LM core:
//! a protected share is never preempted, a task in its cool-down (or at the
//! per-task cap) is never chosen, the rate limit holds, and the GM does not preempt
//! for a task whose queue would be over its share once it runs.

use common::fairness::{FairnessConfig, SharePolicy};
use common::messages::{
    LaunchBatch, LaunchRequest, Placement, PreemptOutcome, PreemptRefusal, PreemptRequest,
    WorkerReport,
};
use common::preemption::PreemptionRules;
use common::reasons::PendingReason;
use common::{GmId, LmId, Micros, NodeId, QueueId, Resources, TaskId, TaskSpec};
use global_master::core::{DecisionOutcome, GlobalMaster, GmConfig};
use local_master::{LmConfig, LocalMaster};
use std::sync::Arc;
use tests::ClusterBuilder;

fn shares(spec: &str, rules: PreemptionRules) -> Arc<FairnessConfig> {
    Arc::new(
        FairnessConfig::parse(spec, SharePolicy::Drf, 2)
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

/// One LM with `nodes` one-core nodes in GM 0's partition (2 GMs).
fn lm(nodes: usize, fairness: &Arc<FairnessConfig>) -> LocalMaster {
    let cluster = ClusterBuilder::new(1, 1, nodes).build();
    let mut spec = cluster.lms[0].clone();
    let all: Vec<_> = spec.partitions.iter().flatten().copied().collect();
    spec.partitions = vec![all, Vec::new()];
    LocalMaster::new(&spec, 2, LmConfig::default(), Micros(0)).with_fairness(fairness.clone())
}

/// Starts `task` on node `node` at `at`.
fn start(lm: &mut LocalMaster, seq: u64, node: u32, task: TaskSpec, at: Micros) {
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
    lm.handle_launch_batch(at, batch).expect("our LM");
    lm.handle_worker_report(
        at,
        WorkerReport::Started {
            attempt: 1,
            node: NodeId(node),
            task: id,
            at,
        },
    )
    .expect("launched");
}

fn ask(lm: &mut LocalMaster, job: u64, at: Micros) -> PreemptOutcome {
    let request = PreemptRequest {
        gm: GmId(1),
        life: 0,
        lm: LmId(0),
        task: task(job, 1),
        victim: QueueId(0),
        seq: 1,
    };
    let fx = lm.handle_preempt(at, request).expect("our LM");
    fx.preempt_response.expect("an answer").outcome
}

const UNBOUNDED: PreemptionRules = PreemptionRules::UNBOUNDED;

#[test]
fn a_protected_share_is_never_preempted() {
    // hog's share is 30 % of 4 nodes; it runs 3 (75 %). Without protection (or with
    // half of its share protected, 15 %) the LM takes it down to 25 %; with all of
    // its share protected, to 50 % and no lower.
    for (protected, preempted) in [(0.0, 2), (0.5, 2), (1.0, 1)] {
        let rules = PreemptionRules {
            protected_fraction: protected,
            ..UNBOUNDED
        };
        let f = shares("hog:0.3:0,fair:0.7:1", rules);
        let mut lm = lm(4, &f);
        for n in 0..3 {
            start(&mut lm, n, n as u32, task(100 + n, 0), Micros(1));
        }
        start(&mut lm, 3, 3, task(200, 1), Micros(1));
        let mut launched = 0;
        for job in 1..=3 {
            if matches!(
                ask(&mut lm, job, Micros(10)),
                PreemptOutcome::Launched { .. }
            ) {
                launched += 1;
            }
        }
        assert_eq!(launched, preempted, "protected fraction {protected}");
        let protected_millis = protected * 0.3 * 4000.0;
        assert!(
            lm.usage(QueueId(0)).cpu_millis as f64 >= protected_millis,
            "protected fraction {protected}: hog keeps its protected share"
        );
    }
}

#[test]
fn a_task_in_cool_down_or_at_the_cap_is_not_chosen() {
    let rules = PreemptionRules {
        cooldown: Micros::from_secs(60),
        max_per_task: 2,
        ..UNBOUNDED
    };
    let f = shares("hog:0.25:0,fair:0.75:1", rules);
    let mut lm = lm(2, &f);
    // Node 0: a task preempted once, restarted at 100 s (least work lost: the
    // choice without the rules). Node 1: a task never preempted, running since 0.
    let twice_before = TaskSpec {
        preemptions: 1,
        ..task(100, 0)
    };
    start(&mut lm, 0, 0, twice_before, Micros::from_secs(100));
    start(&mut lm, 1, 1, task(101, 0), Micros::ZERO);
    let PreemptOutcome::Launched { preempted, .. } = ask(&mut lm, 1, Micros::from_secs(120)) else {
        panic!("the task outside its cool-down frees the room");
    };
    assert_eq!(
        preempted,
        vec![TaskId::new(101, 0)],
        "not the one in cool-down"
    );
    // Past its cool-down it may go; its count travels with it to its GM.
    let outcome = ask(&mut lm, 2, Micros::from_secs(160));
    let PreemptOutcome::Launched { preempted, .. } = outcome else {
        panic!("past its cool-down: {outcome:?}");
    };
    assert_eq!(preempted, vec![TaskId::new(100, 0)]);
    let fx = lm
        .handle_worker_report(
            Micros::from_secs(161),
            WorkerReport::Killed {
                attempt: 1,
                node: NodeId(0),
                task: TaskId::new(100, 0),
                at: Micros::from_secs(161),
            },
        )
        .expect("a pending kill");
    assert_eq!(fx.requeues[0].tasks[0].0.preemptions, 2);
    // At the cap (2) it is never chosen again, however long it has run.
    let f = shares("hog:0.25:0,fair:0.75:1", rules);
    let mut lm = self::lm(1, &f);
    let capped = TaskSpec {
        preemptions: 2,
        ..task(300, 0)
    };
    start(&mut lm, 0, 0, capped, Micros::ZERO);
    assert_eq!(
        ask(&mut lm, 3, Micros::from_secs(10_000)),
        PreemptOutcome::Refused(PreemptRefusal::NothingToFree)
    );
    assert_eq!(lm.running().len(), 1, "nothing was touched");
}

#[test]
fn the_rate_limit_holds() {
    let rules = PreemptionRules {
        rate_limit: 2,
        rate_window: Micros::from_secs(60),
        ..UNBOUNDED
    };
    let f = shares("hog:0.1:0,fair:0.9:1", rules);
    let mut lm = lm(8, &f);
    for n in 0..8 {
        start(&mut lm, n, n as u32, task(100 + n, 0), Micros(1));
    }
    let mut outcomes = Vec::new();
    for (job, secs) in [(1, 10), (2, 20), (3, 30), (4, 69), (5, 70), (6, 80)] {
        outcomes.push(ask(&mut lm, job, Micros::from_secs(secs)));
    }
    let launched: Vec<bool> = outcomes
        .iter()
        .map(|o| matches!(o, PreemptOutcome::Launched { .. }))
        .collect();
    // Two per 60 s: at 10 and 20; refused at 30 and 69; at 70 the first left the
    // window, at 80 the second.
    assert_eq!(launched, [true, true, false, false, true, true]);
    assert_eq!(
        outcomes[2],
        PreemptOutcome::Refused(PreemptRefusal::RateLimited)
    );
}

#[test]
fn the_gm_does_not_preempt_for_a_task_its_queue_could_not_keep() {
    // fair's share is 20 % of 8 nodes and it runs 1 (12.5 %): one more task would
    // take it over its share (and make it the next victim). hog runs 7 (87.5 %).
    for (within_share_after, preempts) in [(true, false), (false, true)] {
        let rules = PreemptionRules {
            within_share_after,
            grace: Micros::ZERO,
            ..PreemptionRules::default()
        };
        let f = shares("hog:0.5:0,fair:0.2:1", rules);
        let mut lm = lm(8, &f);
        for n in 0..7 {
            start(&mut lm, n, n as u32, task(100 + n, 0), Micros(1));
        }
        start(&mut lm, 7, 7, task(200, 1), Micros(1));
        let mut gm = GlobalMaster::new(GmConfig {
            fairness: Some(f.clone()),
            ..GmConfig::new(GmId(1), 2, 1)
        });
        gm.apply_snapshot(Micros(5), &lm.snapshot(Micros(5)));
        gm.submit(Micros(5), task(1, 1));
        let out = gm.schedule(Micros(5));
        assert_eq!(!out.preempts.is_empty(), preempts, "{within_share_after}");
        if !preempts {
            assert_eq!(
                out.decisions[0].outcome,
                DecisionOutcome::Requeued(PendingReason::OverShare)
            );
        }
    }
}
