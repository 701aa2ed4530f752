//! Worker liveness and registration as the LM service does them
//! (`local-master/src/service/workers.rs`): a worker silent for the worker timeout
//! (no report, no check-in: down or cut off from its LM) is lost
//! ([`LmInput::WorkerLost`]: its nodes go down, its tasks end `lost`, the orders
//! waiting for it are dropped); a worker registering again in the same life of its
//! LM restarted and is lost first; a lost worker that registers is back
//! ([`LmInput::WorkerBack`]); a restarted LM is ready once every worker registered or
//! is down (never registered within the timeout of its start).

use super::{Ev, Item, World};
use crate::sim::faults::check::Known;
use crate::sim::faults::plan::Role;
use common::messages::EndsPublished;
use common::messages::{HeldTask, TaskEnd};
use common::protocol::{LmToWorker, WorkerToLm};
use common::rng::Rng as _;
use common::{Micros, TaskId};
use lm_core::LmInput;

impl World<'_> {
    /// Every worker of LM `l` registered in its life, or is down (lm-core's
    /// readiness rule).
    pub(super) fn ready(&self, l: u16) -> bool {
        self.readiness(l).is_ready()
    }

    /// LM `l`'s workers: how many are neither registered in its life nor down.
    pub(super) fn readiness(&self, l: u16) -> lm_core::gate::Readiness {
        lm_core::gate::Readiness::of(
            self.workers_of(l)
                .map(|w| (self.registered[w as usize], self.slot_down[w as usize])),
        )
    }

    pub(super) fn workers_of(&self, l: u16) -> impl Iterator<Item = u32> + '_ {
        (0..self.workers.len() as u32).filter(move |w| self.placement[*w as usize].0 == l)
    }

    /// At LM `l`'s tick: the workers that can reach it checked in; those silent for
    /// the worker timeout are lost.
    pub(super) fn check_workers(&mut self, l: u16) {
        let Some(timeout) = self.config.worker_timeout else {
            return;
        };
        let mine: Vec<u32> = self.workers_of(l).collect();
        for w in mine {
            let i = w as usize;
            let reachable =
                self.workers[i].is_some() && !self.blocked(Role::Worker(w), Role::Lm(l));
            if reachable && self.registered[i] && !self.slot_down[i] {
                self.last_seen[i] = self.now;
                self.confirm(w);
            }
            // The check-in's answer says the LM does not count it registered (it
            // restarted, or declared this worker lost): it registers again.
            if reachable && (!self.registered[i] || self.slot_down[i]) {
                self.register_again(w);
            }
            if self.slot_down[i] || self.now.0 <= self.last_seen[i].0 + timeout.0 {
                continue;
            }
            let reason = match self.registered[i] {
                true => format!("no word from its worker for {} ms", timeout.0 / 1000),
                false => format!("w{w} did not register within {} ms", timeout.0 / 1000),
            };
            self.lose_worker(l, w, &reason);
        }
    }

    /// Declares worker `w` of LM `l` lost: its undelivered orders are dropped (the
    /// answers waiting for them leave), its nodes go down, its tasks end lost.
    pub(super) fn lose_worker(&mut self, l: u16, w: u32, reason: &str) {
        self.note(|| format!("  lm{l} loses w{w}: {reason}"));
        if let Some(stream) = self.streams.remove(&(Role::Lm(l), Role::Worker(w))) {
            // The first order may be on its way already (a call in flight, bytes
            // in a send buffer): it may still arrive, later.
            if let Some(Item::ToWorker(LmToWorker::Start(s), _)) = stream.items.front() {
                if let Some(timeout) = self
                    .config
                    .worker_timeout
                    .filter(|_| self.config.late_orders)
                {
                    let at =
                        self.now + Micros(self.late.random_range(timeout.0 / 2..=3 * timeout.0));
                    let order = LmToWorker::Start(s.clone());
                    // Signed with the order key of the process whose registration
                    // the LM took: only that process takes it.
                    let life = self.keyed[w as usize];
                    self.note(|| {
                        format!(
                            "  lm{l}'s start {} for w{w} may arrive late (at {} µs)",
                            s.task.id, at.0
                        )
                    });
                    self.queue.push(at, Ev::Late(l, w, order, life));
                }
            }
            for item in stream.items {
                if let Item::ToWorker(order, call) = item {
                    if let LmToWorker::Start(s) = &order {
                        self.note(|| format!("  lm{l} drops start {} for w{w}", s.task.id));
                    }
                    if let Some(call) = call {
                        self.order_delivered(call);
                    }
                }
            }
        }
        self.slot_down[w as usize] = true;
        let node = self.placement[w as usize].1;
        let input = LmInput::WorkerLost {
            nodes: vec![node],
            reason: reason.to_owned(),
        };
        self.lm_step(l, input, None);
    }

    /// A worker registers with its LM: after the LM restarted (holding what it runs,
    /// listing what it ended), or after it restarted itself (holding nothing).
    pub(super) fn register(
        &mut self,
        l: u16,
        w: u32,
        holding: Vec<HeldTask>,
        ended: Vec<TaskEnd>,
        life: u32,
    ) {
        let i = w as usize;
        if self.lms[l as usize].is_none() {
            return;
        }
        let liveness = self.config.worker_timeout.is_some();
        // The process already registered asking again (a duplicate, or its answer
        // was lost): the LM service knows it by its order key and loses nothing.
        let repeat = self.registered[i] && !self.slot_down[i] && self.keyed[i] == life;
        if repeat {
            self.note(|| format!("  lm{l} takes w{w}'s registration as a repeat (same process)"));
        }
        if liveness && self.registered[i] && !self.slot_down[i] && !repeat {
            // What it lists as ended ended so (as the LM service does); the rest
            // is lost.
            let node = self.placement[i].1;
            let reports = self.lms[l as usize]
                .as_ref()
                .map(|lm| lm.unheard_ends(&[node], &ended))
                .unwrap_or_default();
            for report in reports {
                self.note(|| format!("  lm{l} ends {} as w{w} lists it ended", report.task()));
                self.lm_step(l, LmInput::Worker(WorkerToLm::Report(report)), None);
            }
            self.lose_worker(l, w, "its worker registered again (it restarted)");
        }
        let node = self.placement[i].1;
        if let Some(lm) = self.lms[l as usize].as_mut() {
            let mut runs = Vec::new();
            let mut republished = Vec::new();
            for end in ended {
                let end = TaskEnd { node, ..end };
                if lm.ended_before_restart(&end) {
                    // A finish is published again by the LM; a failure by its
                    // GM, if it takes it (as the services do).
                    // (Not that of a void run of a gang restarted whole.)
                    let void =
                        (self.gang_next_run.get(&end.task)).is_some_and(|next| end.attempt < *next);
                    if end.failure.is_none() && !void {
                        republished.push(common::events::TaskEvent::reannounced(
                            common::LmId(l),
                            &end,
                        ));
                    }
                    runs.push(end);
                }
            }
            for event in republished {
                // The LM life that saw it end may have published it already.
                self.checker.may_repeat_end(event.task);
                let broken = self.checker.event(&event);
                self.broke(broken);
            }
            // Each is sent to the GM its job id names too (as the LM service does):
            // a run an earlier LM life reported lost that finished ends its task
            // if the GM's retry has not gone out; a failure reaches it with its
            // cause.
            self.ends_to_gms(l, runs);
        }
        if !repeat {
            // The registration's answer tells the worker the first start order sent
            // for it (the LM service's `orders_from`); earlier ones it refuses.
            let held = self.streams.get(&(Role::Lm(l), Role::Worker(w)));
            let held = held
                .into_iter()
                .flat_map(|s| s.items.iter())
                .filter_map(|i| match i {
                    Item::ToWorker(order, _) => Some(order),
                    _ => None,
                });
            if let (Some(lm), true) = (self.lms[l as usize].as_ref(), self.config.order_floor) {
                let from = lm_core::gate::first_of_registration(held, lm.next_dispatch());
                self.filters[i].floor(lm.life(), from);
            }
        }
        self.registered[i] = true;
        self.keyed[i] = life;
        self.last_seen[i] = self.now;
        self.confirm(w);
        if std::mem::take(&mut self.slot_down[i]) {
            let input = LmInput::WorkerBack {
                nodes: vec![self.placement[i].1],
                holding: holding
                    .iter()
                    .map(|h| (h.node, h.task.id, h.task.attempt))
                    .collect(),
            };
            self.lm_step(l, input, None);
        }
        let now = self.clock(Role::Lm(l));
        let Some(lm) = self.lms[l as usize].as_mut() else {
            return;
        };
        let mut fx = lm_core::LmEffects::default();
        let mut adopted = Vec::new();
        for held in holding {
            let task = held.task.id;
            if lm.adopt(now, held, &mut fx).is_ok() {
                adopted.push(task);
            }
        }
        for task in adopted {
            self.checker.adopted(task);
        }
        for event in &fx.events {
            let broken = self.checker.event(event);
            self.broke(broken);
        }
    }

    /// A worker crashed: what it ran is gone. Without worker liveness (the LM before
    /// issue 14) nothing tells the LM: its tasks are a known cause.
    pub(super) fn worker_crashed(&mut self, w: u32) {
        let (l, node) = self.placement[w as usize];
        // Tasks its LM does not hold (down, or restarted without them): no one will
        // report them.
        let held = |t: &TaskId| {
            self.lms[l as usize]
                .as_ref()
                .is_some_and(|lm| lm.running().contains_key(t))
        };
        let orphans: Vec<TaskId> = self.workers[w as usize]
            .as_ref()
            .map(|x| {
                x.running()
                    .iter()
                    .map(|r| r.task)
                    .filter(|t| !held(t))
                    .collect()
            })
            .unwrap_or_default();
        for task in orphans {
            self.checker.mark_known(task, Known::EndLostWithWorker);
        }
        if self.config.worker_timeout.is_some() {
            return;
        }
        let mut lost: Vec<TaskId> = self.workers[w as usize]
            .as_ref()
            .map(|x| x.running().iter().map(|r| r.task).collect())
            .unwrap_or_default();
        if let Some(lm) = self.lms[l as usize].as_ref() {
            lost.extend(
                lm.running()
                    .iter()
                    .filter(|(_, a)| a.node == node)
                    .map(|(t, _)| *t),
            );
        }
        for task in lost {
            self.checker.mark_known(task, Known::WorkerCrash);
        }
    }

    /// Worker `w` registers with its LM, listing what it holds and what it finished
    /// (unless a registration is already on its way).
    pub(super) fn register_again(&mut self, w: u32) {
        let l = self.placement[w as usize].0;
        let pending = self
            .streams
            .get(&(Role::Worker(w), Role::Lm(l)))
            .is_some_and(|s| s.items.iter().any(|i| matches!(i, Item::Register { .. })));
        let Some(worker) = self.workers[w as usize].as_ref() else {
            return;
        };
        if pending {
            return;
        }
        let node = self.placement[w as usize].1;
        let holding = worker
            .running()
            .iter()
            .filter_map(|r| {
                // The run it holds, as the worker service keeps its start order.
                let mut task = self.specs.get(&r.task)?.clone();
                task.attempt = r.attempt;
                Some(HeldTask {
                    node,
                    task,
                    started_at: Some(r.started_at),
                })
            })
            .collect();
        let ended = self.ended[w as usize].clone();
        let life = self.worker_life[w as usize];
        let item = Item::Register {
            holding,
            ended,
            life,
        };
        self.send(Role::Worker(w), Role::Lm(l), item, true);
    }

    /// A (re)started LM: its workers have not registered with it yet, and the
    /// timeout for them runs from now.
    pub(super) fn lm_started(&mut self, l: u16, restarted: bool) {
        let mine: Vec<u32> = self.workers_of(l).collect();
        // The workers of a first start count as registered from the beginning: the
        // answers of those registrations told them this LM life and its first order.
        let first = (self.lms[l as usize].as_ref())
            .filter(|_| !restarted && self.config.order_floor)
            .map(|lm| (lm.life(), lm.next_dispatch()));
        for w in mine {
            self.registered[w as usize] = !restarted;
            self.slot_down[w as usize] = false;
            self.last_seen[w as usize] = self.now.max(Micros::ZERO);
            if let Some((life, from)) = first {
                self.filters[w as usize].floor(life, from);
            }
        }
    }
}

impl World<'_> {
    /// Runs a worker listed ended when it registered with LM `l` (a life that had
    /// not heard of them): each is sent to the GM its job id names, as the LM
    /// service does. A run an earlier LM life reported lost that finished after all
    /// ends its task there if the retry has not gone out.
    fn ends_to_gms(&mut self, l: u16, runs: Vec<TaskEnd>) {
        for end in runs {
            let g = end.task.job.0 >> common::JobId::SUBMISSION_BITS;
            if g >= self.gms.len() as u64 {
                continue;
            }
            let (task, attempt) = (end.task, end.attempt);
            self.note(|| format!("  lm{l} sends gm{g} the end of {task}#{attempt}"));
            let publish = if end.failure.is_some() {
                EndsPublished::ByGmAgain
            } else {
                EndsPublished::ByLm
            };
            let ended = common::messages::TasksEnded {
                lm: common::LmId(l),
                gm: common::GmId(g as u16),
                ends: vec![end],
                publish,
            };
            self.gm_step(
                g as u16,
                gm_core::GmInput::Lm(common::protocol::LmToGm::Ended(ended)),
            );
        }
    }

    /// Whether run `attempt` of `task` is its GM's current run of an open task, as
    /// the GM service's tracker tells: the last run the GM launched, retried or
    /// resumed it as.
    pub(super) fn current_run_at_gm(&self, task: TaskId, attempt: u32) -> bool {
        if self.checker.gm_has_ended(task) {
            return false;
        }
        let launched = self.launched_at.get(&task).map_or(1, |x| x.run);
        let journaled = self.journal_runs.get(&task).map_or(1, |r| r.0);
        attempt >= launched.max(journaled)
    }
}
