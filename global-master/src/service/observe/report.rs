//! Read-only views of the GM actor: the pending list with reasons and the
//! Prometheus metrics text.

use crate::service::actor::GmActor;
use actix::prelude::*;
use common::reasons::PendingReason;
use serde::Serialize;
use service_kit::clock;
use service_kit::metrics::Page;

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
        let mut out = Page::new();
        super::metrics::render(self, clock::now(), &mut out);
        self.render_preempt_metrics(&mut out);
        out.histogram(&self.shell_metrics().launch_latency);
        crate::service::actor::lra_actor::render_lra_metrics(
            &mut out,
            self.core().stats(),
            self.core().lras_waiting(),
        );
        MessageResult(out)
    }
}
