//! Priority preemption's own budget (issue 37 item 4c): a preempting class displacing
//! a lower class of its own queue is not bounded by fairness's rate limit, per-task
//! cap or grace (none by default, `PreemptionRules::for_priority`), and does not
//! spend fairness's budget; the cool-down, its own knobs and fairness's limits
//! across queues still hold.

use common::fairness::{FairnessConfig, SharePolicy};
use common::messages::{
    LaunchBatch, LaunchRequest, Placement, PreemptOutcome, PreemptRefusal, PreemptRequest,
    WorkerReport,
};
use common::preemption::PreemptionRules;
use common::priority::PriorityClasses;
use common::{GmId, LmId, Micros, NodeId, QueueId, Resources, TaskId, TaskSpec};
use global_master::core::{DecisionOutcome, GlobalMaster, GmConfig};
use local_master::{LmConfig, LocalMaster};
use std::sync::Arc;
use tests::ClusterBuilder;

const LOW: u16 = 0;
const HIGH: u16 = 10;

fn task(job: u64, queue: u16, priority: u16) -> TaskSpec {
    TaskSpec {
        priority,
        ..TaskSpec::short(
            TaskId::new(job, 0),
            Resources::cores(1, 1),
            Micros::from_secs(1000),
        )
        .with_queue(QueueId(queue))
    }
}

/// Queues a (0) and b (1), half each, under `rules`.
fn shares(rules: PreemptionRules) -> Arc<FairnessConfig> {
    let f = FairnessConfig::parse("a:0.5:0,b:0.5:0", SharePolicy::Drf, 1).expect("queues");
    Arc::new(f.with_rules(rules))
}

/// One LM with `nodes` one-core nodes (1 GM), `tasks[i]` started on node i at `at`.
fn lm(fairness: &Arc<FairnessConfig>, nodes: usize, tasks: &[TaskSpec], at: Micros) -> LocalMaster {
    let cluster = ClusterBuilder::new(1, 1, nodes).build();
    let mut lm = LocalMaster::new(&cluster.lms[0], 1, LmConfig::default(), Micros(0))
        .with_fairness(fairness.clone());
    for (i, task) in tasks.iter().enumerate() {
        let node = NodeId(i as u32);
        let batch = LaunchBatch {
            gm: GmId(0),
            life: 0,
            lm: LmId(0),
            seq: i as u64 + 1,
            resend: false,
            requests: vec![LaunchRequest {
                task: task.clone(),
                node,
                placement: Placement::Internal,
            }],
        };
        lm.handle_launch_batch(at, batch).expect("our LM");
        let started = WorkerReport::Started {
            attempt: 1,
            node,
            task: task.id,
            at,
        };
        lm.handle_worker_report(at, started).expect("launched");
    }
    lm
}

/// Asks `lm` at `now` to preempt tasks of `victim` for `task`.
fn ask(lm: &mut LocalMaster, now: Micros, task: TaskSpec, victim: u16) -> PreemptOutcome {
    let request = PreemptRequest {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        task,
        victim: QueueId(victim),
        seq: 1,
    };
    let fx = lm.handle_preempt(now, request).expect("our LM");
    fx.preempt_response.expect("an answer").outcome
}

fn launched(outcome: &PreemptOutcome) -> bool {
    matches!(outcome, PreemptOutcome::Launched { .. })
}

#[test]
fn a_high_task_displaces_a_low_task_of_its_queue_beyond_the_fairness_rate_limit() {
    // Fairness may take one task of a queue per minute; a runs four low tasks.
    let rules = PreemptionRules {
        rate_limit: 1,
        hold: Micros::ZERO,
        ..PreemptionRules::default()
    };
    let f = shares(rules);
    let lows: Vec<_> = (0..4).map(|j| task(10 + j, 0, LOW)).collect();
    let mut lm = lm(&f, 4, &lows, Micros(1));
    for job in 1..=4 {
        let outcome = ask(&mut lm, Micros(2 + job), task(job, 0, HIGH), 0);
        assert!(launched(&outcome), "high task {job}: {outcome:?}");
    }
    // Its own knob bounds it when set.
    let f = shares(PreemptionRules {
        priority_rate_limit: 1,
        ..rules
    });
    let mut lm = self::lm(&f, 4, &lows, Micros(1));
    assert!(launched(&ask(&mut lm, Micros(2), task(1, 0, HIGH), 0)));
    assert_eq!(
        ask(&mut lm, Micros(3), task(2, 0, HIGH), 0),
        PreemptOutcome::Refused(PreemptRefusal::RateLimited)
    );
}

#[test]
fn priority_preemptions_spend_none_of_fairness_budget_which_still_bounds_across_queues() {
    // b (over its share: 4 of 5 nodes) displaces one of its low tasks for a high
    // one; then a (under its share) may still take one of b's tasks by fairness,
    // but not a second within the window: fairness's limit holds across queues,
    // whatever the class of the task that asks.
    let rules = PreemptionRules {
        rate_limit: 1,
        hold: Micros::ZERO,
        ..PreemptionRules::default()
    };
    let f = shares(rules);
    let mut running: Vec<_> = (0..4).map(|j| task(10 + j, 1, LOW)).collect();
    running.push(task(20, 0, LOW));
    let mut lm = lm(&f, 5, &running, Micros(1));
    assert!(launched(&ask(&mut lm, Micros(2), task(1, 1, HIGH), 1)));
    let outcome = ask(&mut lm, Micros(3), task(2, 0, HIGH), 1);
    assert!(launched(&outcome), "a's fairness preemption: {outcome:?}");
    assert_eq!(
        ask(&mut lm, Micros(4), task(3, 0, HIGH), 1),
        PreemptOutcome::Refused(PreemptRefusal::RateLimited),
        "fairness's own limit"
    );
    assert_eq!(lm.usage(QueueId(1)), Resources::cores(3, 3));
}

#[test]
fn priority_preemption_keeps_the_cool_down_but_not_fairness_per_task_cap() {
    // The low task was preempted 3 times (fairness's cap) and restarted at 100 s.
    let rules = PreemptionRules {
        cooldown: Micros::from_secs(60),
        ..PreemptionRules::default()
    };
    let f = shares(rules);
    let low = TaskSpec {
        preemptions: 3,
        ..task(10, 0, LOW)
    };
    let restarted = Micros::from_secs(100);
    let mut lm = lm(&f, 1, &[low], restarted);
    assert_eq!(
        ask(&mut lm, Micros::from_secs(130), task(1, 0, HIGH), 0),
        PreemptOutcome::Refused(PreemptRefusal::NothingToFree),
        "in its cool-down"
    );
    let outcome = ask(&mut lm, Micros::from_secs(161), task(1, 0, HIGH), 0);
    assert!(launched(&outcome), "after it: {outcome:?}");
}

#[test]
fn a_high_task_preempts_at_once_whatever_the_fairness_grace() {
    // A waits for no room to free by itself: the grace is fairness's.
    let rules = PreemptionRules {
        grace: Micros::from_secs(60),
        ..PreemptionRules::default()
    };
    let f = shares(rules);
    let mut lm = lm(&f, 1, &[task(10, 0, LOW)], Micros(1));
    let specs = ["low:0".to_owned(), "high:10:preempting".to_owned()];
    let classes = Arc::new(PriorityClasses::parse(&specs, None, 0).expect("classes"));
    let mut gm = GlobalMaster::new(GmConfig {
        priorities: classes,
        fairness: Some(f),
        ..GmConfig::new(GmId(0), 1, 1)
    });
    gm.apply_snapshot(Micros(2), &lm.snapshot(Micros(2)));
    gm.submit(Micros(2), task(1, 0, HIGH));
    let out = gm.schedule(Micros(3));
    assert_eq!(
        out.decisions[0].outcome,
        DecisionOutcome::Preempting {
            lm: LmId(0),
            victim: QueueId(0)
        }
    );
}

#[test]
fn a_high_task_behind_a_preemption_in_flight_asks_once_the_answer_comes() {
    // Two high tasks, one LM running two low tasks of their queue: the GM asks
    // for the first; the second waits for that request's slot (not for room to
    // free by itself, which takes a low task's whole run) and asks as soon as
    // the answer frees it.
    let f = shares(PreemptionRules::default());
    let mut lm = lm(&f, 2, &[task(10, 0, LOW), task(11, 0, LOW)], Micros(1));
    let specs = ["low:0".to_owned(), "high:10:preempting".to_owned()];
    let classes = Arc::new(PriorityClasses::parse(&specs, None, 0).expect("classes"));
    let mut gm = GlobalMaster::new(GmConfig {
        priorities: classes,
        fairness: Some(f),
        ..GmConfig::new(GmId(0), 1, 1)
    });
    gm.apply_snapshot(Micros(2), &lm.snapshot(Micros(2)));
    gm.submit(Micros(2), task(1, 0, HIGH));
    gm.submit(Micros(2), task(2, 0, HIGH));
    let out = gm.schedule(Micros(3));
    assert_eq!(out.preempts.len(), 1, "one request in flight per LM");
    let request = out.preempts.into_iter().next().expect("a preemption");
    let fx = lm.handle_preempt(Micros(4), request).expect("our LM");
    let answer = fx.preempt_response.expect("an answer");
    assert!(launched(&answer.outcome), "{:?}", answer.outcome);
    gm.handle_preempt_response(Micros(5), &answer);
    let out = gm.schedule(Micros(6));
    let asked: Vec<TaskId> = out.preempts.iter().map(|p| p.task.id).collect();
    assert_eq!(asked, vec![TaskId::new(2, 0)], "the second high task asks");
    let fx = lm
        .handle_preempt(Micros(7), out.preempts[0].clone())
        .expect("our LM");
    let outcome = fx.preempt_response.expect("an answer").outcome;
    assert!(launched(&outcome), "{outcome:?}");
}
