//! The LM's Prometheus metrics, declared once as a table ([`LM_METRICS`], then the
//! preemption families of [`super::preempt::PREEMPT_METRICS`]): each family's name,
//! type, help text and how to read its value from the actor. The names and help
//! texts are those of `docs/metrics.md` (linted against them). The HTTP handler
//! appends the broker backpressure's, the auth guard's and the cluster's families.

use super::preempt::PREEMPT_METRICS;
use super::LmActor;
use actix::prelude::*;
use common::protocol::kind;
use service_kit::clock;
use service_kit::metrics::table::{self, Metric, Read::One};
use service_kit::metrics::Page;

#[derive(Message, Debug)]
#[rtype(result = "Page")]
pub struct RenderMetrics;

impl Handler<RenderMetrics> for LmActor {
    type Result = MessageResult<RenderMetrics>;

    fn handle(&mut self, _: RenderMetrics, _: &mut Context<Self>) -> Self::Result {
        let mut out = Page::new();
        let now = clock::now();
        table::render(LM_METRICS, self, now, &mut out);
        table::render(PREEMPT_METRICS, self, now, &mut out);
        MessageResult(out)
    }
}

/// The LM's own families, in the order they are added to the page (which lists
/// families sorted by name).
pub const LM_METRICS: &[Metric<LmActor>] = &[
    Metric {
        name: "megha_lm_running_tasks",
        kind: "gauge",
        help: "Tasks holding resources on this LM's nodes.",
        // `load()` is (undelivered, running).
        read: One(|l| l.load().1 as f64),
    },
    Metric {
        name: "megha_lm_undelivered_starts",
        kind: "gauge",
        help: "Start orders not yet delivered to a worker.",
        read: One(|l| l.load().0 as f64),
    },
    Metric {
        name: "megha_lm_older_gm_life_refused_total",
        kind: "counter",
        help: "Launch batches and preemptions refused because their GM's life was older than one seen (a replaced GM, fenced).",
        read: One(|l| l.core.older_gm_life_refused() as f64),
    },
    Metric {
        name: "megha_lm_gang_parts_held_total",
        kind: "counter",
        help: "Gang parts verified and held (their room given to no one else until commit, release or expiry).",
        read: One(|l| l.core.gang_counters().held as f64),
    },
    Metric {
        name: "megha_lm_gang_parts_refused_total",
        kind: "counter",
        help: "Gang parts refused: a request did not fit or was invalid against this LM's state (nothing held).",
        read: One(|l| l.core.gang_counters().refused as f64),
    },
    Metric {
        name: "megha_lm_gang_stale_requests_total",
        kind: "counter",
        help: "Gang reserves of a generation older than one seen here (or of a gang already launched): ignored.",
        read: One(|l| l.core.gang_counters().stale as f64),
    },
    Metric {
        name: "megha_lm_gang_parts_committed_total",
        kind: "counter",
        help: "Gang parts launched on the commit of the generation held.",
        read: One(|l| l.core.gang_counters().committed as f64),
    },
    Metric {
        name: "megha_lm_gang_commits_not_held_total",
        kind: "counter",
        help: "Gang commits of a generation not held here (expired or released first): nothing launched.",
        read: One(|l| l.core.gang_counters().not_held as f64),
    },
    Metric {
        name: "megha_lm_gang_parts_expired_total",
        kind: "counter",
        help: "Gang parts given back at their expiry (no commit nor release came).",
        read: One(|l| l.core.gang_counters().expired as f64),
    },
    Metric {
        name: "megha_lm_gang_members_stopped_total",
        kind: "counter",
        help: "Gang members stopped here because their gang was restarted whole.",
        read: One(|l| l.core.gang_counters().stopped as f64),
    },
    Metric {
        name: "megha_lm_lost_runs_forgotten_total",
        kind: "counter",
        help: "Runs reported lost that the LM forgot because its bounded memory of them was full (oldest first).",
        read: One(|l| l.core.lost_runs_forgotten() as f64),
    },
    Metric {
        name: "megha_lm_void_preempts_forgotten_total",
        kind: "counter",
        help: "Preemption requests this LM told their GM it did not hold (void) that it forgot because that memory was full (oldest first).",
        read: One(|l| l.core.void_preempts_forgotten() as f64),
    },
    Metric {
        name: "megha_lm_task_ends_reported_total",
        kind: "counter",
        help: "Task ends (finished, failed) sent to the GMs that launched them.",
        read: One(|l| l.counters.ends_reported as f64),
    },
    Metric {
        name: "megha_lm_task_starts_reported_total",
        kind: "counter",
        help: "Task starts sent to the GMs that launched them.",
        read: One(|l| l.counters.starts_reported as f64),
    },
    Metric {
        name: "megha_lm_cancel_requests_total",
        kind: "counter",
        help: "Cancel requests received from GMs.",
        read: One(|l| l.counters.received.get(kind::CANCEL) as f64),
    },
    Metric {
        name: "megha_lm_tasks_cancelled_total",
        kind: "counter",
        help: "Tasks stopped for a cancelled job.",
        read: One(|l| l.counters.tasks_cancelled as f64),
    },
    Metric {
        name: "megha_lm_cancel_not_yours_total",
        kind: "counter",
        help: "Tasks a cancel request named that another GM launched (left running).",
        read: One(|l| l.counters.cancel_not_yours as f64),
    },
    Metric {
        name: "megha_lm_gm_messages_dropped_total",
        kind: "counter",
        help: "Messages for a GM this LM has no link to (configure --gm-url).",
        read: One(|l| l.counters.gm_undeliverable as f64),
    },
    Metric {
        name: "megha_lm_ready",
        kind: "gauge",
        help: "1 once every worker slot has a worker registered or is down.",
        read: One(|l| f64::from(u8::from(l.ready()))),
    },
    Metric {
        name: "megha_lm_workers_down",
        kind: "gauge",
        help: "Worker slots whose nodes are down (worker lost or never registered).",
        read: One(|l| l.slot_down.iter().filter(|d| **d).count() as f64),
    },
    Metric {
        name: "megha_lm_nodes_down",
        kind: "gauge",
        help: "Nodes that are down (their worker is lost).",
        read: One(|l| l.core.down_nodes().len() as f64),
    },
    Metric {
        name: "megha_lm_nodes_drained",
        kind: "gauge",
        help: "Nodes an operator drained (no new work lands there; running work finishes).",
        read: One(|l| l.core.drained_nodes().len() as f64),
    },
    Metric {
        name: "megha_lm_node_drain_changes_total",
        kind: "counter",
        help: "Drain and undrain calls that changed a node's state.",
        read: One(|l| l.counters.drain_changes as f64),
    },
    Metric {
        name: "megha_lm_late_batch_copies_refused_total",
        kind: "counter",
        help: "Late first copies of launch batches this LM had answered busy (their GM took them back): answered busy again, not applied.",
        read: One(|l| l.counters.late_copies_refused as f64),
    },
    Metric {
        name: "megha_lm_workers_lost_total",
        kind: "counter",
        help: "Workers declared lost (silent for --worker-timeout-ms, never registered within it, or registered again after a restart).",
        read: One(|l| l.counters.workers_lost as f64),
    },
    Metric {
        name: "megha_lm_worker_registration_repeats_total",
        kind: "counter",
        help: "Registrations repeated by the worker process already registered for the slot (its answer was lost): taken as the same registration, nothing of it lost.",
        read: One(|l| l.counters.registration_repeats as f64),
    },
    Metric {
        name: "megha_lm_ends_reannounced_total",
        kind: "counter",
        help: "Ends that workers listed on registering again and this LM life had not heard of: published again at their real end times, marked reannounced, and sent to their GMs.",
        read: One(|l| l.counters.reannounced as f64),
    },
    Metric {
        name: "megha_lm_tasks_lost_total",
        kind: "counter",
        help: "Tasks that ended lost because their worker was (reported to their GMs).",
        read: One(|l| l.counters.tasks_lost as f64),
    },
    Metric {
        name: "megha_lm_worker_orders_dropped_total",
        kind: "counter",
        help: "Orders to a worker that was declared lost before they were delivered.",
        read: One(|l| l.counters.orders_dropped as f64),
    },
    Metric {
        name: "megha_lm_launch_batches_total",
        kind: "counter",
        help: "Launch batches received.",
        read: One(|l| l.counters.received.get(kind::LAUNCH) as f64),
    },
    Metric {
        name: "megha_lm_launch_requests_total",
        kind: "counter",
        help: "Launch requests received.",
        read: One(|l| l.counters.requests as f64),
    },
    Metric {
        name: "megha_lm_placements_total",
        kind: "counter",
        help: "Launch requests accepted.",
        read: One(|l| l.counters.launched as f64),
    },
    Metric {
        name: "megha_lm_rejections_total",
        kind: "counter",
        help: "Launch requests refused (stale GM view).",
        read: One(|l| l.counters.rejections as f64),
    },
    Metric {
        name: "megha_lm_repartitions_total",
        kind: "counter",
        help: "Resources lent to another GM's partition.",
        read: One(|l| l.counters.repartitions as f64),
    },
    Metric {
        name: "megha_lm_worker_reports_total",
        kind: "counter",
        help: "Worker reports handled.",
        read: One(|l| l.counters.reports as f64),
    },
    Metric {
        name: "megha_lm_bad_worker_reports_total",
        kind: "counter",
        help: "Worker reports about unknown tasks.",
        read: One(|l| l.counters.bad_reports as f64),
    },
    Metric {
        name: "megha_lm_snapshots_published_total",
        kind: "counter",
        help: "State publications (heartbeats and changes).",
        read: One(|l| l.counters.snapshots_published as f64),
    },
    Metric {
        name: "megha_lm_adopted_tasks_total",
        kind: "counter",
        help: "Tasks taken over from workers that registered again after this LM restarted.",
        read: One(|l| l.counters.adopted as f64),
    },
    Metric {
        name: "megha_lm_orphan_reports_total",
        kind: "counter",
        help: "Reports of tasks that ended while this LM was away (published, no state).",
        read: One(|l| l.counters.orphan_reports as f64),
    },
    Metric {
        name: "megha_lm_queued_queueable_tasks",
        kind: "gauge",
        help: "QUEUEABLE tasks sent to worker queues and not yet started.",
        read: One(|l| l.core.queued_len() as f64),
    },
    Metric {
        name: "megha_lm_promotions_total",
        kind: "counter",
        help: "Running QUEUEABLE tasks promoted to GUARANTEED.",
        read: One(|l| l.counters.promotions as f64),
    },

];
