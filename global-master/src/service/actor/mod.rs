//! The GM actor: hosts the pure [`GlobalMaster`] core. Inputs go through
//! [`GmActor::deliver`] (see [`deliver`]); this file holds the actor's state (its
//! fields private to this folder; the other parts read it through the methods
//! below) and job submission (ids, status, `queued` events). Beside it: the queries
//! of the HTTP API ([`queries`]), requests to the LMs (`outbox.rs`), the shell's
//! counters ([`counters`]), the accounting ([`usage`]), and the inputs from the broker ([`mq`]), a previous life
//! ([`resume`]), restarted LMs ([`lm_restart`]) and LRAs ([`lra_actor`]).
//!
//! Passes are coalesced: one `RunPass` queued at a time, behind whatever is already
//! in the mailbox.

pub mod counters;
pub mod deliver;
mod leave_queued;
pub mod links;
pub mod lm_restart;
pub mod lra_actor;
pub mod mq;
mod outbox;
pub mod preempt;
pub mod queries;
pub mod remote_after;
pub mod resume;
mod stages;
pub mod usage;

use crate::core::{GlobalMaster, GmConfig, GmInput};
use crate::service::admission::api::NewTask;
use crate::service::durable::journal::{Journal, Recovered};
use crate::service::observe::recent_events::RecentEvents;
use crate::service::observe::status::{Retention, Tracker};
use actix::prelude::*;
use common::events::{TaskEvent, TaskEventKind};
use common::protocol::ClientToGm;
use common::retry::RetryPolicy;
use common::{GmId, JobId, Micros, TaskId, TaskSpec};
use counters::{PreemptMetrics, ShellMetrics};
use links::LmLink;
use service_kit::clock;
use service_kit::links::Sink;
use std::sync::Arc;

pub struct GmActor {
    core: GlobalMaster,
    /// One link per LM (index = LM id).
    links: Vec<LmLink>,
    events: Sink<Vec<TaskEvent>>,
    /// The last events of `events`, for the dashboard.
    recent: RecentEvents,
    tracker: Tracker,
    metrics: ShellMetrics,
    preempt: PreemptMetrics,
    /// Queue names by queue id (metrics labels).
    queue_names: Vec<String>,
    max_queued: usize,
    /// See [`GmActor::with_doubt_timeout`].
    doubt_timeout: std::time::Duration,
    /// See [`GmActor::with_lm_reconcile_delay`].
    lm_reconcile_delay: std::time::Duration,
    pass_scheduled: bool,
    /// Base URLs of the LMs (index = LM id), for task logs; empty in embedded mode.
    lm_urls: Vec<String>,
    /// When a [`GmInput::Tick`] is already due (see `deliver::wake_at`).
    wakeup: Option<Micros>,
    /// The last job id handed out (see [`GmActor::new_job_id`]).
    last_job: Option<JobId>,
    accepting: bool,
    /// The graceful stop reported what is queued ([`crate::service::durable::shutdown::LeaveQueued`]):
    /// nothing more goes out (the next life resumes those tasks as the runs the
    /// journal says never went out).
    suspended: bool,
    /// Accepted work on disk (see [`crate::service::durable::journal`]); `None` without `--data-dir`.
    journal: Option<Journal>,
    /// Jobs read back from the journal, resubmitted when the actor starts.
    recovered: Vec<Recovered>,
    /// Trips when an LM refuses this life as replaced (see [`crate::service::durable::standby::Fence`]).
    fence: Option<std::sync::Arc<crate::service::durable::standby::Fence>>,
    /// Runs charged per user and queue (see [`usage`]).
    usage: crate::service::observe::usage::Ledger,
    /// The attribute names utility trees use: a resumed job's tree is compiled again
    /// with them (see `--cluster-file`).
    attributes: std::sync::Arc<common::attributes::Attributes>,
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
        links: Vec<LmLink>,
        events: Sink<Vec<TaskEvent>>,
        max_queued: usize,
    ) -> Self {
        let lms = links.len();
        let queue_names = match &config.fairness {
            Some(f) => f.queues.iter().map(|q| q.name.clone()).collect(),
            None => vec![common::fairness::DEFAULT_QUEUE.to_owned()],
        };
        let recent = RecentEvents::default();
        GmActor {
            core: GlobalMaster::new(config),
            links,
            events: recent.tee(events),
            recent,
            preempt: PreemptMetrics::default(),
            queue_names,
            tracker: Tracker::default(),
            metrics: ShellMetrics::new(lms),
            max_queued,
            doubt_timeout: DEFAULT_DOUBT_TIMEOUT,
            lm_reconcile_delay: std::time::Duration::from_secs(5),
            pass_scheduled: false,
            wakeup: None,
            lm_urls: Vec::new(),
            last_job: None,
            accepting: true,
            suspended: false,
            journal: None,
            recovered: Vec::new(),
            fence: None,
            usage: Default::default(),
            attributes: std::sync::Arc::new(common::attributes::Attributes::numbered()),
        }
    }

    /// Trips `fence` when an LM refuses a request of this life as replaced.
    pub fn with_fence(
        mut self,
        fence: std::sync::Arc<crate::service::durable::standby::Fence>,
    ) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Writes accepted jobs and task ends to `journal`; the jobs `recovered` from it
    /// (a previous life's) are resubmitted when the actor starts.
    pub fn with_journal(mut self, journal: Journal, recovered: Vec<Recovered>) -> Self {
        match journal.usage_rows() {
            Ok(rows) => rows.into_iter().for_each(|(k, t)| self.usage.add(k, t)),
            Err(e) => {
                self.metrics.journal_errors += 1;
                tracing::error!(error = %e, "the accounting could not be read back from the journal: usage before this start is not shown");
            }
        }
        self.journal = Some(journal);
        self.recovered = recovered;
        self
    }

    /// How long and how many ended jobs the status API keeps (default: one hour,
    /// 10,000 jobs).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.tracker = Tracker::new(retention);
        self
    }

    /// How long a launch batch or preemption request that an LM may have carried out
    /// without answering is sent again before its tasks are requeued (default 300 s).
    pub fn with_doubt_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.doubt_timeout = timeout;
        self
    }

    /// How long after an LM restarted this GM asks it which of its tasks it still
    /// holds (default 5 s; see `lm_restart`).
    pub fn with_lm_reconcile_delay(mut self, delay: std::time::Duration) -> Self {
        self.lm_reconcile_delay = delay;
        self
    }

    pub(super) fn gm(&self) -> GmId {
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

    /// The core, read-only (for the queries of [`crate::service::observe`]).
    pub fn core(&self) -> &GlobalMaster {
        &self.core
    }

    /// Per-task and per-job status.
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// The counters the core does not keep.
    pub fn shell_metrics(&self) -> &ShellMetrics {
        &self.metrics
    }

    /// The shell's preemption counters.
    pub fn preempt_metrics(&self) -> &PreemptMetrics {
        &self.preempt
    }

    /// Queue names by queue id (metrics labels).
    pub fn queue_names(&self) -> &[String] {
        &self.queue_names
    }

    /// Base URLs of the LMs (index = LM id); empty in embedded mode.
    pub fn lm_urls(&self) -> &[String] {
        &self.lm_urls
    }

    /// How many LMs this GM links to.
    pub fn lm_count(&self) -> usize {
        self.links.len()
    }

    /// The last task events, for the dashboard.
    pub fn recent_events(&self) -> &RecentEvents {
        &self.recent
    }

    /// The journal, when there is one (`--data-dir`).
    pub fn journal(&self) -> Option<&Journal> {
        self.journal.as_ref()
    }

    /// Tasks held: queued, awaiting an LM's answer, or blocked in a DAG stage.
    pub fn held(&self) -> usize {
        self.core.queues().len() + self.core.outstanding() + self.core.dags().held()
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
        self.recover(ctx);
    }
}

/// Accept a job under the GM's default retry policy. Answers the job id and task
/// ids, or `Err(QueueFull)`.
#[derive(Message, Debug)]
#[rtype(result = "Result<(JobId, Vec<TaskId>), SubmitRefused>")]
pub struct Submit(pub Vec<NewTask>);

/// Accept a job with its retry policy (`None`: the GM's default) and the
/// submitter's label.
#[derive(Message, Debug)]
#[rtype(result = "Result<(JobId, Vec<TaskId>), SubmitRefused>")]
pub struct SubmitJob {
    pub tasks: Vec<NewTask>,
    pub retry: Option<RetryPolicy>,
    pub user: Option<String>,
    /// Its DAG, when it declares stages or jobs it runs after.
    pub dag: Option<Arc<common::dag::JobDag>>,
    /// The caller is an admin: `after_jobs` may name any user's job (others may
    /// name only jobs of the job's user).
    pub admin: bool,
    /// Its `Idempotency-Key`, journalled with the job.
    pub idempotency: Option<crate::service::durable::idempotency::KeyOf>,
    /// Its name and labels.
    pub names: crate::service::admission::api::JobNames,
    /// The `after_jobs` of other GMs, checked there with the submitter's token
    /// (see [`crate::service::admission::remote_after`]): each with its outcome
    /// then (`None`: not ended).
    pub after_elsewhere: Vec<(JobId, Option<bool>)>,
    /// Its spec as submitted, packed (see [`crate::service::durable::specs`]);
    /// `None`: not given (embedded submissions).
    pub spec: Option<crate::service::durable::specs::Packed>,
    /// Its utility tree (soft constraints, docs/alsched.md), compiled.
    pub utility: Option<Arc<common::utility::Utility>>,
    /// Its gang (docs/gangs.md), checked.
    pub gang: Option<common::gang::GangSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitRefused {
    /// `after_jobs[index]` names a job this GM does not know, or one the caller may
    /// not read (the same answer).
    UnknownJob { index: usize, job: u64 },
    /// `after_jobs[index]` names a job of another GM that was not checked there
    /// (this GM knows no URL for it).
    OtherGm { index: usize, job: u64, gm: u16 },
    /// The GM holds too many tasks; retry later.
    QueueFull { held: usize, limit: usize },
    /// The GM is shutting down.
    ShuttingDown,
    /// The job could not be written to the journal (logged): not accepted.
    JournalFailed,
}

impl Handler<Submit> for GmActor {
    type Result = Result<(JobId, Vec<TaskId>), SubmitRefused>;

    fn handle(&mut self, msg: Submit, ctx: &mut Context<Self>) -> Self::Result {
        let job = SubmitJob {
            tasks: msg.0,
            retry: None,
            user: None,
            dag: None,
            admin: false,
            idempotency: None,
            names: Default::default(),
            after_elsewhere: Vec::new(),
            spec: None,
            utility: None,
            gang: None,
        };
        self.accept(job, ctx)
    }
}

impl Handler<SubmitJob> for GmActor {
    type Result = Result<(JobId, Vec<TaskId>), SubmitRefused>;

    fn handle(&mut self, msg: SubmitJob, ctx: &mut Context<Self>) -> Self::Result {
        self.accept(msg, ctx)
    }
}

impl GmActor {
    fn accept(
        &mut self,
        msg: SubmitJob,
        ctx: &mut Context<Self>,
    ) -> Result<(JobId, Vec<TaskId>), SubmitRefused> {
        if !self.accepting {
            return Err(SubmitRefused::ShuttingDown);
        }
        let held = self.held();
        if held + msg.tasks.len() > self.max_queued {
            self.metrics.submissions_refused_full += 1;
            return Err(SubmitRefused::QueueFull {
                held,
                limit: self.max_queued,
            });
        }
        let ended_before = match &msg.dag {
            Some(dag) => {
                self.check_after_jobs(dag, msg.user.as_deref(), msg.admin, &msg.after_elsewhere)?
            }
            None => Vec::new(),
        };
        let now = clock::now();
        let job = self.new_job_id(now);
        let gm = self.gm();
        let queues = self.queue_names_of(msg.tasks.iter().map(|t| t.queue));
        let policy = msg
            .retry
            .unwrap_or_else(|| self.core.lifecycle().default_policy());
        let mut ids = Vec::with_capacity(msg.tasks.len());
        let mut events = Vec::with_capacity(msg.tasks.len());
        let mut specs = Vec::with_capacity(msg.tasks.len());
        for (index, t) in msg.tasks.into_iter().enumerate() {
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
                executor: t.executor,
                attempt: 1,
                preemptions: 0,
                priority: t.priority,
            };
            specs.push(spec);
            events.push(TaskEvent {
                task: id,
                at: now,
                kind: TaskEventKind::Queued { gm },
            });
            ids.push(id);
        }
        if let Some(journal) = &mut self.journal {
            let accepted = crate::service::durable::journal::Accepted {
                accepted_at: now,
                user: msg.user.clone(),
                retry: msg.retry,
                idempotency: msg.idempotency.clone(),
            };
            let names = (msg.names != Default::default()).then_some(&msg.names);
            let spec = match &msg.spec {
                Some(crate::service::durable::specs::Packed::Kept(p)) => Some(&p[..]),
                _ => None,
            };
            let dag = msg.dag.as_deref();
            let parts = crate::service::durable::journal::JobParts {
                dag,
                names,
                spec,
                gang: msg.gang.as_ref(),
            };
            if let Err(e) = journal.accept_job(job, &accepted, &specs, parts) {
                self.metrics.journal_errors += 1;
                tracing::error!(job = job.0, error = %e, "job refused: cannot write it to the journal");
                return Err(SubmitRefused::JournalFailed);
            }
        }
        self.book_usage(&specs, msg.user.as_deref());
        self.tracker
            .job_accepted(job, now, queues, msg.user, policy.max_attempts);
        self.tracker.named(job, msg.names);
        if let Some(spec) = msg.spec {
            self.tracker.set_spec(job, spec);
        }
        for id in &ids {
            self.tracker.accepted(*id, now);
        }
        if let Some(dag) = &msg.dag {
            self.tracker.job_dag(job, dag);
        }
        tracing::debug!(
            job = job.0,
            tasks = ids.len(),
            max_attempts = policy.max_attempts,
            "job accepted"
        );
        (self.events)(events);
        let submit = match (msg.retry, msg.dag) {
            (retry, None) if msg.gang.is_some() => ClientToGm::SubmitGang {
                tasks: specs,
                retry: retry.unwrap_or(policy),
                gang: msg.gang.expect("checked"),
            },
            (None, None) => ClientToGm::Submit(specs),
            (retry, dag) => ClientToGm::SubmitJob {
                tasks: specs,
                retry: retry.unwrap_or(policy),
                dag,
            },
        };
        if let Some(utility) = msg.utility {
            self.core.set_utility(job, utility);
        }
        self.deliver(GmInput::Client(submit), ctx);
        // Jobs it runs after that ended already.
        for (other, ok) in ended_before {
            self.deliver(GmInput::JobEnded { job: other, ok }, ctx);
        }
        Ok((job, ids))
    }

    /// A queue's name (its id if unknown).
    pub(super) fn queue_name(&self, queue: common::QueueId) -> String {
        self.queue_names
            .get(queue.0 as usize)
            .cloned()
            .unwrap_or_else(|| queue.to_string())
    }

    /// The names of the queues a job's tasks use, sorted, each once (the job's
    /// `queues` in the status API).
    pub(super) fn queue_names_of<'a>(
        &self,
        queues: impl Iterator<Item = common::QueueId> + 'a,
    ) -> Vec<String> {
        let mut names: Vec<String> = queues.map(|q| self.queue_name(q)).collect();
        names.sort();
        names.dedup();
        names
    }
}
