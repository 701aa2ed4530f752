//! What the HTTP API and the drain ask of the actor: a job's or task's status, a
//! page of jobs, the load; and the two commands beside them (cancel a job, stop
//! accepting).

use super::GmActor;
use crate::core::GmInput;
use crate::service::observe::status::{JobFilter, JobPage, JobStatus, TaskStatus};
use actix::prelude::*;
use common::protocol::ClientToGm;
use common::{JobId, Micros, Resources, TaskId};
use service_kit::clock;

/// Cancel a job: `None` if this GM does not know it (never, or forgotten).
#[derive(Message, Debug)]
#[rtype(result = "Option<JobStatus>")]
pub struct CancelJob(pub JobId);

impl Handler<CancelJob> for GmActor {
    type Result = Option<JobStatus>;

    fn handle(&mut self, msg: CancelJob, ctx: &mut Context<Self>) -> Self::Result {
        let job = msg.0;
        let now = clock::now();
        if !self.tracker.cancel_requested(job, now) {
            return None;
        }
        if !self.core.lifecycle().is_cancelled(job) {
            tracing::info!(
                job = job.0,
                open = self.tracker.open_tasks(job).len(),
                "job cancelled"
            );
        }
        self.deliver(GmInput::Client(ClientToGm::Cancel(job)), ctx);
        self.tracker.job(job)
    }
}

#[derive(Message, Debug)]
#[rtype(result = "Option<TaskStatus>")]
pub struct GetTask(pub TaskId);

impl Handler<GetTask> for GmActor {
    type Result = Option<TaskStatus>;
    fn handle(&mut self, msg: GetTask, _: &mut Context<Self>) -> Self::Result {
        let mut status = self.tracker.task(msg.0).cloned()?;
        // Soft constraints: the branch the core chose for it, if its job has a tree.
        if let Some(choice) = self.core.soft().choice(msg.0) {
            use crate::service::observe::status::{PassedOverStatus, SoftChoiceStatus};
            status.soft = Some(SoftChoiceStatus {
                branch: choice.branch.clone(),
                utility: choice.utility,
                passed_over: choice
                    .passed_over
                    .iter()
                    .map(|p| PassedOverStatus {
                        branch: p.branch.clone(),
                        why: p.why.describe(),
                    })
                    .collect(),
            });
        }
        Some(status)
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

/// A page of jobs (see [`Tracker::list`](crate::service::observe::status::Tracker::list)).
#[derive(Message, Debug)]
#[rtype(result = "JobPage")]
pub struct ListJobs {
    pub after: Option<u64>,
    pub limit: usize,
    pub filter: JobFilter,
}

impl Handler<ListJobs> for GmActor {
    type Result = actix::MessageResult<ListJobs>;
    fn handle(&mut self, msg: ListJobs, _: &mut Context<Self>) -> Self::Result {
        actix::MessageResult(self.tracker.list(msg.after, msg.limit, &msg.filter))
    }
}

/// Queued and outstanding task counts, and whether the view is complete.
#[derive(Message, Debug)]
#[rtype(result = "Load")]
pub struct GetLoad;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Load {
    pub queued: usize,
    pub outstanding: usize,
    pub full_view: bool,
    /// Nodes and total capacity of the LMs this GM has heard from.
    pub nodes: usize,
    pub capacity: Resources,
    /// LMs whose state this GM has not taken for [`LM_SILENCE`] (or ever).
    pub silent_lms: Vec<usize>,
}

/// An LM whose state a GM has not taken for this long is reported on `/healthz`
/// (`degraded`): its view may be stale (the LM is down, cut off, or sends snapshots
/// of a life the GM does not follow).
pub const LM_SILENCE: std::time::Duration = std::time::Duration::from_secs(10);

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
            silent_lms: {
                let now = clock::now();
                let limit = Micros(LM_SILENCE.as_micros() as u64);
                (self.metrics.last_snapshot.iter().enumerate())
                    .filter(|(_, t)| t.is_none_or(|t| now.since(t) > limit))
                    .map(|(l, _)| l)
                    .collect()
            },
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

/// A job's spec as submitted: `Ok(body)`, or why there is none (`Err`: unknown
/// job, or not kept).
#[derive(Message, Debug)]
#[rtype(result = "Result<Vec<u8>, SpecMissing>")]
pub struct GetSpec(pub JobId);

/// Why [`GetSpec`] has no spec.
#[derive(Debug, PartialEq, Eq)]
pub enum SpecMissing {
    /// Neither the tracker nor the journal knows the job's spec.
    Unknown,
    /// The packed spec was larger than the limit.
    TooLarge { packed: usize },
    /// The stored spec could not be read (logged).
    Unreadable(String),
}

impl Handler<GetSpec> for GmActor {
    type Result = Result<Vec<u8>, SpecMissing>;
    fn handle(&mut self, msg: GetSpec, _: &mut Context<Self>) -> Self::Result {
        use crate::service::durable::specs::{unpack, Packed};
        let packed: Vec<u8> = match self.tracker.spec(msg.0) {
            Some(Packed::Kept(p)) => p.to_vec(),
            Some(Packed::TooLarge { packed }) => {
                return Err(SpecMissing::TooLarge { packed: *packed })
            }
            None => match self.journal.as_ref().map(|j| j.spec(msg.0)) {
                Some(Ok(Some(stored))) => stored.packed,
                Some(Err(e)) => {
                    tracing::warn!(job = msg.0 .0, error = %e, "cannot read a job's spec from the journal");
                    return Err(SpecMissing::Unreadable(e.to_string()));
                }
                _ => return Err(SpecMissing::Unknown),
            },
        };
        unpack(&packed).map_err(|e| {
            tracing::warn!(job = msg.0 .0, error = %e, "a job's stored spec does not unpack");
            SpecMissing::Unreadable(e.to_string())
        })
    }
}

/// The user of one of this GM's jobs: `Some(user)` when the GM knows the job (its
/// tracker, or the spec its journal keeps after the job ended), `None` otherwise.
#[derive(Message, Debug)]
#[rtype(result = "Option<Option<String>>")]
pub struct JobUser(pub JobId);

impl Handler<JobUser> for GmActor {
    type Result = Option<Option<String>>;
    fn handle(&mut self, msg: JobUser, _: &mut Context<Self>) -> Self::Result {
        if let Some(status) = self.tracker.job(msg.0) {
            return Some(status.user);
        }
        let stored = self.journal.as_ref()?.spec(msg.0).ok()??;
        Some(stored.user)
    }
}
