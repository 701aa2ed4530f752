//! `GET /v1/overview`: one read-only answer with what the dashboard shows that no
//! other endpoint gives: per queue its configured share, usage and queued tasks
//! (and Jain's index over the queues' usage relative to their shares), the
//! allocation-time histogram of the tasks the GM holds, the newest jobs, the last
//! events and the GM's counters. The dashboard samples it over time (usage over
//! time is drawn from successive answers).

use crate::service::actor::GmActor;
use crate::service::observe::status::JobStatus;
use actix::prelude::*;
use common::events::TaskEvent;
use common::fairness::{jain_index, FairnessConfig, DEFAULT_QUEUE};
use common::{LmId, QueueId, Resources};
use serde::Serialize;
use service_kit::clock;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Upper bounds (ms) of the allocation-time histogram; one more bucket counts the
/// rest.
pub const ALLOCATION_BOUNDS_MS: [f64; 14] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 60000.0,
];

#[derive(Debug, Serialize)]
pub struct Overview {
    pub gm: u16,
    pub designated: bool,
    /// The GM's clock (ms since the epoch) when it answered.
    pub now_ms: u64,
    /// True once every LM's state arrived.
    pub ready: bool,
    pub queued: usize,
    /// Tasks sent to an LM and not answered yet.
    pub outstanding: usize,
    pub counters: BTreeMap<&'static str, u64>,
    pub queues: Vec<QueueRow>,
    /// Jain's index of usage / share over the queues with work (1 = perfectly fair);
    /// `None` without queues configured.
    pub jain: Option<f64>,
    pub allocation: AllocationHistogram,
    /// The newest jobs first.
    pub jobs: Vec<JobStatus>,
    /// The newest events first.
    pub events: Vec<TaskEvent>,
}

#[derive(Debug, Serialize)]
pub struct QueueRow {
    pub id: u16,
    pub name: String,
    /// The configured share (fraction of the cluster); `None` without fairness.
    pub share: Option<f64>,
    /// Resources its tasks hold over every LM, as last reported.
    pub usage: Resources,
    /// `usage` as a fraction of the cluster under the share policy (DRF: dominant
    /// share).
    pub usage_share: f64,
    /// Tasks waiting in this GM.
    pub queued: usize,
}

/// Allocation time (task start - submission) of the tasks this GM holds that started.
#[derive(Debug, Serialize)]
pub struct AllocationHistogram {
    pub bounds_ms: Vec<f64>,
    /// One count per bound, then the count above the last one.
    pub counts: Vec<u64>,
    pub samples: u64,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

impl AllocationHistogram {
    pub fn of(mut samples_ms: Vec<f64>) -> Self {
        let mut counts = vec![0; ALLOCATION_BOUNDS_MS.len() + 1];
        for s in &samples_ms {
            let i = ALLOCATION_BOUNDS_MS
                .iter()
                .position(|b| s <= b)
                .unwrap_or(ALLOCATION_BOUNDS_MS.len());
            counts[i] += 1;
        }
        samples_ms.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let n = samples_ms.len();
            (n > 0).then(|| samples_ms[((n as f64 * q).ceil() as usize).clamp(1, n) - 1])
        };
        AllocationHistogram {
            bounds_ms: ALLOCATION_BOUNDS_MS.to_vec(),
            counts,
            samples: samples_ms.len() as u64,
            mean_ms: (!samples_ms.is_empty())
                .then(|| samples_ms.iter().sum::<f64>() / samples_ms.len() as f64),
            p50_ms: at(0.5),
            p99_ms: at(0.99),
        }
    }
}

/// The overview; jobs of `user` only when given; shares from `fairness`.
#[derive(Message, Debug)]
#[rtype(result = "Overview")]
pub struct GetOverview {
    pub user: Option<String>,
    pub jobs: usize,
    pub fairness: Option<Arc<FairnessConfig>>,
}

impl Handler<GetOverview> for GmActor {
    type Result = MessageResult<GetOverview>;

    fn handle(&mut self, msg: GetOverview, _: &mut Context<Self>) -> Self::Result {
        let s = self.core().stats();
        let counters = BTreeMap::from([
            ("submitted", s.submitted),
            ("dispatched_internal", s.dispatched_internal),
            ("dispatched_repartition", s.dispatched_repartition),
            ("launched", s.launched),
            ("started", s.tasks_started),
            ("finished", s.tasks_finished),
            ("failed", s.tasks_failed),
            ("retried", s.tasks_retried),
            ("cancelled", s.tasks_cancelled),
            ("lm_rejections", s.lm_rejections),
            ("requeues", s.requeues),
            ("unplaceable", s.unplaceable),
            ("preemptions", self.preempt_metrics().preemptions),
        ]);
        let allocation = AllocationHistogram::of(
            self.tracker()
                .tasks()
                .filter_map(|t| {
                    let started = t.started_at_us?;
                    Some(started.saturating_sub(t.submitted_at_us) as f64 / 1000.0)
                })
                .collect(),
        );
        MessageResult(with_jain(Overview {
            gm: self.gm().0,
            designated: self.core().is_designated(),
            now_ms: clock::now().0 / 1000,
            ready: self.core().has_full_view(),
            queued: self.core().queues().len(),
            outstanding: self.core().outstanding(),
            counters,
            queues: queue_rows(self, msg.fairness.as_deref()),
            jain: None,
            allocation,
            jobs: self.tracker().newest(msg.jobs, msg.user.as_deref()),
            events: self.recent_events().newest(
                crate::service::observe::recent_events::RECENT_EVENTS,
                |_| true,
            ),
        }))
    }
}

/// Sets Jain's index over the queues with work (usage or tasks waiting).
fn with_jain(mut o: Overview) -> Overview {
    let ratios: Vec<f64> = o
        .queues
        .iter()
        .filter(|q| q.usage != Resources::ZERO || q.queued > 0)
        .filter_map(|q| Some(q.usage_share / q.share.filter(|s| *s > 0.0)?))
        .collect();
    o.jain = (!ratios.is_empty()).then(|| jain_index(&ratios));
    o
}

/// One row per configured queue (or the default queue), usage summed over the
/// LMs' last states.
fn queue_rows(gm: &GmActor, fairness: Option<&FairnessConfig>) -> Vec<QueueRow> {
    let mut usage: BTreeMap<QueueId, Resources> = BTreeMap::new();
    let mut total = Resources::ZERO;
    for l in 0..gm.lm_count() {
        let Some(view) = gm.core().view(LmId(l as u16)) else {
            continue;
        };
        total = total.add(&view.total_capacity);
        for (q, r) in &view.usage {
            let u = usage.entry(*q).or_default();
            *u = u.add(r);
        }
    }
    let queued: BTreeMap<QueueId, usize> = gm.core().queues().lengths().collect();
    let ids: Vec<(QueueId, String)> = match fairness {
        Some(f) => f.queues.iter().map(|q| (q.id, q.name.clone())).collect(),
        None => vec![(QueueId(0), DEFAULT_QUEUE.to_owned())],
    };
    ids.into_iter()
        .map(|(id, name)| {
            let used = usage.get(&id).copied().unwrap_or_default();
            let usage_share = match fairness {
                Some(f) => f.policy.share(&used, &total),
                None => used.dominant_share(&total),
            };
            QueueRow {
                id: id.0,
                name,
                share: fairness.map(|f| f.share_of(id)),
                usage: used,
                usage_share,
                queued: queued.get(&id).copied().unwrap_or(0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_counts_each_sample_once_and_keeps_the_tail() {
        let h = AllocationHistogram::of(vec![0.5, 1.0, 3.0, 3.0, 70_000.0]);
        assert_eq!(h.samples, 5);
        assert_eq!(h.counts.iter().sum::<u64>(), 5);
        assert_eq!(h.counts[0], 2, "<= 1 ms");
        assert_eq!(h.counts[2], 2, "<= 5 ms");
        assert_eq!(*h.counts.last().expect("tail"), 1, "above 60 s");
        assert_eq!(h.p50_ms, Some(3.0));
        assert_eq!(h.p99_ms, Some(70_000.0));
        let empty = AllocationHistogram::of(Vec::new());
        assert_eq!((empty.samples, empty.mean_ms), (0, None));
    }
}
