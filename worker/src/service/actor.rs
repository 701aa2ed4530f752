//! The worker actor: one pure [`Worker`] core per node it runs, a single timer set
//! to the earliest synthetic task end, the executors of burn and exec tasks (whose
//! ends come back as [`WorkerInput::Exited`]), and an ordered sender of reports to
//! the LM.

use super::ended_runs::EndedRuns;
use crate::core::{
    refused_start, ExecOrder, QueueOrder, Worker, WorkerError, WorkerInput, WorkerOutput,
};
use crate::exec::Executors;
use actix::prelude::*;
use common::messages::{HeldTask, TaskFailure, WorkerAssignment, WorkerReport};
use common::protocol::{LmToWorker, WorkerToLm};
use common::{Executor, Micros, NodeId, TaskId, TaskSpec};
use service_kit::clock;
use service_kit::links::{Link, OrderedSender};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

pub mod fencing;
pub mod metrics;

#[derive(Debug, Default)]
pub struct WorkerCounters {
    pub started: u64,
    pub finished: u64,
    pub refused: u64,
    pub killed: u64,
    pub promoted: u64,
    pub failed: u64,
    /// Tasks that could not start (bad command, missing binary, limits...).
    pub start_failures: u64,
    /// Starts by executor: synthetic, burn, exec.
    pub started_by: [u64; 3],
    /// Executor ends for tasks no longer running (killed before they exited).
    pub exits_after_kill: u64,
    /// Fences: times this worker stopped everything it held, unconfirmed by its LM.
    pub fences: u64,
    /// Tasks stopped by fences (reported lost).
    pub fenced_tasks: u64,
}

/// The index of an executor in [`WorkerCounters::started_by`].
fn executor_index(e: &Executor) -> usize {
    match e {
        Executor::Synthetic => 0,
        Executor::Burn | Executor::BurnByPlacement(_) => 1,
        Executor::Exec(_) => 2,
    }
}

pub(super) const EXECUTORS: [&str; 3] = ["synthetic", "burn", "exec"];

pub struct WorkerActor {
    nodes: BTreeMap<NodeId, Worker>,
    reports: OrderedSender<WorkerReport>,
    wake: Option<(Micros, SpawnHandle)>,
    /// Every task started or queued here and not yet reported ended, to list them
    /// when registering again with a restarted LM.
    held: HashMap<TaskId, (NodeId, TaskSpec)>,
    /// The LM life this worker registered with.
    incarnation: Option<u64>,
    /// The runs ended here recently, for a restarted LM (see
    /// [`super::ended_runs`]).
    ended: EndedRuns,
    counters: WorkerCounters,
    /// How the nodes' QUEUEABLE queues are ordered.
    queue_order: QueueOrder,
    /// Share of a node running QUEUEABLE work may hold (1.0: no cap).
    queueable_cap: f64,
    /// The executor of tasks that name none.
    default_executor: Executor,
    /// Burn and exec tasks run here; `None` (embedded mode): such tasks fail.
    exec: Option<Executors>,
    /// Fenced (see [`super::fence`]): why; start orders are refused until the LM
    /// confirms this worker again.
    fenced: Option<String>,
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
            held: HashMap::new(),
            incarnation: None,
            ended: EndedRuns::in_memory(),
            counters: WorkerCounters::default(),
            queue_order: QueueOrder::Fifo,
            queueable_cap: 1.0,
            default_executor: Executor::Synthetic,
            exec: None,
            fenced: None,
        }
    }

    /// Remembers ended runs in `runs` (kept in a file: see
    /// [`super::ended_runs`]).
    pub fn with_ended_runs(mut self, runs: EndedRuns) -> Self {
        self.ended = runs;
        self
    }

    /// Runs burn and exec tasks with `exec`; tasks that name no executor run with
    /// `default` (applies to nodes assigned later).
    pub fn with_executors(mut self, exec: Executors, default: Executor) -> Self {
        self.exec = Some(exec);
        self.default_executor = default;
        self
    }

    /// Orders every node's QUEUEABLE queue by `order` and caps running QUEUEABLE
    /// work at `cap` of each node (the LM's cap); applies to nodes assigned later.
    pub fn with_queueing(mut self, order: QueueOrder, cap: f64) -> Self {
        self.queue_order = order;
        self.queueable_cap = cap;
        self
    }

    fn emit(&mut self, reports: Vec<WorkerReport>) {
        for r in reports {
            match &r {
                WorkerReport::Started { task, node, .. } => {
                    self.counters.started += 1;
                    let executor = self
                        .held
                        .get(task)
                        .and_then(|(_, spec)| spec.executor.as_ref())
                        .unwrap_or(&self.default_executor);
                    self.counters.started_by[executor_index(executor)] += 1;
                    tracing::debug!(task = %task, job = task.job.0, %node, executor = executor.label(), "task started");
                }
                WorkerReport::Finished {
                    task,
                    node,
                    attempt,
                    ..
                } => {
                    self.forget_held(*task, *attempt);
                    self.ended.extend(common::messages::TaskEnd::of_report(&r));
                    self.counters.finished += 1;
                    tracing::debug!(task = %task, job = task.job.0, %node, "task finished");
                }
                WorkerReport::Failed {
                    task,
                    node,
                    attempt,
                    failure,
                    ..
                } => {
                    // Listed to a restarted LM too: if the report dies with the
                    // LM, its GM still hears the failure (not "lost"), and the
                    // job's retry policy decides.
                    self.forget_held(*task, *attempt);
                    self.ended.extend(common::messages::TaskEnd::of_report(&r));
                    self.counters.failed += 1;
                    tracing::warn!(task = %task, job = task.job.0, %node, %failure, "task failed");
                }
                WorkerReport::Killed {
                    task,
                    node,
                    attempt,
                    ..
                } => {
                    self.forget_held(*task, *attempt);
                    self.counters.killed += 1;
                    tracing::info!(task = %task, job = task.job.0, %node, "task killed");
                }
            }
            self.reports.send(r);
        }
    }

    /// Run `attempt` of a task is no longer held here (a retry that superseded it
    /// stays held).
    fn forget_held(&mut self, task: TaskId, attempt: u32) {
        if self
            .held
            .get(&task)
            .is_some_and(|(_, spec)| spec.attempt == attempt)
        {
            self.held.remove(&task);
        }
    }

    /// Takes one step's output: its reports go to `reports`, its launches and stops
    /// to the executors.
    /// `grace`: SIGKILL stopped tasks within it (a fence), instead of the worker's
    /// `--kill-grace-ms`.
    fn take(
        &mut self,
        node: NodeId,
        out: WorkerOutput,
        reports: &mut Vec<WorkerReport>,
        grace: Option<Duration>,
        ctx: &mut Context<Self>,
    ) {
        reports.extend(out.to_lm.into_iter().map(|WorkerToLm::Report(r)| r));
        for order in out.exec {
            match order {
                ExecOrder::Launch { task, executor } => self.launch(node, task, &executor, ctx),
                ExecOrder::Stop { task, attempt } => {
                    let stopping = self.exec.as_mut().is_some_and(|e| match grace {
                        Some(g) => e.stop_within(task, g),
                        None => e.stop(task),
                    });
                    tracing::info!(task = %task, job = task.job.0, attempt, %node, stopping, "stopping a killed task's executor");
                }
            }
        }
    }

    /// Runs a burn or exec task; its end comes back to the core as `Exited`.
    fn launch(
        &mut self,
        node: NodeId,
        task: TaskSpec,
        executor: &Executor,
        ctx: &mut Context<Self>,
    ) {
        let (id, attempt) = (task.id, task.attempt);
        let Some(exec) = self.exec.as_mut() else {
            let failure = TaskFailure::StartFailed {
                reason: format!(
                    "this worker runs no {} executor (embedded mode)",
                    executor.label()
                ),
            };
            tracing::warn!(task = %id, job = id.job.0, %node, %failure, "task cannot start");
            ctx.notify(Exited {
                node,
                task: id,
                attempt,
                run: None,
                end: crate::exec::process::RunEnd::failed(failure),
            });
            return;
        };
        let (run, handle) = exec.launch(task, executor);
        tracing::debug!(task = %id, job = id.job.0, %node, run, executor = executor.label(), "executor launched");
        ctx.spawn(handle.into_actor(self).map(move |joined, _act, ctx| {
            let end = joined.unwrap_or_else(|e| {
                crate::exec::process::RunEnd::failed(TaskFailure::StartFailed {
                    reason: format!("the executor crashed: {e}"),
                })
            });
            ctx.notify(Exited {
                node,
                task: id,
                attempt,
                run: Some(run),
                end,
            });
        }));
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
        let due: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, w)| w.next_wakeup().is_some_and(|t| t <= now))
            .map(|(node, _)| *node)
            .collect();
        for node in due {
            let Some(w) = self.nodes.get_mut(&node) else {
                continue;
            };
            if let Ok(out) = w.step(now, WorkerInput::Wake) {
                self.take(node, out, &mut reports, None, ctx);
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
        tracing::info!(lm = %msg.0.lm, slot = msg.0.slot, nodes = msg.0.nodes.len(), incarnation = msg.0.incarnation, "nodes assigned");
        self.incarnation = Some(msg.0.incarnation);
        let (order, cap) = (self.queue_order, self.queueable_cap);
        let default = self.default_executor.clone();
        for (node, capacity) in msg.0.nodes {
            self.nodes.entry(node).or_insert_with(|| {
                let w = Worker::new(node, capacity)
                    .with_queue_order(order)
                    .with_default_executor(default.clone());
                if cap < 1.0 {
                    w.with_queueable_limit(capacity.scaled(cap))
                } else {
                    w
                }
            });
        }
    }
}

/// Orders from the LM, whatever they are (start, kill, promote, ...), in the order
/// the LM decided them. A kill or promotion of a task no longer here (it finished, or
/// the order is a retry) is skipped: its finish report stands.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct FromLm(pub Vec<LmToWorker>);

impl Handler<FromLm> for WorkerActor {
    type Result = ();
    fn handle(&mut self, msg: FromLm, ctx: &mut Context<Self>) {
        self.deliver(msg.0.into_iter(), ctx);
    }
}

impl WorkerActor {
    /// Hands the LM's orders, whatever they are, to the cores of their nodes (in
    /// order), then sends the reports they produced and sets the next wake-up.
    fn deliver(&mut self, orders: impl Iterator<Item = LmToWorker>, ctx: &mut Context<Self>) {
        let now = clock::now();
        let mut reports = Vec::new();
        for order in orders {
            let (node, kind) = (order.node(), order.kind());
            let (task, spec) = match &order {
                LmToWorker::Start(s) => (s.task.id, Some(s.task.clone())),
                LmToWorker::Kill(k) => (k.task, None),
                LmToWorker::Promote(p) => (p.task, None),
            };
            let attempt = spec.as_ref().map_or(1, |s| s.attempt);
            if let (Some(why), Some(_)) = (&self.fenced, &spec) {
                self.counters.refused += 1;
                let reason = format!("the worker is fenced ({why})");
                tracing::warn!(task = %task, job = task.job.0, %node, "start order refused: the worker is fenced until its LM confirms it again");
                reports.push(refused_start(node, task, attempt, now, &reason));
                continue;
            }
            let Some(w) = self.nodes.get_mut(&node) else {
                tracing::error!(task = %task, job = task.job.0, %node, order = kind, "order for a node this worker does not run");
                if spec.is_some() {
                    self.counters.refused += 1;
                    let reason = format!("{node} is not run by this worker");
                    reports.push(refused_start(node, task, attempt, now, &reason));
                }
                continue;
            };
            match (w.step(now, WorkerInput::Lm(order)), spec) {
                (Ok(out), spec) => {
                    if let Some(spec) = spec {
                        self.held.insert(task, (node, spec));
                    }
                    if kind == "promote" {
                        self.counters.promoted += 1;
                        tracing::info!(task = %task, job = task.job.0, %node, "task promoted to GUARANTEED");
                    }
                    self.take(node, out, &mut reports, None, ctx);
                }
                // Already here (a retried order): it runs, its reports stand.
                (Err(e @ WorkerError::Duplicate { .. }), Some(_)) => {
                    tracing::debug!(task = %task, job = task.job.0, error = %e, "start order for a task already here; skipped")
                }
                // Refused (no room, wrong node): reported as a failed start, so the
                // LM frees its allocation and the GM learns why, instead of the task
                // vanishing.
                (Err(e), Some(_)) => {
                    self.counters.refused += 1;
                    tracing::error!(task = %task, job = task.job.0, error = %e, "start order refused; reported failed");
                    reports.push(refused_start(node, task, attempt, now, &e.to_string()));
                }
                // A kill or promotion of a task no longer here (it finished, or the
                // order is a retry): its finish report stands.
                (Err(e), None) => {
                    tracing::debug!(task = %task, job = task.job.0, %node, order = kind, error = %e, "order for a task not here; skipped")
                }
            }
        }
        self.emit(reports);
        self.reschedule(ctx);
    }
}

/// A burn or exec task's executor answered: `run` is the executor's run number
/// (`None`: it never ran).
#[derive(Message, Debug)]
#[rtype(result = "()")]
struct Exited {
    node: NodeId,
    task: TaskId,
    attempt: u32,
    run: Option<u64>,
    end: crate::exec::process::RunEnd,
}

impl Handler<Exited> for WorkerActor {
    type Result = ();
    fn handle(&mut self, msg: Exited, ctx: &mut Context<Self>) {
        let Exited {
            node,
            task,
            attempt,
            run,
            end: crate::exec::process::RunEnd { failure, used },
        } = msg;
        if matches!(failure, Some(TaskFailure::StartFailed { .. })) {
            self.counters.start_failures += 1;
        }
        let current = match (run, self.exec.as_mut()) {
            (Some(run), Some(exec)) => exec.ended(task, run),
            _ => true,
        };
        if !current {
            self.counters.exits_after_kill += 1;
            tracing::debug!(task = %task, job = task.job.0, %node, failure = ?failure, "the executor of a killed task ended");
            return;
        }
        let Some(w) = self.nodes.get_mut(&node) else {
            tracing::error!(task = %task, job = task.job.0, %node, "a task ended on a node this worker does not run");
            return;
        };
        match w.step(
            clock::now(),
            WorkerInput::Exited {
                task,
                attempt,
                failure,
                used,
            },
        ) {
            Ok(out) => {
                let mut reports = Vec::new();
                self.take(node, out, &mut reports, None, ctx);
                self.emit(reports);
                self.reschedule(ctx);
            }
            Err(e) => {
                self.counters.exits_after_kill += 1;
                tracing::warn!(task = %task, job = task.job.0, %node, error = %e, "an executor's end the core does not know; dropped");
            }
        }
    }
}

/// Stops every burn and exec task (shutdown); answers how many still run.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "usize")]
pub struct StopExecutors {
    /// Remove the worker's cgroup too (once nothing runs).
    pub remove_cgroup: bool,
}

impl Handler<StopExecutors> for WorkerActor {
    type Result = usize;
    fn handle(&mut self, msg: StopExecutors, _: &mut Context<Self>) -> usize {
        let Some(exec) = self.exec.as_mut() else {
            return 0;
        };
        exec.shutdown();
        if msg.remove_cgroup {
            exec.remove_cgroup();
        }
        exec.running()
    }
}

/// Where task logs are: `<data dir>/tasks` (`None`: no executors here).
#[derive(Message, Debug)]
#[rtype(result = "Option<std::path::PathBuf>")]
pub struct LogsRoot;

impl Handler<LogsRoot> for WorkerActor {
    type Result = Option<std::path::PathBuf>;
    fn handle(&mut self, _: LogsRoot, _: &mut Context<Self>) -> Self::Result {
        self.exec.as_ref().map(|e| e.logs().root().to_owned())
    }
}

/// The tasks this worker holds (running or queued), the runs it ended recently, and
/// the LM life it registered with.
#[derive(Message, Debug)]
#[rtype(result = "(Vec<HeldTask>, Vec<common::messages::TaskEnd>, Option<u64>)")]
pub struct Holding;

impl Handler<Holding> for WorkerActor {
    type Result = MessageResult<Holding>;
    fn handle(&mut self, _: Holding, _: &mut Context<Self>) -> Self::Result {
        let started: HashMap<TaskId, Micros> = self
            .nodes
            .values()
            .flat_map(|w| w.running().iter().map(|r| (r.task, r.started_at)))
            .collect();
        let held = self
            .held
            .iter()
            .map(|(id, (node, spec))| HeldTask {
                node: *node,
                task: spec.clone(),
                started_at: started.get(id).copied(),
            })
            .collect();
        MessageResult((held, self.ended.list(), self.incarnation))
    }
}

#[derive(Message, Debug)]
#[rtype(result = "(usize, usize)")]
pub struct GetLoad;

/// How exec tasks are contained here (`None`: no executors).
#[derive(Message, Debug)]
#[rtype(result = "Option<ExecContainment>")]
pub struct GetContainment;

#[derive(Clone, Debug, serde::Serialize)]
pub struct ExecContainment {
    /// uid_per_task, task_user, worker_user or refused.
    pub identity: &'static str,
    pub identity_detail: String,
    /// cgroup_v1, cgroup_v2 or rlimit.
    pub limits: &'static str,
    pub limits_detail: String,
}

impl Handler<GetContainment> for WorkerActor {
    type Result = MessageResult<GetContainment>;
    fn handle(&mut self, _: GetContainment, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.exec.as_ref().map(|e| ExecContainment {
            identity: e.identity().label(),
            identity_detail: e.identity().describe(),
            limits: e.limits().label(),
            limits_detail: e.limits().describe(),
        }))
    }
}

impl Handler<GetLoad> for WorkerActor {
    type Result = MessageResult<GetLoad>;
    fn handle(&mut self, _: GetLoad, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.load())
    }
}
