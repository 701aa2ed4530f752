//! The worker's Prometheus metrics, declared once as a table ([`WORKER_METRICS`]):
//! each family's name, type, help text and how to read its value from the actor.
//! The names and help texts are those of `docs/metrics.md` (linted against them).
//! Rendered in this order, then the exec executor's families when it is configured
//! ([`render_exec_metrics`]); the HTTP handler appends the auth guard's, the
//! replayed starts and the cluster's.

use super::{WorkerActor, EXECUTORS};
use crate::exec::Executors;
use actix::prelude::*;
use common::Micros;
use service_kit::clock;
use service_kit::metrics::table::{self, Metric, Read::By, Read::One};
use service_kit::metrics::{family, single, Page};

#[derive(Message, Debug)]
#[rtype(result = "Page")]
pub struct RenderMetrics;

impl Handler<RenderMetrics> for WorkerActor {
    type Result = MessageResult<RenderMetrics>;
    fn handle(&mut self, _: RenderMetrics, _: &mut Context<Self>) -> Self::Result {
        let mut out = Page::new();
        table::render(WORKER_METRICS, self, clock::now(), &mut out);
        if let Some(exec) = &self.exec {
            render_exec_metrics(exec, &mut out);
        }
        MessageResult(out)
    }
}

/// How exec tasks are contained, their start latency and the supervisor's losses:
/// present only when the worker runs exec tasks.
fn render_exec_metrics(exec: &Executors, out: &mut Page) {
    family(
        out,
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
        out,
        "megha_worker_task_supervisors_lost_total",
        "counter",
        "Times the task supervisor (megha-task-exec) ended while the worker ran: its running exec tasks were killed and reported failed, and a new one started with the next task.",
        exec.supervisors_lost() as f64,
    );
}

/// Tasks started, by executor.
fn starts_by_executor(w: &WorkerActor, _: Micros) -> Vec<(String, f64)> {
    (EXECUTORS.iter().zip(w.counters.started_by))
        .map(|(e, n)| (e.to_string(), n as f64))
        .collect()
}

/// Task ends, by outcome.
fn exits_by_outcome(w: &WorkerActor, _: Micros) -> Vec<(String, f64)> {
    let c = &w.counters;
    [
        ("finished", c.finished),
        ("failed", c.failed),
        ("killed", c.killed),
    ]
    .map(|(o, n)| (o.to_owned(), n as f64))
    .into()
}

/// The worker's own families, in the order they are added to the page (which lists
/// families sorted by name).
pub const WORKER_METRICS: &[Metric<WorkerActor>] = &[
    Metric {
        name: "megha_worker_nodes",
        kind: "gauge",
        help: "Nodes this worker runs.",
        read: One(|w| w.nodes.len() as f64),
    },
    Metric {
        name: "megha_worker_running_tasks",
        kind: "gauge",
        help: "Tasks running.",
        // `load()` is (running, undelivered).
        read: One(|w| w.load().0 as f64),
    },
    Metric {
        name: "megha_worker_undelivered_reports",
        kind: "gauge",
        help: "Reports not yet delivered to the LM.",
        read: One(|w| w.load().1 as f64),
    },
    Metric {
        name: "megha_worker_started_total",
        kind: "counter",
        help: "Tasks started.",
        read: One(|w| w.counters.started as f64),
    },
    Metric {
        name: "megha_worker_finished_total",
        kind: "counter",
        help: "Tasks finished.",
        read: One(|w| w.counters.finished as f64),
    },
    Metric {
        name: "megha_worker_killed_total",
        kind: "counter",
        help: "Tasks killed: preempted on the LM's order, or QUEUEABLE work making room.",
        read: One(|w| w.counters.killed as f64),
    },
    Metric {
        name: "megha_worker_promoted_total",
        kind: "counter",
        help: "QUEUEABLE tasks promoted to GUARANTEED on the LM's order.",
        read: One(|w| w.counters.promoted as f64),
    },
    Metric {
        name: "megha_worker_failed_total",
        kind: "counter",
        help: "Tasks that ended failed (non-zero exit, signal, could not start).",
        read: One(|w| w.counters.failed as f64),
    },
    Metric {
        name: "megha_worker_start_failures_total",
        kind: "counter",
        help: "Tasks whose executor could not start them (bad command, missing binary, bad cwd, limits).",
        read: One(|w| w.counters.start_failures as f64),
    },
    Metric {
        name: "megha_worker_starts_by_executor_total",
        kind: "counter",
        help: "Tasks started, by executor.",
        read: By("executor", starts_by_executor),
    },
    Metric {
        name: "megha_worker_exits_total",
        kind: "counter",
        help: "Task ends, by outcome.",
        read: By("outcome", exits_by_outcome),
    },
    Metric {
        name: "megha_worker_exits_after_kill_total",
        kind: "counter",
        help: "Executor ends of tasks already reported killed (or unknown to the core).",
        read: One(|w| w.counters.exits_after_kill as f64),
    },
    Metric {
        name: "megha_worker_refused_total",
        kind: "counter",
        help: "Start orders refused (would over-commit, unknown node).",
        read: One(|w| w.counters.refused as f64),
    },
    Metric {
        name: "megha_worker_fences_total",
        kind: "counter",
        help: "Fences: the LM did not confirm this worker for 3/5 of its lease, so every task here was stopped and reported lost.",
        read: One(|w| w.counters.fences as f64),
    },
    Metric {
        name: "megha_worker_fenced_tasks_total",
        kind: "counter",
        help: "Tasks stopped by fences (reported lost; their GMs may retry them).",
        read: One(|w| w.counters.fenced_tasks as f64),
    },
];
