//! The LM's Prometheus metrics.

use super::LmActor;
use actix::prelude::*;
use common::protocol::kind;
use service_kit::metrics::{single, Page};

#[derive(Message, Debug)]
#[rtype(result = "Page")]
pub struct RenderMetrics;

impl Handler<RenderMetrics> for LmActor {
    type Result = MessageResult<RenderMetrics>;

    fn handle(&mut self, _: RenderMetrics, _: &mut Context<Self>) -> Self::Result {
        let c = &self.counters;
        let (undelivered, running) = self.load();
        let mut out = Page::new();
        single(
            &mut out,
            "megha_lm_running_tasks",
            "gauge",
            "Tasks holding resources on this LM's nodes.",
            running as f64,
        );
        single(
            &mut out,
            "megha_lm_undelivered_starts",
            "gauge",
            "Start orders not yet delivered to a worker.",
            undelivered as f64,
        );
        single(
            &mut out,
            "megha_lm_older_gm_life_refused_total",
            "counter",
            "Launch batches and preemptions refused because their GM's life was older than one seen (a replaced GM, fenced).",
            self.core.older_gm_life_refused() as f64,
        );
        let gangs = self.core.gang_counters();
        single(
            &mut out,
            "megha_lm_gang_parts_held_total",
            "counter",
            "Gang parts verified and held (their room given to no one else until commit, release or expiry).",
            gangs.held as f64,
        );
        single(
            &mut out,
            "megha_lm_gang_parts_refused_total",
            "counter",
            "Gang parts refused: a request did not fit or was invalid against this LM's state (nothing held).",
            gangs.refused as f64,
        );
        single(
            &mut out,
            "megha_lm_gang_stale_requests_total",
            "counter",
            "Gang reserves of a generation older than one seen here (or of a gang already launched): ignored.",
            gangs.stale as f64,
        );
        single(
            &mut out,
            "megha_lm_gang_parts_committed_total",
            "counter",
            "Gang parts launched on the commit of the generation held.",
            gangs.committed as f64,
        );
        single(
            &mut out,
            "megha_lm_gang_commits_not_held_total",
            "counter",
            "Gang commits of a generation not held here (expired or released first): nothing launched.",
            gangs.not_held as f64,
        );
        single(
            &mut out,
            "megha_lm_gang_parts_expired_total",
            "counter",
            "Gang parts given back at their expiry (no commit nor release came).",
            gangs.expired as f64,
        );
        single(
            &mut out,
            "megha_lm_gang_members_stopped_total",
            "counter",
            "Gang members stopped here because their gang was restarted whole.",
            gangs.stopped as f64,
        );
        single(
            &mut out,
            "megha_lm_lost_runs_forgotten_total",
            "counter",
            "Runs reported lost that the LM forgot because its bounded memory of them was full (oldest first).",
            self.core.lost_runs_forgotten() as f64,
        );
        single(
            &mut out,
            "megha_lm_void_preempts_forgotten_total",
            "counter",
            "Preemption requests this LM told their GM it did not hold (void) that it forgot because that memory was full (oldest first).",
            self.core.void_preempts_forgotten() as f64,
        );
        single(
            &mut out,
            "megha_lm_task_ends_reported_total",
            "counter",
            "Task ends (finished, failed) sent to the GMs that launched them.",
            c.ends_reported as f64,
        );
        for (name, help, value) in [
            (
                "megha_lm_task_starts_reported_total",
                "Task starts sent to the GMs that launched them.",
                c.starts_reported,
            ),
            (
                "megha_lm_cancel_requests_total",
                "Cancel requests received from GMs.",
                c.received.get(kind::CANCEL),
            ),
            (
                "megha_lm_tasks_cancelled_total",
                "Tasks stopped for a cancelled job.",
                c.tasks_cancelled,
            ),
            (
                "megha_lm_cancel_not_yours_total",
                "Tasks a cancel request named that another GM launched (left running).",
                c.cancel_not_yours,
            ),
        ] {
            single(&mut out, name, "counter", help, value as f64);
        }
        single(
            &mut out,
            "megha_lm_gm_messages_dropped_total",
            "counter",
            "Messages for a GM this LM has no link to (configure --gm-url).",
            c.gm_undeliverable as f64,
        );
        single(
            &mut out,
            "megha_lm_ready",
            "gauge",
            "1 once every worker slot has a worker registered or is down.",
            f64::from(u8::from(self.ready())),
        );
        single(
            &mut out,
            "megha_lm_workers_down",
            "gauge",
            "Worker slots whose nodes are down (worker lost or never registered).",
            self.slot_down.iter().filter(|d| **d).count() as f64,
        );
        single(
            &mut out,
            "megha_lm_nodes_down",
            "gauge",
            "Nodes that are down (their worker is lost).",
            self.core.down_nodes().len() as f64,
        );
        single(
            &mut out,
            "megha_lm_nodes_drained",
            "gauge",
            "Nodes an operator drained (no new work lands there; running work finishes).",
            self.core.drained_nodes().len() as f64,
        );
        single(
            &mut out,
            "megha_lm_node_drain_changes_total",
            "counter",
            "Drain and undrain calls that changed a node's state.",
            c.drain_changes as f64,
        );
        single(
            &mut out,
            "megha_lm_late_batch_copies_refused_total",
            "counter",
            "Late first copies of launch batches this LM had answered busy (their GM took them back): answered busy again, not applied.",
            c.late_copies_refused as f64,
        );
        single(
            &mut out,
            "megha_lm_workers_lost_total",
            "counter",
            "Workers declared lost (silent for --worker-timeout-ms, never registered within it, or registered again after a restart).",
            c.workers_lost as f64,
        );
        single(
            &mut out,
            "megha_lm_worker_registration_repeats_total",
            "counter",
            "Registrations repeated by the worker process already registered for the slot (its answer was lost): taken as the same registration, nothing of it lost.",
            c.registration_repeats as f64,
        );
        single(
            &mut out,
            "megha_lm_ends_reannounced_total",
            "counter",
            "Ends that workers listed on registering again and this LM life had not heard of: published again at their real end times, marked reannounced, and sent to their GMs.",
            c.reannounced as f64,
        );
        single(
            &mut out,
            "megha_lm_tasks_lost_total",
            "counter",
            "Tasks that ended lost because their worker was (reported to their GMs).",
            c.tasks_lost as f64,
        );
        single(
            &mut out,
            "megha_lm_worker_orders_dropped_total",
            "counter",
            "Orders to a worker that was declared lost before they were delivered.",
            c.orders_dropped as f64,
        );
        single(
            &mut out,
            "megha_lm_launch_batches_total",
            "counter",
            "Launch batches received.",
            c.received.get(kind::LAUNCH) as f64,
        );
        single(
            &mut out,
            "megha_lm_launch_requests_total",
            "counter",
            "Launch requests received.",
            c.requests as f64,
        );
        single(
            &mut out,
            "megha_lm_placements_total",
            "counter",
            "Launch requests accepted.",
            c.launched as f64,
        );
        single(
            &mut out,
            "megha_lm_rejections_total",
            "counter",
            "Launch requests refused (stale GM view).",
            c.rejections as f64,
        );
        single(
            &mut out,
            "megha_lm_repartitions_total",
            "counter",
            "Resources lent to another GM's partition.",
            c.repartitions as f64,
        );
        single(
            &mut out,
            "megha_lm_worker_reports_total",
            "counter",
            "Worker reports handled.",
            c.reports as f64,
        );
        single(
            &mut out,
            "megha_lm_bad_worker_reports_total",
            "counter",
            "Worker reports about unknown tasks.",
            c.bad_reports as f64,
        );
        single(
            &mut out,
            "megha_lm_snapshots_published_total",
            "counter",
            "State publications (heartbeats and changes).",
            c.snapshots_published as f64,
        );
        single(
            &mut out,
            "megha_lm_adopted_tasks_total",
            "counter",
            "Tasks taken over from workers that registered again after this LM restarted.",
            c.adopted as f64,
        );
        single(
            &mut out,
            "megha_lm_orphan_reports_total",
            "counter",
            "Reports of tasks that ended while this LM was away (published, no state).",
            c.orphan_reports as f64,
        );
        single(
            &mut out,
            "megha_lm_queued_queueable_tasks",
            "gauge",
            "QUEUEABLE tasks sent to worker queues and not yet started.",
            self.core.queued_len() as f64,
        );
        single(
            &mut out,
            "megha_lm_promotions_total",
            "counter",
            "Running QUEUEABLE tasks promoted to GUARANTEED.",
            c.promotions as f64,
        );
        self.render_preempt_metrics(&mut out);
        MessageResult(out)
    }
}
