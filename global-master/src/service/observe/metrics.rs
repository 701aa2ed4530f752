//! The GM's Prometheus metrics, declared once as a table ([`GM_METRICS`]): each
//! family's name, type, help text and how to read its value from the actor (the
//! table type is `service_kit::metrics::table`'s, shared with the LM and worker). The
//! names and help texts are those of `docs/metrics.md` (linted against them).
//! Rendered in this order, then the preemption, launch-latency and LRA families.

use crate::service::actor::GmActor;
use common::Micros;
use service_kit::metrics::table::{self, Metric, Read};
use service_kit::metrics::Page;

use Read::{By, One};

/// Appends every family of [`GM_METRICS`] to `out`, read at `now`.
pub fn render(g: &GmActor, now: Micros, out: &mut Page) {
    table::render(GM_METRICS, g, now, out);
}

/// Tasks waiting in each user queue, by queue name.
fn queue_lengths(g: &GmActor, _: Micros) -> Vec<(String, f64)> {
    g.core()
        .queues()
        .lengths()
        .map(|(q, n)| {
            let name = g.queue_names().get(q.index()).map_or("?", String::as_str);
            (name.to_owned(), n as f64)
        })
        .collect()
}

/// Placement decisions by kind.
fn placements(g: &GmActor, _: Micros) -> Vec<(String, f64)> {
    let s = g.core().stats();
    vec![
        ("internal".into(), s.dispatched_internal as f64),
        ("repartition".into(), s.dispatched_repartition as f64),
    ]
}

/// The exact batch solves of soft constraints, by outcome.
fn soft_ilp_solves(g: &GmActor, _: Micros) -> Vec<(String, f64)> {
    let s = g.core().stats();
    vec![
        ("planned".into(), s.soft_ilp_solves as f64),
        ("fallback".into(), s.soft_ilp_fallbacks as f64),
    ]
}

/// Age of the newest state of each LM (infinite before the first).
fn heartbeat_ages(g: &GmActor, now: Micros) -> Vec<(String, f64)> {
    g.shell_metrics()
        .last_snapshot
        .iter()
        .enumerate()
        .map(|(l, t)| {
            let age = t
                .map(|t| now.since(t).as_secs_f64())
                .unwrap_or(f64::INFINITY);
            (l.to_string(), age)
        })
        .collect()
}

/// One figure of the accounting per queue (since this process started).
fn usage_by_queue(g: &GmActor, read: fn(&super::usage::Totals) -> f64) -> Vec<(String, f64)> {
    g.usage()
        .per_queue()
        .map(|(q, t)| (q.to_owned(), read(t)))
        .collect()
}

/// The GM's own families, in the order `/metrics` shows them.
pub const GM_METRICS: &[Metric<GmActor>] = &[
    Metric {
        name: "megha_gm_queue_length",
        kind: "gauge",
        help: "Tasks waiting in each user queue.",
        read: By("queue", queue_lengths),
    },
    Metric {
        name: "megha_gm_outstanding",
        kind: "gauge",
        help: "Tasks sent to an LM and not yet answered.",
        read: One(|g| g.core().outstanding() as f64),
    },
    Metric {
        name: "megha_gm_full_view",
        kind: "gauge",
        help: "1 once the state of every LM has arrived.",
        read: One(|g| f64::from(u8::from(g.core().has_full_view()))),
    },
    Metric {
        name: "megha_gm_other_life_snapshots_total",
        kind: "counter",
        help: "LM snapshots of another life than the one the view follows, not taken (an LM restarted with its clock behind, or two LMs publishing with one id).",
        read: One(|g| g.core().stats().other_life_snapshots as f64),
    },
    Metric {
        name: "megha_gm_lm_new_lives_total",
        kind: "counter",
        help: "LM snapshots that brought a new life of an LM the view followed.",
        read: One(|g| g.core().stats().lm_new_lives as f64),
    },
    Metric {
        name: "megha_gm_submitted_total",
        kind: "counter",
        help: "Tasks accepted.",
        read: One(|g| g.core().stats().submitted as f64),
    },
    Metric {
        name: "megha_gm_placements_total",
        kind: "counter",
        help: "Placement decisions sent to LMs, by kind.",
        read: By("placement", placements),
    },
    Metric {
        name: "megha_gm_repartitions_total",
        kind: "counter",
        help: "Repartition requests (placements in another GM's partition).",
        read: One(|g| g.core().stats().dispatched_repartition as f64),
    },
    Metric {
        name: "megha_gm_launched_total",
        kind: "counter",
        help: "Tasks the LMs accepted (an end that overtook its launch answer counts).",
        read: One(|g| g.core().stats().launched as f64),
    },
    Metric {
        name: "megha_gm_tasks_finished_total",
        kind: "counter",
        help: "Tasks of this GM the LMs reported finished (exit 0).",
        read: One(|g| g.core().stats().tasks_finished as f64),
    },
    Metric {
        name: "megha_gm_tasks_failed_total",
        kind: "counter",
        help: "Tasks of this GM the LMs reported failed (exit code, signal, start failure).",
        read: One(|g| g.core().stats().tasks_failed as f64),
    },
    Metric {
        name: "megha_gm_foreign_snapshots_total",
        kind: "counter",
        help: "LM states refused: cut for another number of GMs (another cluster on this broker?).",
        read: One(|g| g.core().stats().foreign_snapshots as f64),
    },
    Metric {
        name: "megha_gm_tasks_started_total",
        kind: "counter",
        help: "Tasks of this GM the LMs reported started.",
        read: One(|g| g.core().stats().tasks_started as f64),
    },
    Metric {
        name: "megha_gm_tasks_retried_total",
        kind: "counter",
        help: "Failed or lost tasks run again under their job's retry policy.",
        read: One(|g| g.core().stats().tasks_retried as f64),
    },
    Metric {
        name: "megha_gm_jobs_cancelled_total",
        kind: "counter",
        help: "Jobs cancelled (DELETE /v1/jobs/{id}).",
        read: One(|g| g.core().stats().jobs_cancelled as f64),
    },
    Metric {
        name: "megha_gm_tasks_cancelled_total",
        kind: "counter",
        help: "Tasks taken out of the queues for a cancel, or stopped by their LM.",
        read: One(|g| g.core().stats().tasks_cancelled as f64),
    },
    Metric {
        name: "megha_gm_cancel_requests_sent_total",
        kind: "counter",
        help: "Cancel requests sent to LMs.",
        read: One(|g| g.core().stats().cancels_sent as f64),
    },
    Metric {
        name: "megha_gm_cancel_requests_abandoned_total",
        kind: "counter",
        help: "Cancel requests given up after every resend failed.",
        read: One(|g| g.core().stats().cancels_abandoned as f64),
    },
    Metric {
        name: "megha_gm_retry_tracked_tasks",
        kind: "gauge",
        help: "Tasks kept for a possible retry.",
        read: One(|g| g.core().lifecycle().tracked() as f64),
    },
    Metric {
        name: "megha_gm_retry_waiting_tasks",
        kind: "gauge",
        help: "Failed tasks waiting for their backoff.",
        read: One(|g| g.core().lifecycle().waiting() as f64),
    },
    Metric {
        name: "megha_gm_status_jobs",
        kind: "gauge",
        help: "Jobs the status API holds.",
        read: One(|g| g.tracker().size().0 as f64),
    },
    Metric {
        name: "megha_gm_status_tasks",
        kind: "gauge",
        help: "Tasks the status API holds.",
        read: One(|g| g.tracker().size().1 as f64),
    },
    Metric {
        name: "megha_gm_jobs_forgotten_total",
        kind: "counter",
        help: "Ended jobs forgotten after the retention time or count.",
        read: One(|g| g.tracker().forgotten as f64),
    },
    Metric {
        name: "megha_gm_lm_rejections_total",
        kind: "counter",
        help: "Launch requests refused by an LM (stale view).",
        read: One(|g| g.core().stats().lm_rejections as f64),
    },
    Metric {
        name: "megha_gm_stale_run_reports_total",
        kind: "counter",
        help: "Ends and starts of task runs already replaced by a retry (late reports of lost runs), and repeated ends: ignored.",
        read: One(|g| g.core().stats().stale_run_reports as f64),
    },
    Metric {
        name: "megha_gm_late_finishes_taken_total",
        kind: "counter",
        help: "Finishes of task runs reported lost taken as the task's end: heard before their retry went out, or after the retry failed (the work was done).",
        read: One(|g| g.core().stats().late_finishes_taken as f64),
    },
    Metric {
        name: "megha_gm_stale_launch_answers_total",
        kind: "counter",
        help: "Launch answers for a task that awaits another batch's answer (its run was replaced by a retry): ignored.",
        read: One(|g| g.core().stats().stale_answers as f64),
    },
    Metric {
        name: "megha_gm_undelivered_runs_of_ended_tasks_total",
        kind: "counter",
        help: "Runs of a launch batch that never reached its LM whose task had ended for good meanwhile: not queued again.",
        read: One(|g| g.core().stats().undelivered_after_end as f64),
    },
    Metric {
        name: "megha_gm_ended_before_answer_total",
        kind: "counter",
        help: "Task runs that ended before their launch batch was answered (the answer was lost or is late).",
        read: One(|g| g.core().stats().ended_before_answer as f64),
    },
    Metric {
        name: "megha_gm_requeues_total",
        kind: "counter",
        help: "Tasks that found no free node in a pass.",
        read: One(|g| g.core().stats().requeues as f64),
    },
    Metric {
        name: "megha_gm_retries_total",
        kind: "counter",
        help: "Placement attempts of tasks tried before (blocked tasks woken, refused ones).",
        read: One(|g| g.core().stats().retries as f64),
    },
    Metric {
        name: "megha_gm_woken_total",
        kind: "counter",
        help: "Blocked tasks in the classes woken by a gain of resources.",
        read: One(|g| g.core().stats().woken as f64),
    },
    Metric {
        name: "megha_gm_unplaceable_total",
        kind: "counter",
        help: "Tasks no node can ever host.",
        read: One(|g| g.core().stats().unplaceable as f64),
    },
    Metric {
        name: "megha_gm_snapshots_applied_total",
        kind: "counter",
        help: "LM states applied.",
        read: One(|g| g.core().stats().snapshots_applied as f64),
    },
    Metric {
        name: "megha_gm_passes_total",
        kind: "counter",
        help: "Scheduling passes that decided something.",
        read: One(|g| g.shell_metrics().passes as f64),
    },
    Metric {
        name: "megha_gm_batches_sent_total",
        kind: "counter",
        help: "Launch batches sent.",
        read: One(|g| g.shell_metrics().sent.get(common::protocol::kind::LAUNCH) as f64),
    },
    Metric {
        name: "megha_gm_launch_resends_moot_total",
        kind: "counter",
        help: "Launch batches in doubt not sent again because every run in them ended meanwhile (its end came on the LM's stream).",
        read: One(|g| g.shell_metrics().resends_moot as f64),
    },
    Metric {
        name: "megha_gm_launch_resend_runs_left_out_total",
        kind: "counter",
        help: "Runs left out of a launch batch sent again because their end came meanwhile (a restarted LM would run them again).",
        read: One(|g| g.shell_metrics().resend_runs_left_out as f64),
    },
    Metric {
        name: "megha_gm_unexpected_outcomes_total",
        kind: "counter",
        help: "Launch outcomes for tasks this GM was not waiting for (already answered or unknown, and not ended), ignored.",
        read: One(|g| g.shell_metrics().unexpected_outcomes as f64),
    },
    Metric {
        name: "megha_gm_answers_after_end_total",
        kind: "counter",
        help: "Launch answers that came after their task's end (a short run's end, on the LM's stream, overtook the answer): expected, ignored.",
        read: One(|g| g.shell_metrics().answers_after_end as f64),
    },
    Metric {
        name: "megha_gm_journal_errors_total",
        kind: "counter",
        help: "Journal writes that failed (submissions refused with 503, task ends not recorded).",
        read: One(|g| g.shell_metrics().journal_errors as f64),
    },
    Metric {
        name: "megha_gm_launches_withheld_total",
        kind: "counter",
        help: "Launch batches and preemption requests not sent because the GM had stopped (its drain reported the queued tasks suspended; the next life resumes them).",
        read: One(|g| g.shell_metrics().launches_withheld as f64),
    },
    Metric {
        name: "megha_gm_dag_jobs",
        kind: "gauge",
        help: "DAG jobs of this GM with a stage still to end.",
        read: One(|g| g.core().dags().len() as f64),
    },
    Metric {
        name: "megha_gm_dag_tasks_blocked",
        kind: "gauge",
        help: "Tasks of DAG jobs held until a parent stage of theirs ends.",
        read: One(|g| g.core().dags().held() as f64),
    },
    Metric {
        name: "megha_gm_dag_tasks_released_total",
        kind: "counter",
        help: "Tasks of DAG jobs queued once every parent stage of theirs ended.",
        read: One(|g| g.core().dags().released as f64),
    },
    Metric {
        name: "megha_gm_dag_tasks_never_run_total",
        kind: "counter",
        help: "Tasks of DAG jobs that ended failed without running because a parent stage failed.",
        read: One(|g| g.core().dags().never_run as f64),
    },
    Metric {
        name: "megha_gm_recovered_tasks_total",
        kind: "counter",
        help: "Tasks of a previous life's jobs resubmitted from the journal at start.",
        read: One(|g| g.shell_metrics().recovered_tasks as f64),
    },
    Metric {
        name: "megha_gm_resume_in_doubt_tasks",
        kind: "gauge",
        help: "Tasks of the previous life waiting to be resumed until an LM that may run them answers.",
        read: One(|g| g.shell_metrics().resume_in_doubt as f64),
    },
    Metric {
        name: "megha_gm_resume_doubt_expired_total",
        kind: "counter",
        help: "Tasks resumed after the doubt timeout without an answer from every LM (they may run twice).",
        read: One(|g| g.shell_metrics().resume_doubt_expired as f64),
    },
    Metric {
        name: "megha_gm_lm_restarts_total",
        kind: "counter",
        help: "New lives of LMs (restarts) this GM's view took up.",
        read: One(|g| g.shell_metrics().lm_restarts_seen as f64),
    },
    Metric {
        name: "megha_gm_lm_reconciles_total",
        kind: "counter",
        help: "Restarted LMs that answered which of this GM's tasks they still hold.",
        read: One(|g| g.shell_metrics().lm_reconciles as f64),
    },
    Metric {
        name: "megha_gm_lm_reconciles_failed_total",
        kind: "counter",
        help: "Restarted LMs that never answered that question (after 5 asks).",
        read: One(|g| g.shell_metrics().lm_reconciles_failed as f64),
    },
    Metric {
        name: "megha_gm_reconciled_finished_total",
        kind: "counter",
        help: "Tasks ended finished because a restarted LM remembered them finished.",
        read: One(|g| g.shell_metrics().reconciled_finished as f64),
    },
    Metric {
        name: "megha_gm_reconciled_lost_total",
        kind: "counter",
        help: "Tasks a restarted LM neither held nor remembered finished (reported lost).",
        read: One(|g| g.shell_metrics().reconciled_lost as f64),
    },
    Metric {
        name: "megha_gm_journal_jobs",
        kind: "gauge",
        help: "Jobs in the journal (accepted, not every task ended); 0 without --data-dir.",
        read: One(|g| g.journal().map_or(0, |j| j.jobs()) as f64),
    },
    Metric {
        name: "megha_gm_reannounced_failures_total",
        kind: "counter",
        help: "Failures a worker listed to a restarted LM that this GM took as their tasks' ends and published again, marked reannounced (their event may have died with the LM).",
        read: One(|g| g.shell_metrics().reannounced_failures as f64),
    },
    Metric {
        name: "megha_gm_lm_published_ends_ignored_total",
        kind: "counter",
        help: "Ends an LM left for this GM to publish (its verdicts lost, failures a worker listed to a restarted LM) that were not of an open task's current run here (replaced by a retry, or the task ended): ignored.",
        read: One(|g| g.shell_metrics().reannounced_stale as f64),
    },
    Metric {
        name: "megha_gm_batches_abandoned_total",
        kind: "counter",
        help: "Launch batches that never reached their LM (tasks requeued).",
        read: One(|g| g.shell_metrics().batches_abandoned as f64),
    },
    Metric {
        name: "megha_gm_lm_busy_total",
        kind: "counter",
        help: "Requests an LM answered busy (503 with Retry-After: it applied nothing); placement passed that LM by until then.",
        read: One(|g| g.core().stats().lm_busy as f64),
    },
    Metric {
        name: "megha_gm_gangs_started_total",
        kind: "counter",
        help: "Gangs whose every part was committed (all their members launched together).",
        read: One(|g| g.core().gangs().stats.started as f64),
    },
    Metric {
        name: "megha_gm_gang_attempts_released_total",
        kind: "counter",
        help: "Gang reserve rounds given up (a part refused, unanswered in time or undelivered): every part released, retried with the next generation.",
        read: One(|g| g.core().gangs().stats.released_attempts as f64),
    },
    Metric {
        name: "megha_gm_gang_stale_answers_total",
        kind: "counter",
        help: "LM answers of an abandoned gang generation: never committed (a held part is released).",
        read: One(|g| g.core().gangs().stats.stale_answers as f64),
    },
    Metric {
        name: "megha_gm_gangs_broken_total",
        kind: "counter",
        help: "Gangs broken after their commit (a part could not launch while others may have: its LM lost the hold, or a member's node went down): every member stopped, the gang restarted whole with the next generation.",
        read: One(|g| g.core().gangs().stats.broken as f64),
    },
    Metric {
        name: "megha_gm_gang_void_ends_total",
        kind: "counter",
        help: "Ends of gang members' runs of a generation restarted whole: dropped (the run's work does not count; the member runs again with its gang).",
        read: One(|g| g.core().gangs().stats.void_ends as f64),
    },
    Metric {
        name: "megha_gm_gangs_timed_out_total",
        kind: "counter",
        help: "Gangs that did not start within their timeout (failed, or queued one by one with run_partial).",
        read: One(|g| g.core().gangs().stats.timed_out as f64),
    },
    Metric {
        name: "megha_gm_gangs_waiting",
        kind: "gauge",
        help: "Gangs waiting to start together.",
        read: One(|g| g.core().gangs().len() as f64),
    },
    Metric {
        name: "megha_gm_soft_ilp_solves_total",
        kind: "counter",
        help: "Exact solves of the waiting tasks of jobs with utility trees (--soft-ilp-ms, the designated GM only), by outcome: planned, or fallback (a timeout or a solver fault left them to the greedy step).",
        read: By("outcome", soft_ilp_solves),
    },
    Metric {
        name: "megha_gm_submissions_refused_total",
        kind: "counter",
        help: "Submissions answered 429 (GM full).",
        read: One(|g| g.shell_metrics().submissions_refused_full as f64),
    },
    // Accounting, by queue only: users are not bounded (an admin may submit as
    // any name), queues are (the GM's configuration); per user: GET /v1/usage.
    Metric {
        name: "megha_gm_usage_runs_total",
        kind: "counter",
        help: "Runs that ended (finished, failed, lost, preempted or cancelled while running), by queue.",
        read: By("queue", |g, _| usage_by_queue(g, |t| t.runs as f64)),
    },
    Metric {
        name: "megha_gm_usage_run_seconds_total",
        kind: "counter",
        help: "Run time of the runs that ended (start to end at the worker), by queue.",
        read: By("queue", |g, _| usage_by_queue(g, |t| t.wall_ms as f64 / 1e3)),
    },
    Metric {
        name: "megha_gm_usage_cpu_core_seconds_reserved_total",
        kind: "counter",
        help: "CPU the runs that ended reserved, times their run time (core-seconds), by queue.",
        read: By("queue", |g, _| usage_by_queue(g, |t| t.cpu_milli_ms as f64 / 1e6)),
    },
    Metric {
        name: "megha_gm_usage_memory_byte_seconds_reserved_total",
        kind: "counter",
        help: "Memory the runs that ended reserved, times their run time (byte-seconds), by queue.",
        read: By("queue", |g, _| {
            usage_by_queue(g, |t| t.memory_mb_ms as f64 / 1e3 * 1_048_576.0)
        }),
    },
    Metric {
        name: "megha_gm_usage_unbooked_runs_total",
        kind: "counter",
        help: "Run ends of tasks this GM had not booked (not charged; each one logged).",
        read: One(|g| g.usage().unbooked as f64),
    },
    Metric {
        name: "megha_gm_heartbeat_age_seconds",
        kind: "gauge",
        help: "Age of the newest state received from each LM.",
        read: By("lm", heartbeat_ages),
    },
];
