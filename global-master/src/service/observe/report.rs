//! Read-only views of the GM actor: the pending list with reasons and the
//! Prometheus metrics text.

use crate::service::actor::GmActor;
use actix::prelude::*;
use common::reasons::PendingReason;
use serde::Serialize;
use service_kit::clock;
use service_kit::metrics::{family, single, Page};

/// One task waiting in the GM, with why.
#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct PendingTask {
    pub job: u64,
    pub index: u32,
    pub queue: u16,
    pub attempts: u32,
    pub waiting_s: f64,
    pub reason: String,
    pub reason_detail: Option<PendingReason>,
}

#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct PendingList {
    pub total: usize,
    pub shown: Vec<PendingTask>,
}

#[derive(Message, Debug)]
#[rtype(result = "PendingList")]
pub struct GetPending {
    pub limit: usize,
}

impl Handler<GetPending> for GmActor {
    type Result = MessageResult<GetPending>;

    fn handle(&mut self, msg: GetPending, _: &mut Context<Self>) -> Self::Result {
        let now = clock::now();
        let full = self.core().has_full_view();
        let queues = self.core().queues();
        let shown = queues
            .iter()
            .take(msg.limit)
            .map(|p| {
                let detail = match (&p.reason, full) {
                    (Some(r), _) => Some(r.clone()),
                    (None, false) => Some(PendingReason::NoStateYet),
                    (None, true) => None,
                };
                PendingTask {
                    job: p.task.id.job.0,
                    index: p.task.id.index,
                    queue: p.task.queue.0,
                    attempts: p.attempts,
                    waiting_s: now.since(p.submitted_at).as_secs_f64(),
                    reason: detail
                        .as_ref()
                        .map(|r| r.to_string())
                        .unwrap_or_else(|| "not tried yet".into()),
                    reason_detail: detail,
                }
            })
            .collect();
        MessageResult(PendingList {
            total: queues.len(),
            shown,
        })
    }
}

#[derive(Message, Debug)]
#[rtype(result = "Page")]
pub struct RenderMetrics;

impl Handler<RenderMetrics> for GmActor {
    type Result = MessageResult<RenderMetrics>;

    fn handle(&mut self, _: RenderMetrics, _: &mut Context<Self>) -> Self::Result {
        let now = clock::now();
        let s = self.core().stats().clone();
        let m = self.shell_metrics();
        let mut out = Page::new();
        let queues: Vec<(String, f64)> = self
            .core()
            .queues()
            .lengths()
            .map(|(q, n)| {
                let name = self
                    .queue_names()
                    .get(q.index())
                    .map_or("?", String::as_str);
                (name.to_owned(), n as f64)
            })
            .collect();
        family(
            &mut out,
            "megha_gm_queue_length",
            "gauge",
            "Tasks waiting in each user queue.",
            "queue",
            &queues,
        );
        single(
            &mut out,
            "megha_gm_outstanding",
            "gauge",
            "Tasks sent to an LM and not yet answered.",
            self.core().outstanding() as f64,
        );
        single(
            &mut out,
            "megha_gm_full_view",
            "gauge",
            "1 once the state of every LM has arrived.",
            f64::from(u8::from(self.core().has_full_view())),
        );
        single(
            &mut out,
            "megha_gm_other_life_snapshots_total",
            "counter",
            "LM snapshots of another life than the one the view follows, not taken (an LM restarted with its clock behind, or two LMs publishing with one id).",
            s.other_life_snapshots as f64,
        );
        single(
            &mut out,
            "megha_gm_lm_new_lives_total",
            "counter",
            "LM snapshots that brought a new life of an LM the view followed.",
            s.lm_new_lives as f64,
        );
        single(
            &mut out,
            "megha_gm_submitted_total",
            "counter",
            "Tasks accepted.",
            s.submitted as f64,
        );
        family(
            &mut out,
            "megha_gm_placements_total",
            "counter",
            "Placement decisions sent to LMs, by kind.",
            "placement",
            &[
                ("internal".into(), s.dispatched_internal as f64),
                ("repartition".into(), s.dispatched_repartition as f64),
            ],
        );
        single(
            &mut out,
            "megha_gm_repartitions_total",
            "counter",
            "Repartition requests (placements in another GM's partition).",
            s.dispatched_repartition as f64,
        );
        single(
            &mut out,
            "megha_gm_launched_total",
            "counter",
            "Tasks the LMs accepted (an end that overtook its launch answer counts).",
            s.launched as f64,
        );
        single(
            &mut out,
            "megha_gm_tasks_finished_total",
            "counter",
            "Tasks of this GM the LMs reported finished (exit 0).",
            s.tasks_finished as f64,
        );
        single(
            &mut out,
            "megha_gm_tasks_failed_total",
            "counter",
            "Tasks of this GM the LMs reported failed (exit code, signal, start failure).",
            s.tasks_failed as f64,
        );
        let (jobs_kept, tasks_kept) = self.tracker().size();
        let lifecycle = self.core().lifecycle();
        for (name, kind, help, value) in [
            (
                "megha_gm_foreign_snapshots_total",
                "counter",
                "LM states refused: cut for another number of GMs (another cluster on this broker?).",
                s.foreign_snapshots,
            ),
            (
                "megha_gm_tasks_started_total",
                "counter",
                "Tasks of this GM the LMs reported started.",
                s.tasks_started,
            ),
            (
                "megha_gm_tasks_retried_total",
                "counter",
                "Failed or lost tasks run again under their job's retry policy.",
                s.tasks_retried,
            ),
            (
                "megha_gm_jobs_cancelled_total",
                "counter",
                "Jobs cancelled (DELETE /v1/jobs/{id}).",
                s.jobs_cancelled,
            ),
            (
                "megha_gm_tasks_cancelled_total",
                "counter",
                "Tasks taken out of the queues for a cancel, or stopped by their LM.",
                s.tasks_cancelled,
            ),
            (
                "megha_gm_cancel_requests_sent_total",
                "counter",
                "Cancel requests sent to LMs.",
                s.cancels_sent,
            ),
            (
                "megha_gm_cancel_requests_abandoned_total",
                "counter",
                "Cancel requests given up after every resend failed.",
                s.cancels_abandoned,
            ),
            (
                "megha_gm_retry_tracked_tasks",
                "gauge",
                "Tasks kept for a possible retry.",
                lifecycle.tracked() as u64,
            ),
            (
                "megha_gm_retry_waiting_tasks",
                "gauge",
                "Failed tasks waiting for their backoff.",
                lifecycle.waiting() as u64,
            ),
            (
                "megha_gm_status_jobs",
                "gauge",
                "Jobs the status API holds.",
                jobs_kept as u64,
            ),
            (
                "megha_gm_status_tasks",
                "gauge",
                "Tasks the status API holds.",
                tasks_kept as u64,
            ),
            (
                "megha_gm_jobs_forgotten_total",
                "counter",
                "Ended jobs forgotten after the retention time or count.",
                self.tracker().forgotten,
            ),
        ] {
            single(&mut out, name, kind, help, value as f64);
        }
        single(
            &mut out,
            "megha_gm_lm_rejections_total",
            "counter",
            "Launch requests refused by an LM (stale view).",
            s.lm_rejections as f64,
        );
        single(
            &mut out,
            "megha_gm_stale_run_reports_total",
            "counter",
            "Ends and starts of task runs already replaced by a retry (late reports of lost runs), and repeated ends: ignored.",
            s.stale_run_reports as f64,
        );
        single(
            &mut out,
            "megha_gm_late_finishes_taken_total",
            "counter",
            "Finishes of task runs reported lost taken as the task's end: heard before their retry went out, or after the retry failed (the work was done).",
            s.late_finishes_taken as f64,
        );
        single(
            &mut out,
            "megha_gm_stale_launch_answers_total",
            "counter",
            "Launch answers for a task that awaits another batch's answer (its run was replaced by a retry): ignored.",
            s.stale_answers as f64,
        );
        single(
            &mut out,
            "megha_gm_undelivered_runs_of_ended_tasks_total",
            "counter",
            "Runs of a launch batch that never reached its LM whose task had ended for good meanwhile: not queued again.",
            s.undelivered_after_end as f64,
        );
        single(
            &mut out,
            "megha_gm_ended_before_answer_total",
            "counter",
            "Task runs that ended before their launch batch was answered (the answer was lost or is late).",
            s.ended_before_answer as f64,
        );
        single(
            &mut out,
            "megha_gm_requeues_total",
            "counter",
            "Tasks that found no free node in a pass.",
            s.requeues as f64,
        );
        single(
            &mut out,
            "megha_gm_retries_total",
            "counter",
            "Placement attempts of tasks tried before (blocked tasks woken, refused ones).",
            s.retries as f64,
        );
        single(
            &mut out,
            "megha_gm_woken_total",
            "counter",
            "Blocked tasks in the classes woken by a gain of resources.",
            s.woken as f64,
        );
        single(
            &mut out,
            "megha_gm_unplaceable_total",
            "counter",
            "Tasks no node can ever host.",
            s.unplaceable as f64,
        );
        single(
            &mut out,
            "megha_gm_snapshots_applied_total",
            "counter",
            "LM states applied.",
            s.snapshots_applied as f64,
        );
        single(
            &mut out,
            "megha_gm_passes_total",
            "counter",
            "Scheduling passes that decided something.",
            m.passes as f64,
        );
        single(
            &mut out,
            "megha_gm_batches_sent_total",
            "counter",
            "Launch batches sent.",
            m.batches_sent as f64,
        );
        single(
            &mut out,
            "megha_gm_launch_resends_moot_total",
            "counter",
            "Launch batches in doubt not sent again because every run in them ended meanwhile (its end came on the LM's stream).",
            m.resends_moot as f64,
        );
        single(
            &mut out,
            "megha_gm_launch_resend_runs_left_out_total",
            "counter",
            "Runs left out of a launch batch sent again because their end came meanwhile (a restarted LM would run them again).",
            m.resend_runs_left_out as f64,
        );
        single(
            &mut out,
            "megha_gm_unexpected_outcomes_total",
            "counter",
            "Launch outcomes for tasks this GM was not waiting for (already answered or unknown), ignored.",
            m.unexpected_outcomes as f64,
        );
        single(
            &mut out,
            "megha_gm_journal_errors_total",
            "counter",
            "Journal writes that failed (submissions refused with 503, task ends not recorded).",
            m.journal_errors as f64,
        );
        single(
            &mut out,
            "megha_gm_launches_withheld_total",
            "counter",
            "Launch batches and preemption requests not sent because the GM had stopped (its drain reported the queued tasks suspended; the next life resumes them).",
            m.launches_withheld as f64,
        );
        single(
            &mut out,
            "megha_gm_recovered_tasks_total",
            "counter",
            "Tasks of a previous life's jobs resubmitted from the journal at start.",
            m.recovered_tasks as f64,
        );
        single(
            &mut out,
            "megha_gm_resume_in_doubt_tasks",
            "gauge",
            "Tasks of the previous life waiting to be resumed until an LM that may run them answers.",
            m.resume_in_doubt as f64,
        );
        single(
            &mut out,
            "megha_gm_resume_doubt_expired_total",
            "counter",
            "Tasks resumed after the doubt timeout without an answer from every LM (they may run twice).",
            m.resume_doubt_expired as f64,
        );
        single(
            &mut out,
            "megha_gm_lm_restarts_total",
            "counter",
            "New lives of LMs (restarts) this GM's view took up.",
            m.lm_restarts_seen as f64,
        );
        single(
            &mut out,
            "megha_gm_lm_reconciles_total",
            "counter",
            "Restarted LMs that answered which of this GM's tasks they still hold.",
            m.lm_reconciles as f64,
        );
        single(
            &mut out,
            "megha_gm_lm_reconciles_failed_total",
            "counter",
            "Restarted LMs that never answered that question (after 5 asks).",
            m.lm_reconciles_failed as f64,
        );
        single(
            &mut out,
            "megha_gm_reconciled_finished_total",
            "counter",
            "Tasks ended finished because a restarted LM remembered them finished.",
            m.reconciled_finished as f64,
        );
        single(
            &mut out,
            "megha_gm_reconciled_lost_total",
            "counter",
            "Tasks a restarted LM neither held nor remembered finished (reported lost).",
            m.reconciled_lost as f64,
        );
        single(
            &mut out,
            "megha_gm_journal_jobs",
            "gauge",
            "Jobs in the journal (accepted, not every task ended); 0 without --data-dir.",
            self.journal().map_or(0, |j| j.jobs()) as f64,
        );
        single(
            &mut out,
            "megha_gm_reannounced_failures_total",
            "counter",
            "Failures a worker listed to a restarted LM that this GM took as their tasks' ends and published again, marked reannounced (their event may have died with the LM).",
            m.reannounced_failures as f64,
        );
        single(
            &mut out,
            "megha_gm_lm_published_ends_ignored_total",
            "counter",
            "Ends an LM left for this GM to publish (its verdicts lost, failures a worker listed to a restarted LM) that were not of an open task's current run here (replaced by a retry, or the task ended): ignored.",
            m.reannounced_stale as f64,
        );
        single(
            &mut out,
            "megha_gm_batches_abandoned_total",
            "counter",
            "Launch batches that never reached their LM (tasks requeued).",
            m.batches_abandoned as f64,
        );
        single(
            &mut out,
            "megha_gm_lm_busy_total",
            "counter",
            "Requests an LM answered busy (503 with Retry-After: it applied nothing); placement passed that LM by until then.",
            s.lm_busy as f64,
        );
        single(
            &mut out,
            "megha_gm_submissions_refused_total",
            "counter",
            "Submissions answered 429 (GM full).",
            m.submissions_refused_full as f64,
        );
        let ages: Vec<(String, f64)> = m
            .last_snapshot
            .iter()
            .enumerate()
            .map(|(l, t)| {
                let age = t
                    .map(|t| now.since(t).as_secs_f64())
                    .unwrap_or(f64::INFINITY);
                (l.to_string(), age)
            })
            .collect();
        family(
            &mut out,
            "megha_gm_heartbeat_age_seconds",
            "gauge",
            "Age of the newest state received from each LM.",
            "lm",
            &ages,
        );
        self.render_preempt_metrics(&mut out);
        out.histogram(&m.launch_latency);
        crate::service::actor::lra_actor::render_lra_metrics(
            &mut out,
            &s,
            self.core().lras_waiting(),
        );
        MessageResult(out)
    }
}
