//! The GM's half of Megha's fairness algorithm (Algorithm 2), used only under
//! contention: when a task found no internal match and no repartition.
//!
//! If the task's queue is within its share, the GM picks the queue with the largest
//! share violation (from its eventually consistent usage view) and the LM where that
//! queue uses the most, skipping (LM, victim) pairs that refused since the view last
//! gained resources (for any task, or for tasks of the same shape when the LM found
//! nothing to free for that shape).
//! A queue already over its share never preempts: its task waits. A GM has at most
//! one preemption in flight per LM: the LM's answer (and its state) decides whether
//! the next one still makes sense, instead of a burst the LM would mostly refuse.

use super::view::LmView;
use common::fairness::FairnessConfig;
use common::{ConstraintSet, LmId, QueueId, Resources};
use std::collections::BTreeMap;

/// What the fairness algorithm decided for a task that found no room.
#[derive(Debug, Clone, PartialEq)]
pub enum Contention {
    /// Ask this LM to preempt tasks of this queue.
    Preempt { lm: LmId, victim: QueueId },
    /// The task's queue is at or over its share: wait.
    OverShare,
    /// No queue is over its share where it could help: wait.
    NoVictim,
    /// A victim exists, but the LMs where it runs are busy with this GM's previous
    /// preemption requests: wait for one of them to answer.
    Busy,
}

/// Usage per queue summed over every LM of the view, and the total capacity.
pub fn usage_view(lms: &[Option<LmView>]) -> (BTreeMap<QueueId, Resources>, Resources) {
    let mut usage: BTreeMap<QueueId, Resources> = BTreeMap::new();
    let mut total = Resources::ZERO;
    for view in lms.iter().flatten() {
        total = total.add(&view.total_capacity);
        for (q, r) in &view.usage {
            let u = usage.entry(*q).or_default();
            *u = u.add(r);
        }
    }
    (usage, total)
}

/// An LM that refused to preempt a victim: for every task (`None`: the victim is not
/// over its share there) or for one task shape (nothing to free for it there).
pub type Refusal = (LmId, QueueId, Option<(ConstraintSet, Resources)>);

/// Algorithm 2's choice for a task of `queue` that found no room. `usage` and `total`
/// come from [`usage_view`].
pub fn contention(
    fairness: &FairnessConfig,
    lms: &[Option<LmView>],
    (usage, total): &(BTreeMap<QueueId, Resources>, Resources),
    queue: QueueId,
    refused: &dyn Fn(LmId, QueueId) -> bool,
    busy: &[bool],
) -> Contention {
    let total = *total;
    let used = |q: QueueId| usage.get(&q).copied().unwrap_or_default();
    if fairness.policy.share(&used(queue), &total) >= fairness.share_of(queue) {
        return Contention::OverShare;
    }
    let mut victims: Vec<(f64, QueueId)> = usage
        .iter()
        .filter(|(q, _)| **q != queue)
        .map(|(q, u)| (fairness.violation(*q, u, &total), *q))
        .filter(|(v, _)| *v > 0.0)
        .collect();
    // Largest violation first; ties by queue id for determinism.
    victims.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut busy_only = false;
    for (_, victim) in victims {
        let mut where_used: Vec<(Resources, LmId)> = lms
            .iter()
            .flatten()
            .filter_map(|v| {
                let lm = v.topology.lm;
                let r = v.usage.iter().find(|(q, _)| *q == victim)?.1;
                let refused_now = refused(lm, victim);
                let in_flight = busy.get(lm.index()).copied().unwrap_or(false);
                busy_only |= in_flight && !r.is_zero() && !refused_now;
                (!r.is_zero() && !refused_now && !in_flight).then_some((r, lm))
            })
            .collect();
        where_used.sort_by(|a, b| {
            b.0.dominant_share(&total)
                .total_cmp(&a.0.dominant_share(&total))
                .then(a.1.cmp(&b.1))
        });
        if let Some((_, lm)) = where_used.first() {
            return Contention::Preempt { lm: *lm, victim };
        }
    }
    if busy_only {
        Contention::Busy
    } else {
        Contention::NoVictim
    }
}
