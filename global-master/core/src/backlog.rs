//! The work waiting in a GM's queues, the task shapes known to find no node, and
//! which blocked tasks wake when the view gains resources.
//!
//! A shape (constraints, resources) that found no node since the view last gained
//! resources would fail again: the view has only shrunk since. The placement
//! pipeline skips its scan (a known miss); the cache empties whenever the view gains
//! resources, which is also when blocked tasks deserve another try.
//!
//! Which blocked tasks are tried again ([`WakePolicy`]): the paper's simulator
//! retries every one of them whenever the view gains anything, so an overloaded GM
//! spends its time failing the same tasks again (860 million retries for a
//! 300,000-task overloaded trace on 10,000 nodes). With [`WakePolicy::Indexed`] (the
//! default) the blocked tasks wait in classes by shape (see [`crate::queue`]), and
//! the view lists the nodes whose free resources grew. A blocked class can only fit
//! on one of those (at the end of every pass no blocked class fits anywhere, and the
//! view only shrinks during a pass), so the next pass is *selective*: as the line
//! reaches a sleeping class's first task, the class is asked whether a grown node has
//! room for it now; if so it wakes and its tasks are tried in key order until the
//! first that finds no room (the ones behind it would fail too), then it sleeps
//! again; once no grown node has room left, nothing more is asked. The cost of a
//! pass follows the tasks it places, not the backlog (like kube-scheduler's
//! queueing hints, with the line order kept).
//!
//! Kept as before: the order of tries within a queue (keys), the known-miss cache,
//! every task a pass tries that the full retry would have tried with a chance to
//! fit. Queues the fairness step may still preempt for (within their share, another
//! queue over its own) keep the full retry: each of their tasks asks the fairness
//! step, as before. A topology rebuilt (an LM's first state, or a new one) wakes
//! everything: a task may have become unplaceable.
//!
//! What differs from the full retry, and why schedules can differ:
//! - the retries skipped are decisions no more: fewer `attempts`, and the simulator
//!   no longer charges their cost (2 us each), which under overload delayed every
//!   launch of the pass behind them;
//! - Megha's round-robin over LMs advances once per try, so with fewer tries a task
//!   can start on another LM (same kind of partition);
//! - across queues, a queue's blocked tasks that cannot fit no longer take turns in
//!   the round-robin between queues.
//!
//! With one GM, one LM, one queue and no charge for decisions the two give the same
//! schedules but for `attempts` (`tests/tests/cores/wake_index.rs`).
//!
//! The full retry made cheap (for a driver that books per task what the GM reports
//! in bulk: the simulator, [`crate::GmConfig::bulk_known_misses`]): once a shape
//! found no node in a pass, every later task of it in that pass fails the same way
//! (the view only shrinks during a pass). With one queue and no fairness step or
//! preempting class, such tasks are not taken out one by one: the shape's class
//! leaves the pass when the shape fails, and before each task the pass still
//! tries, the queue hands out how many tasks of such classes are in line before
//! it, counted from one sorted set of the lines' keys, whatever the classes
//! ([`Popped::Missed`]); the GM moves its cursors and counts the retries at once
//! ([`crate::outputs::KnownMisses`], placed among the decisions so that a driver
//! charges them where they fell), and each task owes the attempt until it leaves
//! its line ([`crate::GmOutput::misses_settled`]). A pass costs the tasks it tries
//! and one count per class, not one step per task or per run. The tasks tried, their
//! order, every decision and counter stay those of the one-by-one full retry
//! (`loadgen/sim/src/sim/megha/bulk_tests.rs` compares the two).

pub use crate::config::WakePolicy;
pub use crate::queue::Popped;
pub use crate::queue::Probe;
pub use crate::queue::Shape;
use crate::queue::{Pending, Queued, Queues};
use common::reasons::PendingReason;
use common::QueueId;
use rustc_hash::FxHashSet as HashSet;

/// The user queues and the known-miss cache.
#[derive(Debug, Default)]
pub struct Backlog {
    queues: Queues,
    /// The known misses (a set: nothing reads why they missed, and a set is what
    /// each miss costs least to insert into).
    failed_shapes: HashSet<Shape>,
    policy: WakePolicy,
    /// The view gained resources since the last pass.
    gained: bool,
    /// ... in a way the grown nodes do not tell (a topology changed): wake all.
    wake_all: bool,
    /// Queues whose classes stay awake for the whole pass (the fairness step may
    /// preempt for them).
    kept_awake: Vec<QueueId>,
    /// Known misses of a full retry are counted in bulk ([`Backlog::pop_ready_bulk`]).
    bulk: bool,
}

impl Backlog {
    pub fn new(policy: WakePolicy) -> Self {
        Backlog {
            policy,
            ..Backlog::default()
        }
    }

    /// Counts the known misses of a full retry in bulk ([`Backlog::pop_ready_bulk`];
    /// only under [`WakePolicy::All`]).
    pub fn with_bulk_misses(mut self, on: bool) -> Self {
        self.bulk = on && self.policy == WakePolicy::All;
        self.queues.set_bulk(self.bulk);
        self
    }

    /// Orders each queue by priority class with `aging` ([`common::priority`]).
    pub fn with_aging(mut self, aging: u64) -> Self {
        self.queues.set_aging(aging);
        self
    }

    pub fn queues(&self) -> &Queues {
        &self.queues
    }

    /// A new or retried task, at the back of its queue.
    pub fn push_ready(&mut self, pending: Box<Pending>) {
        self.queues.push_ready(pending);
    }

    /// Tasks to try again, in order.
    pub fn push_all_ready(&mut self, pending: impl IntoIterator<Item = Box<Pending>>) {
        pending.into_iter().for_each(|p| self.queues.push_ready(p));
    }

    /// A task that found no room in the current view: it waits in its class.
    pub fn push_blocked(&mut self, queued: Queued) {
        self.queues.push_blocked(queued);
    }

    /// Takes every waiting task of `job` out (a cancelled job).
    pub fn remove_job(&mut self, job: common::JobId) -> Vec<Box<Pending>> {
        self.queues.remove_job(job)
    }

    /// Takes every waiting task out (to queue them again in another order).
    pub fn take_all(&mut self) -> Vec<Box<Pending>> {
        self.queues.remove_if(&|_| true)
    }

    /// Takes `task` out if it waits (a resumed run no longer wanted).
    pub fn remove_task(&mut self, task: common::TaskId) -> Option<Box<Pending>> {
        self.queues.remove_if(&|t| *t == task).pop()
    }

    /// The next ready task, taking queues in turn.
    pub fn pop_ready(&mut self) -> Option<Queued> {
        self.queues.pop_ready()
    }

    /// Tasks the next pass would try (every blocked one counts while a gain is
    /// pending: it may wake).
    pub fn ready_len(&self) -> usize {
        match self.gained {
            true => self.queues.ready_len() + self.queues.blocked_len(),
            false => self.queues.ready_len(),
        }
    }

    /// The shape found no node since the view last gained resources.
    pub fn is_known_miss(&self, shape: &Shape) -> bool {
        self.failed_shapes.contains(shape)
    }

    /// The shape found no node in the current view: known from now on, and (indexed)
    /// its class sleeps, except in the queues kept awake for the fairness step.
    pub fn remember_miss(&mut self, shape: Shape, reason: &PendingReason) {
        if self.bulk {
            self.queues.doom(&shape, reason);
        }
        self.failed_shapes.insert(shape);
        if self.policy == WakePolicy::Indexed {
            let kept = &self.kept_awake;
            self.queues.sleep(shape, &|q| kept.contains(&q));
        }
    }

    /// The view gained resources: every shape is worth another try, and blocked
    /// tasks wake at the next pass ([`Backlog::begin_pass`]).
    pub fn view_gained(&mut self) {
        self.failed_shapes.clear();
        self.gained = true;
    }

    /// The view changed in a way grown nodes do not describe (a topology was built
    /// anew): every blocked task is tried at the next pass.
    pub fn view_rebuilt(&mut self) {
        self.view_gained();
        self.wake_all = true;
    }

    /// True when a gain since the last pass may wake blocked tasks.
    pub fn wake_pending(&self) -> bool {
        self.gained
    }

    /// True when the next [`Backlog::begin_pass`] wakes only some classes: every
    /// other blocked task can fit only on a node that grew since the last wake.
    pub fn wakes_selectively(&self) -> bool {
        self.gained && self.policy == WakePolicy::Indexed && !self.wake_all
    }

    /// Queues holding blocked tasks.
    pub fn blocked_queues(&self) -> Vec<QueueId> {
        self.queues.blocked_queues()
    }

    /// The start of a pass after a gain. With [`WakePolicy::All`] (or after a
    /// rebuild) every class wakes; otherwise the pass is selective: the classes of
    /// the `fairness_live` queues wake, and each other class is asked, when its turn
    /// in the line comes, whether it fits ([`Backlog::pop_ready_with`]).
    pub fn begin_pass(&mut self, fairness_live: Vec<QueueId>) {
        if !std::mem::take(&mut self.gained) {
            return;
        }
        if self.policy == WakePolicy::All || std::mem::take(&mut self.wake_all) {
            self.queues.wake_all();
        } else {
            for q in &fairness_live {
                self.queues.wake_queue(*q);
            }
            self.queues.start_walk();
        }
        self.wake_all = false;
        self.kept_awake = fairness_live;
    }

    /// The next ready task; in a selective pass, sleeping classes `probe` says fit
    /// wake when their turn comes.
    pub fn pop_ready_with(&mut self, probe: &mut dyn FnMut(&Shape) -> Probe) -> Option<Queued> {
        self.queues.pop_ready_with(probe)
    }

    /// The next ready task, as [`Backlog::pop_ready_with`]; when bulk misses are on,
    /// the tasks of classes whose shape failed in this pass that come before it
    /// ([`Popped::Missed`]): each would fail again (the view only shrank since the
    /// shape missed).
    pub fn pop_ready_bulk(&mut self, probe: &mut dyn FnMut(&Shape) -> Probe) -> Option<Popped> {
        self.queues.pop_ready_bulk(probe)
    }

    /// Tasks whose bulk misses were paid into them since the last call.
    pub fn take_settled(&mut self) -> Vec<(common::TaskId, u32)> {
        self.queues.take_settled()
    }

    /// Pays every bulk miss still owed (the end of a run).
    pub fn settle_all(&mut self) -> Vec<(common::TaskId, u32)> {
        self.queues.settle_all()
    }

    /// Tasks in the classes woken so far.
    pub fn woken(&self) -> u64 {
        self.queues.woken()
    }

    /// The end of a pass: every class sleeps until the view gains resources.
    pub fn end_pass(&mut self) {
        self.queues.sleep_all();
        self.kept_awake.clear();
    }
}
