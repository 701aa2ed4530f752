//! The GM actor's LRA messages: submission, status, the interval timer that runs the
//! placer, and the ends of LRA containers (learned from the task events the LMs
//! publish: `task.finished` and `task.preempted`).

use crate::core::lra_path::{container_task, LraRefused, LraStatus, LraSubmission};
use crate::core::GmInput;
use crate::lra::{LraId, LraRequest};
use crate::service::actor::GmActor;
use crate::service::admission::lra_api::NewLra;
use actix::prelude::*;
use common::events::{TaskEvent, TaskEventKind};
use common::TaskId;
use service_kit::clock;
use service_kit::metrics::{single, Page};
use std::time::Duration;

/// Accept an LRA (designated GM). Answers its id and container task ids.
#[derive(Message, Debug)]
#[rtype(result = "Result<(LraId, Vec<TaskId>), LraRefused>")]
pub struct SubmitLra(pub NewLra);

impl Handler<SubmitLra> for GmActor {
    type Result = Result<(LraId, Vec<TaskId>), LraRefused>;

    fn handle(&mut self, msg: SubmitLra, ctx: &mut Context<Self>) -> Self::Result {
        let now = clock::now();
        let id = LraId(self.new_job_id(now).0);
        let lra = msg.0;
        let count = lra.containers.len();
        let (queue, reserved): (_, Vec<_>) = (
            lra.queue,
            lra.containers.iter().map(|c| c.resources).collect(),
        );
        let submission = LraSubmission {
            request: LraRequest {
                id,
                containers: lra.containers,
                constraints: lra.constraints,
            },
            queue: lra.queue,
            durations: lra.durations,
        };
        if let Some(refused) = self
            .deliver(GmInput::SubmitLra(submission), ctx)
            .lra_refused
        {
            return Err(refused);
        }
        let tasks: Vec<TaskId> = (0..count).map(|j| container_task(id, j)).collect();
        let gm = self.core.id();
        let queue = self.queue_name(queue);
        for (task, resources) in tasks.iter().zip(reserved) {
            self.tracker.accepted(*task, now);
            // LRAs carry no user: charged to `-` in their queue.
            self.usage.book(*task, None, &queue, resources);
        }
        (self.events)(
            tasks
                .iter()
                .map(|task| TaskEvent {
                    task: *task,
                    at: now,
                    kind: TaskEventKind::Queued { gm },
                })
                .collect(),
        );
        tracing::info!(lra = %id, job = id.0, containers = count, "LRA accepted for the next interval");
        // Place it now if the interval allows.
        self.lra_tick(ctx);
        Ok((id, tasks))
    }
}

/// Install operator constraints (at start-up).
#[derive(Message, Debug)]
#[rtype(result = "Result<(), crate::lra::ConstraintError>")]
pub struct AddOperatorConstraints(pub Vec<crate::lra::PlacementConstraint>);

impl Handler<AddOperatorConstraints> for GmActor {
    type Result = Result<(), crate::lra::ConstraintError>;
    fn handle(&mut self, msg: AddOperatorConstraints, _: &mut Context<Self>) -> Self::Result {
        for c in msg.0 {
            self.core.add_operator_constraint(c)?;
        }
        Ok(())
    }
}

#[derive(Message, Debug)]
#[rtype(result = "Option<LraStatus>")]
pub struct GetLra(pub LraId);

impl Handler<GetLra> for GmActor {
    type Result = Option<LraStatus>;
    fn handle(&mut self, msg: GetLra, _: &mut Context<Self>) -> Self::Result {
        self.core.lra_status(msg.0)
    }
}

/// Containers that finished or were preempted (any task id; others are ignored).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct TasksEnded(pub Vec<TaskId>);

impl Handler<TasksEnded> for GmActor {
    type Result = ();
    fn handle(&mut self, msg: TasksEnded, ctx: &mut Context<Self>) {
        for task in msg.0 {
            if self.deliver(GmInput::TaskEnded(task), ctx).affected > 0 {
                tracing::debug!(task = %task, job = task.job.0, "LRA container ended; its tags no longer count");
            }
        }
    }
}

/// The ended tasks among `events` (finished, failed or preempted).
pub fn ended_tasks(events: &[TaskEvent]) -> Vec<TaskId> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                TaskEventKind::Finished { .. }
                    | TaskEventKind::Failed { .. }
                    | TaskEventKind::Preempted { .. }
            )
        })
        .map(|e| e.task)
        .collect()
}

impl GmActor {
    /// On the designated GM, checks for due LRA passes several times per interval.
    pub(super) fn start_lra_timer(&mut self, ctx: &mut Context<Self>) {
        if !self.core.is_designated() {
            return;
        }
        let interval = Duration::from_micros(self.lra_interval().0);
        let tick = (interval / 10).clamp(Duration::from_millis(10), Duration::from_secs(1));
        ctx.run_interval(tick, |act, ctx| act.lra_tick(ctx));
    }

    fn lra_interval(&self) -> common::Micros {
        self.core.lra_interval()
    }

    /// Runs the LRA placer if it is due and sends what it placed.
    fn lra_tick(&mut self, ctx: &mut Context<Self>) {
        let Some(out) = self.deliver(GmInput::LraPass, ctx).lra_pass else {
            return;
        };
        for (lra, nodes) in &out.placed {
            tracing::info!(lra = %lra, job = lra.0, containers = nodes.len(), placer = out.placer, "LRA placed; launching");
        }
        for (lra, why) in &out.waiting {
            tracing::info!(lra = %lra, job = lra.0, reason = %why, "LRA waits for the next interval");
        }
        for (lra, why) in &out.refused {
            tracing::warn!(lra = %lra, job = lra.0, reason = %why, "LRA dropped: its constraints no longer validate");
        }
        if let Some(why) = &out.fallback {
            tracing::info!(reason = %why, "ILP placer fell back to its heuristic answer");
        }
    }
}

/// The LRA path's gauges and counters.
pub fn render_lra_metrics(out: &mut Page, s: &crate::core::master::GmStats, waiting: usize) {
    single(
        out,
        "megha_gm_lras_waiting",
        "gauge",
        "LRAs waiting for the next scheduling interval (designated GM).",
        waiting as f64,
    );
    let counters: [(&str, &str, u64); 8] = [
        (
            "megha_gm_lra_submitted_total",
            "LRAs accepted.",
            s.lra_submitted,
        ),
        (
            "megha_gm_lra_passes_total",
            "LRA placer runs.",
            s.lra_passes,
        ),
        (
            "megha_gm_lra_placed_total",
            "LRAs (or resubmitted remainders) placed and sent.",
            s.lra_placed,
        ),
        (
            "megha_gm_lra_not_placed_total",
            "Placer answers leaving an LRA waiting.",
            s.lra_not_placed,
        ),
        (
            "megha_gm_lra_conflicts_total",
            "LRA containers refused by an LM (or lost on the way).",
            s.lra_conflicts,
        ),
        (
            "megha_gm_lra_resubmissions_total",
            "LRAs resubmitted after a conflict.",
            s.lra_resubmissions,
        ),
        (
            "megha_gm_lra_containers_launched_total",
            "LRA containers the LMs launched.",
            s.lra_containers_launched,
        ),
        (
            "megha_gm_lra_containers_ended_total",
            "LRA containers that finished or were preempted.",
            s.lra_containers_ended,
        ),
    ];
    for (name, help, value) in counters {
        single(out, name, "counter", help, value as f64);
    }
}
