//! The worker actor: one pure [`Worker`] core per node it runs, a single timer set
//! to the earliest task end, and an ordered sender of reports to the LM.

use crate::core::Worker;
use actix::prelude::*;
use common::messages::{StartTask, WorkerAssignment, WorkerReport};
use common::{Micros, NodeId};
use service_kit::clock;
use service_kit::links::{Link, OrderedSender};
use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct WorkerCounters {
    pub started: u64,
    pub finished: u64,
    pub refused: u64,
}

pub struct WorkerActor {
    nodes: BTreeMap<NodeId, Worker>,
    reports: OrderedSender<WorkerReport>,
    wake: Option<(Micros, SpawnHandle)>,
    pub(super) counters: WorkerCounters,
}

impl std::fmt::Debug for WorkerActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerActor")
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

impl WorkerActor {
    /// A worker with no nodes yet; reports go to `report_link` in order. Must be
    /// created inside a tokio runtime.
    pub fn new(report_link: Link<Vec<WorkerReport>, ()>) -> Self {
        WorkerActor {
            nodes: BTreeMap::new(),
            reports: OrderedSender::start(report_link),
            wake: None,
            counters: WorkerCounters::default(),
        }
    }

    fn emit(&mut self, reports: Vec<WorkerReport>) {
        for r in reports {
            match r {
                WorkerReport::Started { task, node, .. } => {
                    self.counters.started += 1;
                    tracing::debug!(task = %task, job = task.job.0, %node, "task started");
                }
                WorkerReport::Finished { task, node, .. } => {
                    self.counters.finished += 1;
                    tracing::debug!(task = %task, job = task.job.0, %node, "task finished");
                }
                WorkerReport::Killed { task, node, .. } => {
                    tracing::info!(task = %task, job = task.job.0, %node, "task killed");
                }
            }
            self.reports.send(r);
        }
    }

    fn reschedule(&mut self, ctx: &mut Context<Self>) {
        let next = self.nodes.values().filter_map(Worker::next_wakeup).min();
        match (next, &self.wake) {
            (Some(t), Some((at, _))) if *at <= t => return,
            _ => {}
        }
        if let Some((_, handle)) = self.wake.take() {
            ctx.cancel_future(handle);
        }
        if let Some(t) = next {
            let handle = ctx.run_later(clock::until(t), |act, ctx| {
                act.wake = None;
                act.advance(ctx);
            });
            self.wake = Some((t, handle));
        }
    }

    fn advance(&mut self, ctx: &mut Context<Self>) {
        let now = clock::now();
        let mut reports = Vec::new();
        for w in self.nodes.values_mut() {
            if w.next_wakeup().is_some_and(|t| t <= now) {
                reports.extend(w.advance(now));
            }
        }
        self.emit(reports);
        self.reschedule(ctx);
    }

    /// (running tasks, reports not yet delivered).
    pub fn load(&self) -> (usize, usize) {
        let running = self.nodes.values().map(|w| w.running().len()).sum();
        (running, self.reports.pending())
    }
}

impl Actor for WorkerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(1 << 20);
    }
}

/// The LM's answer to registration: the nodes to run.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Assign(pub WorkerAssignment);

impl Handler<Assign> for WorkerActor {
    type Result = ();
    fn handle(&mut self, msg: Assign, _: &mut Context<Self>) {
        tracing::info!(lm = %msg.0.lm, slot = msg.0.slot, nodes = msg.0.nodes.len(), "nodes assigned");
        for (node, capacity) in msg.0.nodes {
            self.nodes
                .entry(node)
                .or_insert_with(|| Worker::new(node, capacity));
        }
    }
}

/// Start orders from the LM.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Start(pub Vec<StartTask>);

impl Handler<Start> for WorkerActor {
    type Result = ();
    fn handle(&mut self, msg: Start, ctx: &mut Context<Self>) {
        let now = clock::now();
        let mut reports = Vec::new();
        for order in msg.0 {
            let (task, node) = (order.task.id, order.node);
            let Some(w) = self.nodes.get_mut(&node) else {
                self.counters.refused += 1;
                tracing::error!(task = %task, job = task.job.0, %node, "start order for a node this worker does not run");
                continue;
            };
            match w.start_task(now, order) {
                Ok(r) => reports.extend(r),
                Err(e) => {
                    self.counters.refused += 1;
                    tracing::error!(task = %task, job = task.job.0, error = %e, "start order refused");
                }
            }
        }
        self.emit(reports);
        self.reschedule(ctx);
    }
}

#[derive(Message, Debug)]
#[rtype(result = "(usize, usize)")]
pub struct GetLoad;

impl Handler<GetLoad> for WorkerActor {
    type Result = MessageResult<GetLoad>;
    fn handle(&mut self, _: GetLoad, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.load())
    }
}

#[derive(Message, Debug)]
#[rtype(result = "String")]
pub struct RenderMetrics;

impl Handler<RenderMetrics> for WorkerActor {
    type Result = String;
    fn handle(&mut self, _: RenderMetrics, _: &mut Context<Self>) -> String {
        use service_kit::metrics::single;
        let (running, undelivered) = self.load();
        let c = &self.counters;
        let mut out = String::new();
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
            "megha_worker_refused_total",
            "counter",
            "Start orders refused (would over-commit, unknown node).",
            c.refused as f64,
        );
        out
    }
}
