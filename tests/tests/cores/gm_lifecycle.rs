//! The task lifecycle after placement, through the cores' `step` only: a GM core and
//! an LM core (and, for two GMs, a second GM core) exchange their messages in a small
//! harness; workers are simulated by feeding the LM their reports.
//!
//! - retries: a failed (or lost) task runs again after its backoff (the GM names its
//!   next wake-up), up to its job's `max_attempts`; the default policy keeps nothing;
//! - cancel: queued tasks leave the queues at once, the LM stops the running ones
//!   (only for the GM that launched them), a repeat changes nothing, a launch racing
//!   the cancel is stopped when its answer arrives, a lost cancel is sent again;
//! - starts reach the GM that launched the task.

use common::cluster::{LmSpec, NodeSpec};
use common::events::TaskEventKind;
use common::messages::{TaskFailure, WorkerReport};
use common::protocol::{ClientToGm, GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::retry::{Backoff, RetryPolicy};
use common::{ConstraintSet, GmId, JobId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use global_master::core::lifecycle::CANCEL_RESEND;
use global_master::core::{GlobalMaster, GmConfig, GmInput, GmOutput, Undelivered};
use local_master::{LmConfig, LmInput, LmOutput, LocalMaster};

/// One GM (or two) and one LM of `nodes` nodes of 2 cores each (in GM 0's partition).
pub(crate) struct Harness {
    pub(crate) gms: Vec<GlobalMaster>,
    lm: LocalMaster,
    /// Start orders the LM sent, not yet reported on.
    /// Start orders: node, task, run.
    starts: Vec<(NodeId, TaskId, u32)>,
    kills: Vec<(NodeId, TaskId)>,
    /// Every LM -> GM message not an answer, in order.
    lm_messages: Vec<LmToGm>,
    /// The events of the LM's last report.
    last_events: Vec<TaskEventKind>,
}

fn harness(gms: u16, nodes: usize) -> Harness {
    let node = NodeSpec {
        capacity: Resources::cores(2, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let mut partitions = vec![vec![node; nodes]];
    partitions.extend((1..gms).map(|_| Vec::new()));
    let spec = LmSpec {
        id: LmId(0),
        partitions,
    };
    let lm = LocalMaster::new(&spec, gms, LmConfig::default(), Micros(0));
    let mut h = Harness {
        gms: (0..gms)
            .map(|g| GlobalMaster::new(GmConfig::new(GmId(g), gms, 1)))
            .collect(),
        lm,
        starts: Vec::new(),
        kills: Vec::new(),
        lm_messages: Vec::new(),
        last_events: Vec::new(),
    };
    h.heartbeat(0);
    h
}

pub(crate) fn task(job: u64, index: u32) -> TaskSpec {
    TaskSpec::short(TaskId::new(job, index), Resources::cores(1, 10), Micros(5))
}

pub(crate) fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        backoff: Backoff {
            initial: Micros::from_secs(1),
            factor: 2.0,
            max: Micros::from_secs(10),
        },
    }
}

impl Harness {
    pub(crate) fn heartbeat(&mut self, now: u64) {
        let snapshot = self.lm.snapshot(Micros(now));
        for gm in &mut self.gms {
            gm.step(Micros(now), GmInput::Lm(LmToGm::State(snapshot.clone())));
        }
    }

    /// Books the LM's output: worker orders, and messages for the GMs (answers are
    /// returned, the others kept in `lm_messages`).
    fn lm_out(&mut self, out: LmOutput) -> Option<LmToGm> {
        for order in out.to_workers {
            match order {
                LmToWorker::Start(s) => self.starts.push((s.node, s.task.id, s.task.attempt)),
                LmToWorker::Kill(k) => self.kills.push((k.node, k.task)),
                LmToWorker::Promote(_) => {}
            }
        }
        let mut answer = None;
        for (_, message) in out.to_gms {
            match message {
                LmToGm::LaunchAnswer(_) | LmToGm::PreemptAnswer(_) | LmToGm::CancelAnswer(_) => {
                    answer = Some(message)
                }
                LmToGm::State(_) => {}
                other => self.lm_messages.push(other),
            }
        }
        answer
    }

    /// Steps GM `g` and carries its requests to the LM and the answers back, until
    /// nothing is left to send. Returns every output of GM `g`, in order.
    pub(crate) fn gm_step(&mut self, g: usize, now: u64, input: GmInput) -> Vec<GmOutput> {
        let mut outs = vec![self.gms[g].step(Micros(now), input)];
        let mut i = 0;
        while i < outs.len() {
            let requests = std::mem::take(&mut outs[i].to_lms);
            for request in requests {
                let out = self
                    .lm
                    .step(Micros(now), LmInput::Gm(request))
                    .expect("a valid request");
                if let Some(answer) = self.lm_out(out) {
                    outs.push(self.gms[g].step(Micros(now), GmInput::Lm(answer)));
                }
            }
            i += 1;
        }
        outs
    }

    /// A pass of GM `g`, its batches delivered and answered.
    pub(crate) fn pass(&mut self, g: usize, now: u64) -> Vec<GmOutput> {
        self.gm_step(g, now, GmInput::Schedule)
    }

    /// The worker reports `report` to the LM; the LM's messages for the GMs are
    /// delivered to GM `g`, whose outputs are returned.
    fn report(&mut self, g: usize, now: u64, report: WorkerReport) -> Vec<GmOutput> {
        let out = self
            .lm
            .step(Micros(now), LmInput::Worker(WorkerToLm::Report(report)))
            .expect("a report of a task the LM holds");
        let events: Vec<TaskEventKind> = out.events.iter().map(|e| e.kind.clone()).collect();
        self.last_events = events;
        self.lm_out(out);
        let messages = std::mem::take(&mut self.lm_messages);
        let mut outs = Vec::new();
        for m in messages {
            outs.extend(self.gm_step(g, now, GmInput::Lm(m)));
        }
        outs
    }

    /// The node and run of the task's last start order.
    pub(crate) fn start_of(&self, task: TaskId) -> (NodeId, u32) {
        self.starts
            .iter()
            .rev()
            .find(|(_, t, _)| *t == task)
            .map(|(n, _, a)| (*n, *a))
            .expect("a start order for the task")
    }

    pub(crate) fn finish(&mut self, now: u64, task: TaskId) -> Vec<GmOutput> {
        let (node, attempt) = self.start_of(task);
        self.report(
            0,
            now,
            WorkerReport::Finished {
                used: None,
                attempt,
                node,
                task,
                at: Micros(now),
            },
        )
    }

    pub(crate) fn fail(&mut self, now: u64, task: TaskId, failure: TaskFailure) -> Vec<GmOutput> {
        let (node, attempt) = self.start_of(task);
        self.report(
            0,
            now,
            WorkerReport::Failed {
                used: None,
                attempt,
                node,
                task,
                at: Micros(now),
                failure,
            },
        )
    }
}

impl Harness {
    pub(crate) fn new(gms: u16, nodes: usize) -> Self {
        harness(gms, nodes)
    }
}

fn queued(gm: &GlobalMaster) -> usize {
    gm.queues().len()
}

/// Every task an output says ended cancelled, in order.
fn cancelled(outs: &[GmOutput]) -> Vec<TaskId> {
    outs.iter().flat_map(|o| o.cancelled.clone()).collect()
}

impl Harness {
    /// Job `job`'s one task, submitted to GM 0 with the default policy and launched.
    fn launch_one(&mut self, job: u64) -> TaskId {
        let a = TaskId::new(job, 0);
        self.gm_step(
            0,
            1,
            GmInput::Client(ClientToGm::Submit(vec![task(job, 0)])),
        );
        assert_eq!(launches(&self.pass(0, 2)), vec![a]);
        a
    }
}

pub(crate) fn launches(outs: &[GmOutput]) -> Vec<TaskId> {
    outs.iter()
        .flat_map(|o| o.answered.launched.iter().copied())
        .collect()
}

#[test]
fn a_failed_task_runs_again_after_its_backoff_up_to_max_attempts() {
    let mut h = Harness::new(1, 1);
    let a = TaskId::new(1, 0);
    let submit = ClientToGm::SubmitJob {
        tasks: vec![task(1, 0)],
        retry: policy(3),
        dag: None,
    };
    h.gm_step(0, 1, GmInput::Client(submit));
    assert_eq!(launches(&h.pass(0, 2)), vec![a]);

    // Run 1 fails at 10 s: run 2 in 1 s; the GM names that moment.
    let t1 = 10_000_000;
    let outs = h.fail(t1, a, TaskFailure::Exit { code: 3 });
    let retries: Vec<_> = outs.iter().flat_map(|o| o.retries.clone()).collect();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(
        (retries[0].attempt, retries[0].at),
        (2, Micros(t1 + 1_000_000))
    );
    assert_eq!(
        outs.last().and_then(|o| o.next_wakeup),
        Some(Micros(t1 + 1_000_000))
    );
    // The same end reported again (the LM's stream resends) counts once.
    let end = outs[0].ended[0].clone();
    let ended = common::messages::TasksEnded {
        lm: LmId(0),
        publish: common::messages::EndsPublished::ByLm,
        gm: GmId(0),
        ends: vec![end],
    };
    let again = h.gm_step(0, t1 + 1, GmInput::Lm(LmToGm::Ended(ended)));
    assert!(again[0].retries.is_empty());
    assert_eq!(h.gms[0].lifecycle().waiting(), 1);

    // Not before its backoff.
    let early = h.gm_step(0, t1 + 999_999, GmInput::Tick);
    assert!(!early[0].wants_pass);
    assert_eq!(queued(&h.gms[0]), 0);
    h.heartbeat(t1 + 999_999);
    let due = h.gm_step(0, t1 + 1_000_000, GmInput::Tick);
    assert!(due[0].wants_pass && due[0].next_wakeup.is_none());
    assert_eq!(queued(&h.gms[0]), 1);
    assert_eq!(launches(&h.pass(0, t1 + 1_000_001)), vec![a]);

    // Run 2 lost with its worker: run 3 after 2 s (the backoff doubled).
    let t2 = 20_000_000;
    let outs = h.fail(
        t2,
        a,
        TaskFailure::Lost {
            reason: "worker silent for 30 s".into(),
        },
    );
    let retry = outs
        .iter()
        .flat_map(|o| o.retries.clone())
        .next()
        .expect("a retry");
    assert_eq!((retry.attempt, retry.at), (3, Micros(t2 + 2_000_000)));
    h.heartbeat(t2 + 1);
    h.gm_step(0, t2 + 2_000_000, GmInput::Tick);
    assert_eq!(launches(&h.pass(0, t2 + 2_000_001)), vec![a]);
    let (node, run) = h.start_of(a);
    assert_eq!(run, 3, "the start order names run 3");

    // A late end of the lost run 2 (its worker came back) ends nothing: run 3 is
    // the task's run now. (Before runs had numbers, it finished the task while
    // run 3 ran.)
    let late = common::messages::TasksEnded {
        lm: LmId(0),
        publish: common::messages::EndsPublished::ByLm,
        gm: GmId(0),
        ends: vec![common::messages::TaskEnd {
            used: None,
            task: a,
            attempt: 2,
            node,
            at: Micros(t2 + 2_000_002),
            failure: None,
        }],
    };
    let outs = h.gm_step(0, t2 + 2_000_002, GmInput::Lm(LmToGm::Ended(late)));
    assert!(outs[0].ended.is_empty(), "{:?}", outs[0].ended);
    assert_eq!(outs[0].stale, vec![(a, 2)]);
    assert_eq!(h.gms[0].lifecycle().tracked(), 1);

    // Run 3 fails: the policy is spent, the task stays failed and nothing is kept.
    let outs = h.fail(30_000_000, a, TaskFailure::Exit { code: 3 });
    assert!(outs
        .iter()
        .all(|o| o.retries.is_empty() && o.next_wakeup.is_none()));
    assert_eq!(outs[0].ended.len(), 1);
    assert_eq!(h.gms[0].lifecycle().tracked(), 0);
    assert_eq!(h.gms[0].stats().tasks_retried, 2);
}

#[test]
fn with_the_default_policy_a_failure_is_final_and_nothing_is_kept() {
    let mut h = Harness::new(1, 1);
    let a = TaskId::new(1, 0);
    h.gm_step(0, 1, GmInput::Client(ClientToGm::Submit(vec![task(1, 0)])));
    assert_eq!(h.gms[0].lifecycle().tracked(), 0);
    assert_eq!(launches(&h.pass(0, 2)), vec![a]);
    let outs = h.fail(3, a, TaskFailure::Exit { code: 1 });
    assert!(outs
        .iter()
        .all(|o| o.retries.is_empty() && o.next_wakeup.is_none()));
    assert_eq!(h.gms[0].stats().tasks_failed, 1);
}

#[test]
fn a_finished_task_is_not_retried_and_a_start_reaches_its_gm() {
    let mut h = Harness::new(1, 1);
    let a = TaskId::new(1, 0);
    let submit = ClientToGm::SubmitJob {
        tasks: vec![task(1, 0)],
        retry: policy(3),
        dag: None,
    };
    h.gm_step(0, 1, GmInput::Client(submit));
    h.pass(0, 2);
    let (node, _) = h.start_of(a);
    let outs = h.report(
        0,
        3,
        WorkerReport::Started {
            attempt: 1,
            node,
            task: a,
            at: Micros(3),
        },
    );
    let started: Vec<_> = outs.iter().flat_map(|o| o.started.clone()).collect();
    assert_eq!(started.len(), 1);
    assert_eq!((started[0].task, started[0].at), (a, Micros(3)));
    assert_eq!(h.gms[0].stats().tasks_started, 1);
    let outs = h.report(
        0,
        4,
        WorkerReport::Finished {
            used: None,
            attempt: 1,
            node,
            task: a,
            at: Micros(4),
        },
    );
    assert!(outs.iter().all(|o| o.retries.is_empty()));
    assert_eq!(h.gms[0].lifecycle().tracked(), 0);
}

#[test]
fn a_cancel_empties_the_queues_and_the_lm_stops_the_running_tasks() {
    // One node of 2 cores: two tasks run, the third waits in the GM's queue.
    let mut h = Harness::new(1, 1);
    let job = JobId(1);
    let tasks: Vec<TaskSpec> = (0..3).map(|i| task(1, i)).collect();
    h.gm_step(0, 1, GmInput::Client(ClientToGm::Submit(tasks)));
    let running = launches(&h.pass(0, 2));
    assert_eq!(running.len(), 2);
    assert_eq!(queued(&h.gms[0]), 1);
    let (node, _) = h.start_of(running[0]);
    h.report(
        0,
        3,
        WorkerReport::Started {
            attempt: 1,
            node,
            task: running[0],
            at: Micros(3),
        },
    );

    let outs = h.gm_step(0, 4, GmInput::Client(ClientToGm::Cancel(job)));
    let gone = cancelled(&outs);
    assert_eq!(gone[0], TaskId::new(1, 2), "the queued task at once");
    let mut stopped = gone[1..].to_vec();
    stopped.sort();
    assert_eq!(stopped, running, "then the LM's answer");
    assert_eq!(queued(&h.gms[0]), 0);
    assert_eq!(h.kills.len(), 2, "a kill order per running task");
    assert!(h.lm.running().is_empty(), "the node is free at once");
    assert_eq!(h.lm.free()[0], Resources::cores(2, 1024));

    // The workers confirm: nothing goes back to the GM (no requeue, no end).
    let kills = h.kills.clone();
    for (node, t) in kills {
        let outs = h.report(
            0,
            5,
            WorkerReport::Killed {
                attempt: 1,
                node,
                task: t,
                at: Micros(5),
            },
        );
        assert!(outs.is_empty(), "nothing for the GM");
        assert!(matches!(
            h.last_events[..],
            [TaskEventKind::Cancelled { gm: GmId(0) }]
        ));
    }
    // A second cancel changes nothing and sends nothing.
    let again = h.gms[0].step(Micros(6), GmInput::Client(ClientToGm::Cancel(job)));
    assert!(again.cancelled.is_empty() && again.to_lms.is_empty());
    // The LM answers a repeated request with nothing more to stop.
    let repeat = common::messages::CancelRequest {
        gm: GmId(0),
        lm: LmId(0),
        job,
    };
    let out =
        h.lm.step(Micros(7), LmInput::Gm(GmToLm::Cancel(repeat)))
            .expect("valid");
    let Some(LmToGm::CancelAnswer(r)) = h.lm_out(out) else {
        panic!("a cancel answer");
    };
    assert!(r.cancelled.is_empty() && r.not_yours.is_empty());
}

#[test]
fn a_launch_that_raced_the_cancel_is_stopped_when_its_answer_arrives() {
    let mut h = Harness::new(1, 1);
    let a = TaskId::new(1, 0);
    h.gm_step(0, 1, GmInput::Client(ClientToGm::Submit(vec![task(1, 0)])));
    // The pass's batch is on its way when the job is cancelled.
    let mut pass = h.gms[0].step(Micros(2), GmInput::Schedule);
    let batch = pass.to_lms.pop().expect("a batch");
    let outs = h.gm_step(0, 3, GmInput::Client(ClientToGm::Cancel(JobId(1))));
    assert!(
        outs.iter().all(|o| o.cancelled.is_empty()),
        "nothing queued, nothing at the LM yet"
    );
    // The batch lands: the LM launches; its answer makes the GM ask again.
    let out = h.lm.step(Micros(4), LmInput::Gm(batch)).expect("valid");
    let answer = h.lm_out(out).expect("an answer");
    let outs = h.gm_step(0, 5, GmInput::Lm(answer));
    assert_eq!(outs[0].answered.launched, vec![a]);
    assert_eq!(cancelled(&outs), vec![a]);
    assert!(h.lm.running().is_empty());
}

#[test]
fn only_the_gm_that_launched_a_task_may_cancel_it() {
    let mut h = Harness::new(2, 1);
    let a = h.launch_one(1);
    // GM 1 names GM 0's job.
    let outs = h.gm_step(1, 3, GmInput::Client(ClientToGm::Cancel(JobId(1))));
    assert!(outs.iter().all(|o| o.cancelled.is_empty()));
    assert!(h.lm.running().contains_key(&a), "still running");
    assert!(h.kills.is_empty());
}

#[test]
fn a_cancel_request_never_delivered_is_sent_again_later() {
    let mut h = Harness::new(1, 1);
    let a = h.launch_one(1);
    let out = h.gms[0].step(Micros(3), GmInput::Client(ClientToGm::Cancel(JobId(1))));
    let [GmToLm::Cancel(request)] = &out.to_lms[..] else {
        panic!("one cancel request, got {:?}", out.to_lms);
    };
    let lost = Undelivered::of(&GmToLm::Cancel(request.clone()));
    let out = h.gms[0].step(Micros(4), GmInput::Undelivered(lost));
    assert_eq!(out.next_wakeup, Some(Micros(4) + CANCEL_RESEND));
    assert!(h.gms[0].step(Micros(5), GmInput::Tick).to_lms.is_empty());
    let outs = h.gm_step(0, 4 + CANCEL_RESEND.0, GmInput::Tick);
    assert_eq!(cancelled(&outs), vec![a]);
    assert!(h.lm.running().is_empty());
}

#[test]
fn a_task_adopted_by_a_restarted_lm_after_its_cancel_is_stopped_again() {
    let mut h = Harness::new(1, 1);
    let a = h.launch_one(1);
    let (node, _) = h.start_of(a);
    // The LM took the cancel, then died before its kill reached the worker.
    h.gm_step(0, 3, GmInput::Client(ClientToGm::Cancel(JobId(1))));
    let spec = LmSpec {
        id: LmId(0),
        partitions: vec![vec![
            NodeSpec {
                capacity: Resources::cores(2, 1024),
                constraints: ConstraintSet::EMPTY,
            };
            1
        ]],
    };
    h.lm = LocalMaster::new(&spec, 1, LmConfig::default(), Micros(10));
    // The worker registers again, still running the task: the new LM adopts it and
    // tells its GM it runs; the GM asks this LM again to stop it.
    let mut fx = local_master::LmEffects::default();
    let held = common::messages::HeldTask {
        node,
        task: task(1, 0),
        started_at: Some(Micros(2)),
    };
    h.lm.adopt(Micros(11), held, &mut fx).expect("adopted");
    assert_eq!(fx.started.len(), 1, "the start goes to the GM");
    let started = LmToGm::Started(fx.started.remove(0));
    let outs = h.gm_step(0, 12, GmInput::Lm(started));
    assert_eq!(cancelled(&outs), vec![a]);
    assert!(h.lm.running().is_empty());
}

/// A restarted GM resubmits its journal; its LM remembers the first two tasks
/// finished and answers `Duplicate`, taking nothing. The room the GM deducted for
/// them comes back with the answer's snapshot (the LM's version moves), so the next
/// pass places the other two. (Before: the snapshot kept the LM's version, the GM
/// took it for stale and the two tasks waited for ever; `services_gm_crash` hung
/// whenever nothing else changed at the LM.)
#[test]
fn a_batch_answered_duplicate_gives_its_room_back_to_the_view() {
    let mut h = Harness::new(1, 1);
    h.lm.ended_before_restart(&common::messages::TaskEnd::finished(
        TaskId::new(1, 0),
        1,
        NodeId(0),
        Micros(0),
    ));
    h.lm.ended_before_restart(&common::messages::TaskEnd::finished(
        TaskId::new(1, 1),
        1,
        NodeId(0),
        Micros(0),
    ));
    h.heartbeat(1);
    let tasks: Vec<TaskSpec> = (0..4).map(|i| task(1, i)).collect();
    h.gm_step(0, 2, GmInput::Client(ClientToGm::Submit(tasks)));
    assert_eq!(launches(&h.pass(0, 3)).len(), 2, "answered duplicate");
    assert!(h.lm.running().is_empty());
    let again = launches(&h.pass(0, 4));
    assert_eq!(again, vec![TaskId::new(1, 2), TaskId::new(1, 3)]);
    assert_eq!(queued(&h.gms[0]), 0);
}

/// A state cut for another number of GMs (an LM of another cluster publishing on
/// the same broker) is refused and counted; the GM placed with it before and
/// panicked on a partition that does not exist.
#[test]
fn a_state_of_another_cluster_is_refused_not_a_panic() {
    let mut h = Harness::new(2, 1);
    let node = NodeSpec {
        capacity: Resources::cores(2, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let other = LmSpec {
        id: LmId(0),
        partitions: vec![vec![node; 1]],
    };
    let mut foreign = LocalMaster::new(&other, 1, LmConfig::default(), Micros(1_000_000));
    let snapshot = foreign.snapshot(Micros(1_000_001));
    h.gms[1].step(Micros(1_000_002), GmInput::Lm(LmToGm::State(snapshot)));
    assert_eq!(h.gms[1].stats().foreign_snapshots, 1);
    h.gm_step(
        1,
        1_000_003,
        GmInput::Client(ClientToGm::Submit(vec![task(9, 0)])),
    );
    let outs = h.pass(1, 1_000_004);
    assert_eq!(
        launches(&outs),
        vec![TaskId::new(9, 0)],
        "placed with its own cluster's view"
    );
}
