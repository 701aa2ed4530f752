//! A GM restarted on its journal (see [`crate::service::durable::journal`]): the previous life's jobs
//! are shown as they were at once; before their open tasks go back to the queues, the
//! LMs are asked which of them they hold or finished ([`GmToLm::Reconcile`]), so that
//! no task is placed again on another LM while it runs (or after it ended) elsewhere.

use crate::core::{GmInput, Resumed, ResumedDag};

use crate::service::actor::GmActor;
use actix::prelude::*;
use common::messages::TaskEnd;
use common::protocol::{GmToLm, LmToGm};
use common::retry::RetryPolicy;
use common::{LmId, NodeId, TaskId, TaskSpec};
use service_kit::clock;
use std::time::{Duration, Instant};

/// How long an LM has to answer one reconcile request.
const ANSWER_WAIT: Duration = Duration::from_secs(10);
/// How soon LMs that did not answer are asked again while tasks wait on them.
const ASK_AGAIN: Duration = Duration::from_secs(3);

impl GmActor {
    /// Shows the previous life's jobs as the journal left them (ended tasks as they
    /// ended), then asks the LMs about the others before resuming them.
    pub(super) fn recover(&mut self, ctx: &mut Context<Self>) {
        let recovered = std::mem::take(&mut self.recovered);
        let (mut jobs, mut resubmitted) = (0, 0);
        let mut resume = Vec::new();
        for r in recovered {
            jobs += 1;
            self.last_job = self.last_job.max(Some(r.job));
            let at = r.accepted.accepted_at;
            let queues = self.queue_names_of(r.tasks.iter().map(|t| t.queue));
            let policy = r
                .accepted
                .retry
                .unwrap_or_else(|| self.core.lifecycle().default_policy());
            // Charged when they end: the tasks that had not ended.
            let open = (r.tasks.iter()).filter(|t| !r.ended.contains_key(&t.id.index));
            self.book_usage(open, r.accepted.user.as_deref());
            self.tracker
                .job_accepted(r.job, at, queues, r.accepted.user, policy.max_attempts);
            self.tracker.named(r.job, r.names);
            let mut again = Vec::new();
            // A gang's members that ended, as their last journaled run: if the gang
            // had not left its coordinator, it ran in part and restarts whole.
            let mut ran = Vec::new();
            for spec in &r.tasks {
                self.tracker.accepted(spec.id, at);
            }
            if let Some(dag) = &r.dag {
                self.tracker.job_dag(r.job, dag);
            }
            for mut spec in r.tasks {
                // The last run it went out as (or was to), and its failures.
                let (run, failed) = r.runs.get(&spec.id.index).copied().unwrap_or((1, 0));
                spec.attempt = run;
                self.tracker.resumed_as(spec.id, run);
                match r.ended.get(&spec.id.index) {
                    Some(e) if e.cancelled => {
                        self.tracker.cancelled(spec.id, e.at);
                    }
                    Some(e) => {
                        ran.push((spec.clone(), failed));
                        self.tracker.ended(
                            &TaskEnd {
                                used: None,
                                task: spec.id,
                                attempt: e.attempt,
                                node: NodeId(e.node),
                                at: e.at,
                                failure: e.failure.clone(),
                            },
                            e.at,
                        )
                    }
                    None => again.push((spec, failed)),
                }
            }
            resubmitted += again.len();
            if !again.is_empty() {
                // A DAG job resumes its stages where they were: the tasks that
                // ended for good in the earlier life count (see `gm_core::dag`).
                let dag = r.dag.map(|dag| ResumedDag {
                    job: r.job,
                    dag,
                    ended: r
                        .ended
                        .iter()
                        .filter(|(_, e)| !e.cancelled)
                        .map(|(&index, e)| (index, e.failure.is_some()))
                        .collect(),
                });
                // A gang the journal does not record as gone from its
                // coordinator resumes as a gang (restarted whole if some of it
                // ran: held ones are found by the LMs' answers); a cancelled one
                // does not.
                let cancelled = r.ended.values().any(|e| e.cancelled);
                let gang = (r.gang.filter(|_| !cancelled)).map(|g| (r.job, g, ran));
                resume.push((r.accepted.retry, again, dag, gang));
            }
        }
        if jobs == 0 {
            return;
        }
        tracing::info!(gm = %self.gm(), jobs, tasks = resubmitted, "jobs of the previous life read back from the journal; asking the LMs which of their tasks they hold");
        let lms = (0..self.links.len()).map(|l| LmId(l as u16)).collect();
        let deadline = Instant::now() + self.doubt_timeout;
        self.reconcile(resume, lms, deadline, ctx);
    }

    /// Asks `lms` which of the tasks to resume they hold or finished (a task
    /// resumed on another LM than the one running it would run twice), then resumes
    /// what their answers settle ([`Resume`]). A task no answering LM holds, while
    /// some LM has not answered, is in doubt: it may run there. It waits, and the
    /// silent LMs are asked again every [`ASK_AGAIN`], until every LM answered or
    /// the doubt timeout (`--doubt-timeout-s`, counted from the GM's start) passed.
    pub(super) fn reconcile(
        &mut self,
        resume: Vec<JobToResume>,
        lms: Vec<LmId>,
        deadline: Instant,
        ctx: &mut Context<Self>,
    ) {
        let gm = self.gm();
        let life = self.core.life();
        let tasks: Vec<(TaskId, u32)> = resume
            .iter()
            .flat_map(|(_, t, _, _)| t.iter().map(|(s, _)| (s.id, s.attempt)))
            .collect();
        let links: Vec<_> = lms
            .iter()
            .filter_map(|lm| self.links.get(lm.index()).map(|l| (*lm, l.clone())))
            .collect();
        let me = ctx.address();
        tokio::spawn(async move {
            let asks = links.into_iter().map(|(lm, link)| {
                let request = GmToLm::Reconcile(common::messages::ReconcileRequest {
                    gm,
                    lm,
                    tasks: tasks.clone(),
                    forget: false,
                    life,
                    preempts: Vec::new(),
                    preempt_seq: 0,
                });
                async move {
                    let call = link.call(request);
                    match tokio::time::timeout(ANSWER_WAIT, call).await {
                        Ok(Ok(LmToGm::ReconcileAnswer(a))) => Ok(a),
                        Ok(Ok(other)) => {
                            tracing::warn!(%lm, kind = other.kind(), "unexpected answer to a reconcile request; asking again");
                            Err(lm)
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(%lm, error = %e, "LM did not answer the reconcile request; the tasks it may run wait");
                            Err(lm)
                        }
                        Err(_) => {
                            tracing::warn!(%lm, wait_s = ANSWER_WAIT.as_secs(), "LM did not answer the reconcile request in time; the tasks it may run wait");
                            Err(lm)
                        }
                    }
                }
            });
            let (mut answers, mut unanswered) = (Vec::new(), Vec::new());
            for r in futures_util::future::join_all(asks).await {
                match r {
                    Ok(a) => answers.push(a),
                    Err(lm) => unanswered.push(lm),
                }
            }
            me.do_send(Resume {
                resume,
                answers,
                unanswered,
                deadline,
            });
        });
    }

    /// The LMs' base URLs (index = LM id): task logs are read through them.
    pub fn with_lm_urls(mut self, urls: Vec<String>) -> Self {
        self.lm_urls = urls;
        self
    }

    /// The cluster's attribute names (`--cluster-file`), with which a resumed job's
    /// utility tree is compiled again; default Megha's numbered `c0` .. `c63`.
    pub fn with_attributes(
        mut self,
        attributes: std::sync::Arc<common::attributes::Attributes>,
    ) -> Self {
        self.attributes = attributes;
        self
    }
}

/// A job's tasks to resume: its own retry policy (`None`: the GM's default), each
/// task with its runs failed so far, and its DAG until the core has it.
type JobToResume = (
    Option<RetryPolicy>,
    Vec<(TaskSpec, u32)>,
    Option<ResumedDag>,
    ResumedGang,
);

/// A gang job's spec, while the journal does not record that it left its
/// coordinator, with its members that ended (each as its last journaled run, and
/// its runs failed): it resumes as a gang, restarted whole if some of it ran
/// (docs/gangs.md).
type ResumedGang = Option<(common::JobId, common::gang::GangSpec, Vec<(TaskSpec, u32)>)>;

/// The LMs' answers to a restarted GM's reconcile requests, and the journal's tasks
/// to resume (with their runs failed so far): a task an LM holds counts as launched
/// there (its end will come), one an LM remembers finished ends finished, the others
/// go back to the core's queues as a new run, once no LM that may run them is
/// silent (`unanswered`) or the `deadline` passed.
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Resume {
    resume: Vec<JobToResume>,
    answers: Vec<common::messages::ReconcileResponse>,
    unanswered: Vec<LmId>,
    deadline: Instant,
}

impl Handler<Resume> for GmActor {
    type Result = ();

    fn handle(&mut self, msg: Resume, ctx: &mut Context<Self>) {
        let now = clock::now();
        let mut held = std::collections::HashMap::new();
        let mut finished = std::collections::HashSet::new();
        for a in &msg.answers {
            // Held by that life: if the view follows (or takes up) another, it is
            // asked again (see `lm_restart`).
            self.core.lm_life_heard(a.lm, a.incarnation);
            for &(task, node, run) in &a.held {
                held.insert(task, (a.lm, node, run));
            }
            finished.extend(a.finished.iter().copied());
        }
        // Tasks no answering LM holds may run at a silent one: they wait for its
        // answer until the deadline.
        let expired = Instant::now() >= msg.deadline;
        let wait = !msg.unanswered.is_empty() && !expired;
        let (mut running, mut done, mut again_n) = (0, 0, 0);
        let mut ends = Vec::new();
        let mut resumed = Vec::new();
        let mut in_doubt: Vec<JobToResume> = Vec::new();
        // Soft constraints: each resumed job gets its utility tree back from its
        // spec (the body it was submitted with, kept by the journal).
        let soft_jobs: Vec<common::JobId> = msg
            .resume
            .iter()
            .filter_map(|(_, tasks, _, _)| tasks.first().map(|t| t.0.id.job))
            .collect();
        for job in soft_jobs {
            self.resume_utility(job);
        }
        for (retry, tasks, mut dag, mut gang) in msg.resume {
            let mut again = Vec::new();
            let mut keep = Vec::new();
            let mut doubt = Vec::new();
            // Members of a gang still at its coordinator that an LM remembers
            // finished: they ran, so the gang restarts whole (not ended here).
            let mut ran_gang = Vec::new();
            for (mut spec, failed) in tasks {
                if let Some(&(lm, node, run)) = held.get(&spec.id) {
                    // With a tree, it counts in its job's utility again (its job's
                    // other tasks are placed knowing where it runs).
                    if self.core.soft().has(spec.id.job)
                        && !self.core.resumed_running(spec.id, lm, node)
                    {
                        tracing::warn!(task = %spec.id, job = spec.id.job.0, lm = lm.0, node = node.0,
                            "resumed task not counted in its job's utility: the view does not know its node yet");
                    }
                    self.tracker.resumed_as(spec.id, run);
                    self.tracker.dispatched(spec.id, lm, node);
                    self.tracker.launched(spec.id, now);
                    running += 1;
                    spec.attempt = run;
                    keep.push((spec, failed));
                } else if finished.contains(&spec.id) && gang.is_some() {
                    ran_gang.push((spec, failed));
                } else if finished.contains(&spec.id) {
                    if let Some(dag) = &mut dag {
                        dag.ended.push((spec.id.index, false));
                    }
                    ends.push(self.finished_at_lm(&spec, now));
                    done += 1;
                } else if wait {
                    doubt.push((spec, failed));
                } else {
                    // Its last run may have gone out (and its end still be on its
                    // way): the resumed run gets the next number.
                    spec.attempt += 1;
                    self.tracker.resumed_as(spec.id, spec.attempt);
                    again.push((spec, failed));
                }
            }
            again_n += again.len();
            // A gang still at its coordinator (the journal does not say it left)
            // with members to run again and none in doubt resumes as a gang: whole
            // if none ran, restarted whole otherwise (its members that ran, held or
            // ended, go to the core as held: docs/gangs.md). Else it resumes as
            // ordinary tasks (one in doubt while others resume now splits it).
            let whole = gang.is_some() && !again.is_empty() && doubt.is_empty();
            // All of it in doubt: decided once the silent LMs answer.
            let later = again.is_empty() && keep.is_empty() && ran_gang.is_empty();
            if whole {
                let ended_before = gang.as_mut().map(|g| std::mem::take(&mut g.2));
                keep.append(&mut ran_gang);
                keep.extend(ended_before.into_iter().flatten());
            } else if !later || doubt.is_empty() {
                gang = None;
                for (spec, _) in ran_gang.drain(..) {
                    ends.push(self.finished_at_lm(&spec, now));
                    done += 1;
                }
            }
            let resumes = !again.is_empty() || !keep.is_empty();
            if !doubt.is_empty() {
                // The DAG (and the gang) go with the first of the job's tasks
                // resumed.
                let later = if resumes { None } else { dag.take() };
                let gang_later = if resumes { None } else { gang.take() };
                in_doubt.push((retry, doubt, later, gang_later));
            }
            if resumes {
                let retry = retry.unwrap_or_else(|| self.core.lifecycle().default_policy());
                resumed.push(Resumed {
                    tasks: again,
                    held: keep,
                    retry,
                    dags: dag.into_iter().collect(),
                    gangs: gang.into_iter().map(|(job, spec, _)| (job, spec)).collect(),
                });
            }
        }
        // The new run numbers are durable before any of those runs goes out (a
        // second restart takes the next ones).
        let runs: Vec<_> = resumed
            .iter()
            .flat_map(|r| r.tasks.iter().map(|(s, f)| (s.id, s.attempt, *f)))
            .collect();
        self.journal_runs(&runs);
        let awaited: Vec<common::JobId> = resumed
            .iter()
            .flat_map(|r| r.dags.iter())
            .flat_map(|d| d.dag.after_jobs.iter().map(|a| a.job))
            .collect();
        for r in resumed {
            self.deliver(GmInput::Resume(r), ctx);
        }
        self.settle_awaited(awaited, ctx);
        self.journal_ends(&ends, &[], &[]);
        self.metrics.recovered_tasks += again_n as u64;
        let silent: Vec<String> = msg.unanswered.iter().map(|l| l.to_string()).collect();
        if expired && !msg.unanswered.is_empty() && again_n > 0 {
            self.metrics.resume_doubt_expired += again_n as u64;
            tracing::error!(gm = %self.gm(), silent_lms = ?silent, tasks = again_n, doubt_timeout_s = self.doubt_timeout.as_secs(), "LMs never answered which tasks they hold; resuming the tasks they may run (a task still running there runs twice)");
        }
        tracing::info!(gm = %self.gm(), lms_answered = msg.answers.len(), running, finished = done, resubmitted = again_n, "resumed the jobs of the previous life from the journal");
        let waiting: usize = in_doubt.iter().map(|(_, t, _, _)| t.len()).sum();
        self.metrics.resume_in_doubt = waiting as u64;
        if waiting > 0 {
            let left_s = msg
                .deadline
                .saturating_duration_since(Instant::now())
                .as_secs();
            tracing::warn!(gm = %self.gm(), silent_lms = ?silent, tasks = waiting, again_in_s = ASK_AGAIN.as_secs(), gives_up_in_s = left_s, "tasks of the previous life wait: an LM that may run them has not answered");
            let (lms, deadline) = (msg.unanswered, msg.deadline);
            ctx.run_later(ASK_AGAIN, move |act, ctx| {
                act.reconcile(in_doubt, lms, deadline, ctx)
            });
        }
    }
}

impl GmActor {
    /// A task to resume that an LM remembers finished: it ends finished (in the
    /// tracker; the end returned is for the journal).
    fn finished_at_lm(&mut self, spec: &TaskSpec, now: common::Micros) -> TaskEnd {
        let end = TaskEnd {
            used: None,
            task: spec.id,
            attempt: spec.attempt,
            node: NodeId(0),
            at: now,
            failure: None,
        };
        self.tracker.ended(&end, now);
        end
    }

    /// Gives a resumed job its utility tree back, if its kept spec has one.
    fn resume_utility(&mut self, job: common::JobId) {
        let Some(Ok(Some(stored))) = self.journal.as_ref().map(|j| j.spec(job)) else {
            return;
        };
        let Ok(body) = crate::service::durable::specs::unpack(&stored.packed) else {
            return;
        };
        if let Some(utility) =
            crate::service::admission::utility_api::utility_of_spec(&body, &self.attributes)
        {
            self.core.set_utility(job, utility);
        }
    }
}
