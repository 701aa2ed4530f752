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

use crate::backlog::{Backlog, Shape};
use crate::queue::Pending;
use crate::view::LmView;
use common::fairness::FairnessConfig;
use common::messages::PreemptRefusal;
use common::{LmId, Micros, QueueId, Resources, TaskId};
use rustc_hash::FxHashSet as HashSet;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

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
pub type Refusal = (LmId, QueueId, Option<Shape>);

/// Usage per queue and total capacity over the view.
type Usage = (BTreeMap<QueueId, Resources>, Resources);

/// The fairness step's state: the usage view, refusals, one preemption slot per LM
/// and the tasks waiting for a slot.
#[derive(Debug)]
pub struct Fairness {
    /// Queue shares; `None` disables preemption.
    config: Option<Arc<FairnessConfig>>,
    /// Usage per queue and total capacity over the view, rebuilt after a snapshot.
    usage_cache: Option<Usage>,
    /// Preemptions refused since the view last gained resources.
    refusals: HashSet<Refusal>,
    /// Per LM: a preemption request of this GM awaits its answer.
    in_flight: Vec<bool>,
    /// Tasks waiting for a preemption slot (oldest first); one is retried each time
    /// an LM answers a preemption.
    slot_waiters: VecDeque<Box<Pending>>,
    /// Requests an LM holds for room (answered `held`), awaiting their final
    /// answer, with their task's queue and resources (counted as that queue's
    /// usage meanwhile: a claim is room the queue will get).
    held: Vec<HeldClaim>,
    /// This GM's queues with tasks waiting (as of the pass): they want room, so
    /// they lend none of their share ([`FairnessConfig::entitled`]).
    wanting: Vec<QueueId>,
    /// Preemption requests sent in this GM's life ([`PreemptRequest::seq`] of the
    /// newest).
    ///
    /// [`PreemptRequest::seq`]: common::messages::PreemptRequest::seq
    preempt_seq: u64,
}

/// How long after a held request's hold should have ended (by this GM's clock:
/// the hold counted from the `held` answer) the GM still waits for its final
/// answer before it asks the LM whether it still holds the request (or launched
/// its task): the LM answers at the hold's end, so only an LM that died or
/// restarted, a lost final answer, or a link down this long, leaves a claim
/// unanswered so late.
pub const HELD_ANSWER_MARGIN: Micros = Micros(300_000_000);

/// How often the GM asks again about a held request while the LM does not
/// answer, or answers that it still holds it. The task is never queued again
/// meanwhile: the LM's life that held it may still launch it.
pub const HELD_ASK_PERIOD: Micros = Micros(30_000_000);

/// A request an LM holds for this GM: the LM, the task, the claim (its queue and
/// resources) and when this GM stops waiting for the final answer.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldClaim {
    pub lm: LmId,
    pub task: TaskId,
    pub queue: QueueId,
    pub resources: Resources,
    /// When this GM next asks the LM about it (first at the hold's end plus
    /// [`HELD_ANSWER_MARGIN`], then every [`HELD_ASK_PERIOD`]).
    pub expires: Micros,
    /// An ask about it is out, unanswered.
    pub ask_out: bool,
}

impl Fairness {
    pub fn new(config: Option<Arc<FairnessConfig>>, lms: usize) -> Self {
        Fairness {
            config,
            usage_cache: None,
            refusals: HashSet::default(),
            in_flight: vec![false; lms],
            slot_waiters: VecDeque::new(),
            held: Vec::new(),
            wanting: Vec::new(),
            preempt_seq: 0,
        }
    }

    /// Algorithm 2 for a task of `queue` and `shape` that found no room in `lms`
    /// ([`Contention::NoVictim`] without queue shares).
    pub fn decide(&mut self, lms: &[Option<LmView>], queue: QueueId, shape: Shape) -> Contention {
        let Some(f) = &self.config else {
            return Contention::NoVictim;
        };
        let held = &self.held;
        let usage = (self.usage_cache).get_or_insert_with(|| Fairness::usage(lms, held));
        let refusals = &self.refusals;
        // A busy LM (it takes no new work for now) is not asked either.
        let refused = |lm: LmId, victim| {
            lms.get(lm.index())
                .and_then(Option::as_ref)
                .is_some_and(LmView::is_busy)
                || refusals.contains(&(lm, victim, None))
                || refusals.contains(&(lm, victim, Some(shape)))
        };
        let wanting = &self.wanting;
        let want = |q: QueueId| q == queue || wanting.contains(&q);
        contention(
            f,
            lms,
            usage,
            (queue, shape.1),
            &want,
            &refused,
            &self.in_flight,
        )
    }

    /// This GM's queues with tasks waiting now (at the start of a pass).
    pub fn set_wanting(&mut self, queues: impl Iterator<Item = QueueId>) {
        self.wanting.clear();
        self.wanting.extend(queues);
    }

    /// For a task of a preempting priority class that found no room: the LM where
    /// its own queue uses the most (lower classes of the queue may make room there;
    /// the LM checks), skipping refusals, busy LMs and LMs with a request in flight
    /// ([`Contention::Busy`] when only those are left: the task waits for the
    /// slot, not for room to free by itself; else [`Contention::NoVictim`]).
    /// Such a preemption trades tasks within the queue, so shares do not move.
    pub fn priority_victim(
        &self,
        lms: &[Option<LmView>],
        queue: QueueId,
        shape: Shape,
    ) -> Contention {
        let mut in_flight_only = false;
        let best = lms
            .iter()
            .flatten()
            .filter(|v| !v.is_busy())
            .filter_map(|v| {
                let lm = v.topology.lm;
                let used = v.usage.iter().find(|(q, _)| *q == queue)?.1;
                let refused = self.refusals.contains(&(lm, queue, None))
                    || self.refusals.contains(&(lm, queue, Some(shape)));
                let in_flight = self.in_flight.get(lm.index()).copied().unwrap_or(true);
                in_flight_only |= in_flight && !used.is_zero() && !refused;
                (!used.is_zero() && !refused && !in_flight).then_some((used.cpu_millis, lm))
            })
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        match best {
            Some((_, lm)) => Contention::Preempt { lm, victim: queue },
            None if in_flight_only => Contention::Busy,
            None => Contention::NoVictim,
        }
    }

    /// True when Algorithm 2 might preempt for a task of `queue` in this view: shares
    /// are configured, `queue` is within its share and some other queue is over
    /// its own. Otherwise every task of `queue` that finds no room just waits.
    pub fn may_preempt_for(&mut self, lms: &[Option<LmView>], queue: QueueId) -> bool {
        let Some(f) = &self.config else {
            return false;
        };
        let held = &self.held;
        let (usage, total) = (self.usage_cache).get_or_insert_with(|| Fairness::usage(lms, held));
        let wanting = &self.wanting;
        let want = |q: QueueId| q == queue || wanting.contains(&q);
        if f.entitled_violation(queue, usage, total, &want) >= 0.0 {
            return false;
        }
        usage
            .keys()
            .any(|q| *q != queue && f.entitled_violation(*q, usage, total, &want) > 0.0)
    }

    /// How long a task that could preempt first waits for room to free by itself.
    pub fn grace(&self) -> Micros {
        self.config.as_ref().map_or(Micros::ZERO, |f| f.rules.grace)
    }

    /// A preemption request to `lm` leaves: its slot is taken until the answer.
    /// Returns its number in this GM's life ([`PreemptRequest::seq`]).
    ///
    /// [`PreemptRequest::seq`]: common::messages::PreemptRequest::seq
    pub fn asked(&mut self, lm: LmId) -> u64 {
        self.in_flight[lm.index()] = true;
        self.preempt_seq += 1;
        self.preempt_seq
    }

    /// The number of the newest preemption request sent.
    pub fn preempt_seq(&self) -> u64 {
        self.preempt_seq
    }

    /// The victim's LMs are all busy: the task waits for a slot.
    pub fn wait_for_slot(&mut self, pending: Box<Pending>) {
        self.slot_waiters.push_back(pending);
    }

    /// `lm` holds, since `now`, this GM's request for `task`, a claim of `queue`
    /// on these resources. The GM waits for the final answer until the hold (the
    /// rules' `hold`, from `now`) plus [`HELD_ANSWER_MARGIN`] is over.
    pub fn held(
        &mut self,
        now: Micros,
        lm: LmId,
        task: TaskId,
        (queue, resources): (QueueId, Resources),
    ) {
        if self.held.iter().any(|h| (h.lm, h.task) == (lm, task)) {
            return;
        }
        let hold = self.config.as_ref().map_or(Micros::ZERO, |f| f.rules.hold);
        self.held.push(HeldClaim {
            lm,
            task,
            queue,
            resources,
            expires: now + hold + HELD_ANSWER_MARGIN,
            ask_out: false,
        });
        self.usage_cache = None;
    }

    /// `lm` gave its final answer to the request for `task` (or never will).
    /// False if no such claim was held.
    pub fn answered(&mut self, lm: LmId, task: TaskId) -> bool {
        let before = self.held.len();
        self.held.retain(|h| (h.lm, h.task) != (lm, task));
        let found = self.held.len() != before;
        if found {
            self.usage_cache = None;
        }
        found
    }

    /// Whether this GM waits for `lm`'s final answer to its request for `task`.
    pub fn waits_for(&self, lm: LmId, task: TaskId) -> bool {
        self.held.iter().any(|h| (h.lm, h.task) == (lm, task))
    }

    /// This GM asks `lm` now about its request for `task` (its final answer is
    /// overdue): the next ask is due a period later. True if the previous ask
    /// got no answer within its period.
    pub fn asking(&mut self, now: Micros, lm: LmId, task: TaskId) -> bool {
        let Some(h) = (self.held.iter_mut()).find(|h| (h.lm, h.task) == (lm, task)) else {
            return false;
        };
        h.expires = now + HELD_ASK_PERIOD;
        std::mem::replace(&mut h.ask_out, true)
    }

    /// `lm` answered this GM's ask about its request for `task`: it still holds
    /// it (the next ask stays due a period after this one).
    pub fn still_held(&mut self, lm: LmId, task: TaskId) {
        if let Some(h) = (self.held.iter_mut()).find(|h| (h.lm, h.task) == (lm, task)) {
            h.ask_out = false;
        }
    }

    /// The tasks whose requests `lm` holds.
    pub fn held_at(&self, lm: LmId) -> Vec<TaskId> {
        (self.held.iter())
            .filter(|h| h.lm == lm)
            .map(|h| h.task)
            .collect()
    }

    /// The held requests whose final answer is overdue at `now`, or whose ask is
    /// due again (LM, task).
    pub fn held_expired(&self, now: Micros) -> Vec<(LmId, TaskId)> {
        (self.held.iter())
            .filter(|h| h.expires <= now)
            .map(|h| (h.lm, h.task))
            .collect()
    }

    /// True when an LM holds a preemption request of this GM (its expiry is then
    /// worth asking about).
    #[inline]
    pub fn holds_any(&self) -> bool {
        !self.held.is_empty()
    }

    /// When the first held request's final answer becomes overdue (or its ask is
    /// due again).
    pub fn next_held_expiry(&self) -> Option<Micros> {
        self.held.iter().map(|h| h.expires).min()
    }

    /// Usage per queue over the view, with the claims of held requests, and the
    /// total capacity.
    fn usage(lms: &[Option<LmView>], held: &[HeldClaim]) -> Usage {
        let (mut usage, total) = usage_view(lms);
        for h in held {
            let u = usage.entry(h.queue).or_default();
            *u = u.add(&h.resources);
        }
        (usage, total)
    }

    /// `lm` answered (or will never answer) a preemption request: its slot is free,
    /// and the oldest task waiting for one goes back to its queue.
    pub fn slot_freed(&mut self, lm: LmId, backlog: &mut Backlog) {
        if let Some(flag) = self.in_flight.get_mut(lm.index()) {
            *flag = false;
        }
        if let Some(waiter) = self.slot_waiters.pop_front() {
            backlog.push_ready(waiter);
        }
    }

    /// `lm` refused to preempt `victim` for a task of `shape`: not asked again for
    /// such a task (for any task unless it found nothing to free) until the view
    /// gains resources.
    pub fn refused(&mut self, lm: LmId, victim: QueueId, shape: Shape, why: &PreemptRefusal) {
        let shape = match why {
            PreemptRefusal::NothingToFree => Some(shape),
            _ => None,
        };
        self.refusals.insert((lm, victim, shape));
    }

    /// A snapshot changed the view: usage is summed again when next needed.
    pub fn view_changed(&mut self) {
        self.usage_cache = None;
    }

    /// The view gained resources: refusals are forgotten and every task waiting for a
    /// slot goes back to its queue.
    pub fn view_gained(&mut self, backlog: &mut Backlog) {
        self.refusals.clear();
        backlog.push_all_ready(self.slot_waiters.drain(..));
    }

    /// Takes the tasks of `job` waiting for a slot out (a cancelled job).
    pub fn remove_job(&mut self, job: common::JobId) -> Vec<Box<Pending>> {
        self.remove_if(&|t| t.job == job)
    }

    /// Takes the waiting tasks `gone` names out.
    pub fn remove_if(&mut self, gone: &dyn Fn(&common::TaskId) -> bool) -> Vec<Box<Pending>> {
        let (gone, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.slot_waiters)
            .into_iter()
            .partition(|p| gone(&p.task.id));
        self.slot_waiters = kept;
        gone.into()
    }

    /// Tasks waiting for a preemption slot.
    pub fn waiting(&self) -> impl Iterator<Item = &Pending> {
        self.slot_waiters.iter().map(|p| &**p)
    }
}

/// Algorithm 2's choice for a task of `queue` asking for `request` that found no
/// room. `usage` and `total` come from [`usage_view`]. Shares are the ones the
/// queues are entitled to now ([`FairnessConfig::entitled`]: with the unused
/// part of shares lent, by the queues that do not `want` room). Under the rule `within_share_after`, a task whose queue would be over
/// its share once it runs waits too (it would be the next victim).
pub fn contention(
    fairness: &FairnessConfig,
    lms: &[Option<LmView>],
    (usage, total): &(BTreeMap<QueueId, Resources>, Resources),
    (queue, request): (QueueId, Resources),
    want: &dyn Fn(QueueId) -> bool,
    refused: &dyn Fn(LmId, QueueId) -> bool,
    busy: &[bool],
) -> Contention {
    let total = *total;
    let used = |q: QueueId| usage.get(&q).copied().unwrap_or_default();
    let share = fairness.entitled(queue, usage, &total, want);
    if fairness.policy.share(&used(queue), &total) >= share
        || (fairness.rules.within_share_after
            && fairness.policy.share(&used(queue).add(&request), &total) > share + 1e-12)
    {
        return Contention::OverShare;
    }
    let mut victims: Vec<(f64, QueueId)> = usage
        .keys()
        .filter(|q| **q != queue)
        .map(|q| (fairness.entitled_violation(*q, usage, &total, want), *q))
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
