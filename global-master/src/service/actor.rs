//! The GM actor: hosts the pure [`GlobalMaster`] core, one `Handler` per message.
//!
//! Submissions, LM snapshots and launch answers each update the core and ask for a
//! scheduling pass; passes are coalesced (one `RunPass` queued at a time, behind
//! whatever is already in the mailbox). Launch batches go out on their LM's link from
//! a spawned task whose answer comes back as [`LaunchDone`].

use super::api::NewTask;
use super::preempt::{PreemptLink, PreemptMetrics};
use super::status::{JobStatus, TaskStatus, Tracker};
use crate::core::{DecisionOutcome, GlobalMaster, GmConfig};
use actix::prelude::*;
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{LaunchBatch, LaunchResponse, LmSnapshot};
use common::reasons::PendingReason;
use common::{GmId, JobId, LmId, Micros, Resources, TaskId, TaskSpec};
use service_kit::clock;
use service_kit::links::{call_until_settled, Link, LinkError, Sink};
use service_kit::metrics::Histogram;
use std::sync::Arc;

pub type LaunchLink = Link<LaunchBatch, LaunchResponse>;

/// How the GM reaches each LM (index = LM id).
pub struct LmLinks {
    pub launch: Vec<LaunchLink>,
    /// Preemption requests (used only with queues configured).
    pub preempt: Vec<PreemptLink>,
}

impl std::fmt::Debug for LmLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LmLinks({} LMs)", self.launch.len())
    }
}

/// Counters the core does not keep.
#[derive(Debug)]
pub struct ShellMetrics {
    pub launch_latency: Histogram,
    pub passes: u64,
    pub batches_sent: u64,
    pub batches_abandoned: u64,
    pub submissions_refused_full: u64,
    pub last_snapshot: Vec<Option<Micros>>,
}

pub struct GmActor {
    pub(super) core: GlobalMaster,
    links: Vec<LaunchLink>,
    pub(super) preempt_links: Vec<PreemptLink>,
    pub(super) events: Sink<Vec<TaskEvent>>,
    pub(super) tracker: Tracker,
    pub(super) metrics: ShellMetrics,
    pub(super) preempt: PreemptMetrics,
    /// Queue names by queue id (metrics labels).
    pub(super) queue_names: Vec<String>,
    max_queued: usize,
    /// See [`GmActor::with_doubt_timeout`].
    pub(super) doubt_timeout: std::time::Duration,
    pass_scheduled: bool,
    /// The last job id handed out (see [`GmActor::new_job_id`]).
    last_job: Option<JobId>,
    accepting: bool,
}

impl std::fmt::Debug for GmActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GmActor")
            .field("id", &self.core.id())
            .finish_non_exhaustive()
    }
}

impl GmActor {
    pub fn new(
        config: GmConfig,
        links: LmLinks,
        events: Sink<Vec<TaskEvent>>,
        max_queued: usize,
    ) -> Self {
        let lms = links.launch.len();
        let queue_names = match &config.fairness {
            Some(f) => f.queues.iter().map(|q| q.name.clone()).collect(),
            None => vec![common::fairness::DEFAULT_QUEUE.to_owned()],
        };
        GmActor {
            core: GlobalMaster::new(config),
            links: links.launch,
            preempt_links: links.preempt,
            events,
            preempt: PreemptMetrics::default(),
            queue_names,
            tracker: Tracker::default(),
            metrics: ShellMetrics {
                launch_latency: Histogram::latency(),
                passes: 0,
                batches_sent: 0,
                batches_abandoned: 0,
                submissions_refused_full: 0,
                last_snapshot: vec![None; lms],
            },
            max_queued,
            doubt_timeout: DEFAULT_DOUBT_TIMEOUT,
            pass_scheduled: false,
            last_job: None,
            accepting: true,
        }
    }

    /// How long a launch batch or preemption request that an LM may have carried out
    /// without answering is sent again before its tasks are requeued (default 300 s).
    pub fn with_doubt_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.doubt_timeout = timeout;
        self
    }

    fn gm(&self) -> GmId {
        self.core.id()
    }

    /// A new job id: this GM's number in the top 16 bits, then the submission time
    /// (microseconds, kept unique and increasing), so that ids order jobs by
    /// submission across GMs (the workers' job-order queues use this) and a
    /// restarted GM does not reuse the ids of its previous life.
    pub(super) fn new_job_id(&mut self, now: Micros) -> JobId {
        let id = JobId::stamped(self.gm().0, now.0, self.last_job);
        self.last_job = Some(id);
        id
    }

    /// Tasks held: queued plus awaiting an LM's answer.
    pub fn held(&self) -> usize {
        self.core.queues().len() + self.core.outstanding()
    }

    pub(super) fn request_pass(&mut self, ctx: &mut Context<Self>) {
        if !self.pass_scheduled {
            self.pass_scheduled = true;
            ctx.notify(RunPass);
        }
    }

    /// Sends a batch to its LM; see [`call_until_settled`].
    pub(super) fn send_batch(&mut self, batch: LaunchBatch, ctx: &mut Context<Self>) {
        let Some(link) = self.links.get(batch.lm.index()).cloned() else {
            tracing::error!(lm = %batch.lm, "no link to this LM");
            return;
        };
        self.metrics.batches_sent += 1;
        let me = ctx.address();
        let (lm, seq) = (batch.lm, batch.seq);
        let tasks: Vec<TaskId> = batch.requests.iter().map(|r| r.task.id).collect();
        let doubt_timeout = self.doubt_timeout;
        tokio::spawn(async move {
            let what = format!("launch batch {seq} to {lm}");
            let result = call_until_settled(&link, &batch, doubt_timeout, &what).await;
            me.do_send(LaunchDone {
                lm,
                seq,
                tasks,
                result,
            });
        });
    }
}

/// See [`service_kit::links::call_until_settled`]: a launch batch (or preemption
/// request) that an LM may have carried out without answering is sent again (the LM
/// answers a repeat from its record, or, restarted, `duplicate` for a task its
/// workers hold or finished) for this long before its tasks go back to the queue.
pub const DEFAULT_DOUBT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

impl Actor for GmActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(1 << 20);
        self.start_lra_timer(ctx);
    }
}

/// Accept a job. Answers the job id and task ids, or `Err(QueueFull)`.
#[derive(Message, Debug)]
#[rtype(result = "Result<(JobId, Vec<TaskId>), SubmitRefused>")]
pub struct Submit(pub Vec<NewTask>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitRefused {
    /// The GM holds too many tasks; retry later.
    QueueFull { held: usize, limit: usize },
    /// The GM is shutting down.
    ShuttingDown,
}

impl Handler<Submit> for GmActor {
    type Result = Result<(JobId, Vec<TaskId>), SubmitRefused>;

    fn handle(&mut self, msg: Submit, ctx: &mut Context<Self>) -> Self::Result {
        if !self.accepting {
            return Err(SubmitRefused::ShuttingDown);
        }
        let held = self.held();
        if held + msg.0.len() > self.max_queued {
            self.metrics.submissions_refused_full += 1;
            return Err(SubmitRefused::QueueFull {
                held,
                limit: self.max_queued,
            });
        }
        let now = clock::now();
        let job = self.new_job_id(now);
        let gm = self.gm();
        let mut ids = Vec::with_capacity(msg.0.len());
        let mut events = Vec::with_capacity(msg.0.len());
        for (index, t) in msg.0.into_iter().enumerate() {
            let id = TaskId {
                job,
                index: index as u32,
            };
            let spec = TaskSpec {
                id,
                queue: t.queue,
                kind: t.kind,
                resources: t.resources,
                constraints: t.constraints,
                duration: t.duration,
                tags: t.tags.into_iter().map(Arc::from).collect(),
            };
            self.core.submit(now, spec);
            self.tracker.accepted(id, now);
            events.push(TaskEvent {
                task: id,
                at: now,
                kind: TaskEventKind::Queued { gm },
            });
            ids.push(id);
        }
        tracing::debug!(job = job.0, tasks = ids.len(), "job accepted");
        (self.events)(events);
        self.request_pass(ctx);
        Ok((job, ids))
    }
}

/// An LM's state (heartbeat on the broker, or in memory).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ApplySnapshot(pub LmSnapshot);

impl Handler<ApplySnapshot> for GmActor {
    type Result = ();

    fn handle(&mut self, msg: ApplySnapshot, ctx: &mut Context<Self>) {
        let lm = msg.0.lm.index();
        if let Some(slot) = self.metrics.last_snapshot.get_mut(lm) {
            *slot = Some(msg.0.taken_at);
        }
        let had_view = self.core.has_full_view();
        self.core.apply_snapshot(clock::now(), &msg.0);
        if !had_view && self.core.has_full_view() {
            tracing::info!(gm = %self.gm(), "view complete: state of every LM received; placing work");
        }
        self.request_pass(ctx);
    }
}

/// The outcome of sending one launch batch.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct LaunchDone {
    pub lm: LmId,
    pub seq: u64,
    pub tasks: Vec<TaskId>,
    pub result: Result<LaunchResponse, LinkError>,
}

impl Handler<LaunchDone> for GmActor {
    type Result = ();

    fn handle(&mut self, msg: LaunchDone, ctx: &mut Context<Self>) {
        let now = clock::now();
        match msg.result {
            Ok(response) => {
                if let Some(slot) = self.metrics.last_snapshot.get_mut(msg.lm.index()) {
                    *slot = Some(response.snapshot.taken_at);
                }
                let out = self.core.handle_response(now, &response);
                for task in out.launched {
                    if let Some(submitted) = self.tracker.launched(task, now) {
                        self.metrics
                            .launch_latency
                            .observe(now.since(submitted).as_secs_f64());
                    }
                }
                for (task, reason) in out.rejected {
                    tracing::debug!(task = %task, job = task.job.0, %reason, "LM refused the launch; requeued");
                    self.tracker.pending(
                        task,
                        &PendingReason::RejectedByLm { rejection: reason },
                        false,
                    );
                }
            }
            Err(error) => {
                tracing::warn!(lm = %msg.lm, seq = msg.seq, tasks = msg.tasks.len(), %error, "launch batch failed; requeueing its tasks");
                self.metrics.batches_abandoned += 1;
                self.core.abandon_batch(now, msg.lm, msg.seq, &msg.tasks);
                let reason = PendingReason::LmUnreachable { lm: msg.lm };
                for task in &msg.tasks {
                    self.tracker.pending(*task, &reason, false);
                }
            }
        }
        self.request_pass(ctx);
    }
}

/// Run one scheduling pass (queued by the GM itself).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct RunPass;

impl Handler<RunPass> for GmActor {
    type Result = ();

    fn handle(&mut self, _: RunPass, ctx: &mut Context<Self>) {
        self.pass_scheduled = false;
        let now = clock::now();
        let out = self.core.schedule(now);
        if out.decisions.is_empty() && out.preempts.is_empty() {
            return;
        }
        self.metrics.passes += 1;
        let gm = self.gm();
        let mut events = Vec::with_capacity(out.decisions.len());
        for d in &out.decisions {
            let kind = match &d.outcome {
                DecisionOutcome::Dispatched {
                    lm,
                    node,
                    placement,
                    ..
                } => {
                    self.tracker.dispatched(d.task, *lm, *node);
                    TaskEventKind::Dispatched {
                        gm,
                        lm: *lm,
                        node: *node,
                        placement: *placement,
                    }
                }
                DecisionOutcome::Requeued(reason) => {
                    if !self.tracker.pending(d.task, reason, false) {
                        continue;
                    }
                    TaskEventKind::Requeued {
                        gm,
                        reason: reason.clone(),
                    }
                }
                DecisionOutcome::Preempting { lm, victim } => {
                    // The request follows the pass (`out.preempts`); the LM's answer
                    // or its `launched` event tells what became of it.
                    tracing::debug!(task = %d.task, job = d.task.job.0, %lm, %victim, "no room: preempting");
                    continue;
                }
                DecisionOutcome::Unplaceable(reason) => {
                    tracing::info!(task = %d.task, job = d.task.job.0, %reason, "task can never be placed");
                    self.tracker.pending(d.task, reason, true);
                    TaskEventKind::Unplaceable {
                        gm,
                        reason: reason.clone(),
                    }
                }
            };
            events.push(TaskEvent {
                task: d.task,
                at: now,
                kind,
            });
        }
        if !events.is_empty() {
            (self.events)(events);
        }
        for batch in out.batches {
            self.send_batch(batch, ctx);
        }
        for request in out.preempts {
            self.send_preempt(request, ctx);
        }
    }
}

#[derive(Message, Debug)]
#[rtype(result = "Option<TaskStatus>")]
pub struct GetTask(pub TaskId);

impl Handler<GetTask> for GmActor {
    type Result = Option<TaskStatus>;
    fn handle(&mut self, msg: GetTask, _: &mut Context<Self>) -> Self::Result {
        self.tracker.task(msg.0).cloned()
    }
}

#[derive(Message, Debug)]
#[rtype(result = "Option<JobStatus>")]
pub struct GetJob(pub JobId);

impl Handler<GetJob> for GmActor {
    type Result = Option<JobStatus>;
    fn handle(&mut self, msg: GetJob, _: &mut Context<Self>) -> Self::Result {
        self.tracker.job(msg.0)
    }
}

/// Queued and outstanding task counts, and whether the view is complete.
#[derive(Message, Debug)]
#[rtype(result = "Load")]
pub struct GetLoad;

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Load {
    pub queued: usize,
    pub outstanding: usize,
    pub full_view: bool,
    /// Nodes and total capacity of the LMs this GM has heard from.
    pub nodes: usize,
    pub capacity: Resources,
}

impl Handler<GetLoad> for GmActor {
    type Result = actix::MessageResult<GetLoad>;
    fn handle(&mut self, _: GetLoad, _: &mut Context<Self>) -> Self::Result {
        let (nodes, capacity) = self.core.cluster_size();
        actix::MessageResult(Load {
            nodes,
            capacity,
            queued: self.core.queues().len() + self.core.lras_waiting(),
            outstanding: self.core.outstanding(),
            full_view: self.core.has_full_view(),
        })
    }
}

/// Stop accepting submissions (shutdown); placing what is queued continues.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct StopAccepting;

impl Handler<StopAccepting> for GmActor {
    type Result = ();
    fn handle(&mut self, _: StopAccepting, _: &mut Context<Self>) {
        self.accepting = false;
    }
}

/// Shutdown gave up waiting: every task still queued here is reported `failed` on the
/// event stream (with its id in the log), so no accepted task disappears unseen.
#[derive(Message, Debug)]
#[rtype(result = "usize")]
pub struct FailQueued;

impl Handler<FailQueued> for GmActor {
    type Result = usize;
    fn handle(&mut self, _: FailQueued, _: &mut Context<Self>) -> usize {
        let now = clock::now();
        let lra_containers = self.core.lra_pending_containers();
        let events: Vec<TaskEvent> = self
            .core
            .pending()
            .map(|p| p.task.id)
            .chain(lra_containers)
            .map(|task| {
                tracing::warn!(task = %task, job = task.job.0, "shut down before placing the task");
                TaskEvent {
                    task,
                    at: now,
                    kind: TaskEventKind::Failed {
                        detail: "the global master shut down before placing it".into(),
                    },
                }
            })
            .collect();
        let n = events.len();
        if n > 0 {
            (self.events)(events);
        }
        n
    }
}
