//! The worker's Prometheus metrics.

use super::{WorkerActor, EXECUTORS};
use actix::prelude::*;
use service_kit::metrics::{family, single, Page};

#[derive(Message, Debug)]
#[rtype(result = "Page")]
pub struct RenderMetrics;

impl Handler<RenderMetrics> for WorkerActor {
    type Result = MessageResult<RenderMetrics>;
    fn handle(&mut self, _: RenderMetrics, _: &mut Context<Self>) -> Self::Result {
        let (running, undelivered) = self.load();
        let c = &self.counters;
        let mut out = Page::new();
        single(
            &mut out,
            "megha_worker_nodes",
            "gauge",
            "Nodes this worker runs.",
            self.nodes.len() as f64,
        );
        single(
            &mut out,
            "megha_worker_running_tasks",
            "gauge",
            "Tasks running.",
            running as f64,
        );
        single(
            &mut out,
            "megha_worker_undelivered_reports",
            "gauge",
            "Reports not yet delivered to the LM.",
            undelivered as f64,
        );
        single(
            &mut out,
            "megha_worker_started_total",
            "counter",
            "Tasks started.",
            c.started as f64,
        );
        single(
            &mut out,
            "megha_worker_finished_total",
            "counter",
            "Tasks finished.",
            c.finished as f64,
        );
        single(
            &mut out,
            "megha_worker_killed_total",
            "counter",
            "Tasks killed: preempted on the LM's order, or QUEUEABLE work making room.",
            c.killed as f64,
        );
        single(
            &mut out,
            "megha_worker_promoted_total",
            "counter",
            "QUEUEABLE tasks promoted to GUARANTEED on the LM's order.",
            c.promoted as f64,
        );
        single(
            &mut out,
            "megha_worker_failed_total",
            "counter",
            "Tasks that ended failed (non-zero exit, signal, could not start).",
            c.failed as f64,
        );
        single(
            &mut out,
            "megha_worker_start_failures_total",
            "counter",
            "Tasks whose executor could not start them (bad command, missing binary, bad cwd, limits).",
            c.start_failures as f64,
        );
        let by: Vec<(String, f64)> = EXECUTORS
            .iter()
            .zip(c.started_by)
            .map(|(e, n)| (e.to_string(), n as f64))
            .collect();
        family(
            &mut out,
            "megha_worker_starts_by_executor_total",
            "counter",
            "Tasks started, by executor.",
            "executor",
            &by,
        );
        let exits = [
            ("finished", c.finished),
            ("failed", c.failed),
            ("killed", c.killed),
        ]
        .map(|(o, n)| (o.to_owned(), n as f64));
        family(
            &mut out,
            "megha_worker_exits_total",
            "counter",
            "Task ends, by outcome.",
            "outcome",
            &exits,
        );
        single(
            &mut out,
            "megha_worker_exits_after_kill_total",
            "counter",
            "Executor ends of tasks already reported killed (or unknown to the core).",
            c.exits_after_kill as f64,
        );
        single(
            &mut out,
            "megha_worker_refused_total",
            "counter",
            "Start orders refused (would over-commit, unknown node).",
            c.refused as f64,
        );
        single(
            &mut out,
            "megha_worker_fences_total",
            "counter",
            "Fences: the LM did not confirm this worker for 3/5 of its lease, so every task here was stopped and reported lost.",
            c.fences as f64,
        );
        single(
            &mut out,
            "megha_worker_fenced_tasks_total",
            "counter",
            "Tasks stopped by fences (reported lost; their GMs may retry them).",
            c.fenced_tasks as f64,
        );
        if let Some(exec) = &self.exec {
            family(
                &mut out,
                "megha_worker_exec_containment",
                "gauge",
                "How exec tasks are contained (1 for the mechanisms in use): identity uid_per_task, task_user, worker_user (tasks run as the worker: no containment) or refused; limits cgroup_v1, cgroup_v2 or rlimit.",
                "mechanism",
                &[
                    (format!("identity_{}", exec.identity().label()), 1.0),
                    (format!("limits_{}", exec.limits().label()), 1.0),
                ],
            );
            out.histogram(exec.start_latency());
            single(
                &mut out,
                "megha_worker_task_supervisors_lost_total",
                "counter",
                "Times the task supervisor (megha-task-exec) ended while the worker ran: its running exec tasks were killed and reported failed, and a new one started with the next task.",
                exec.supervisors_lost() as f64,
            );
        }
        MessageResult(out)
    }
}
