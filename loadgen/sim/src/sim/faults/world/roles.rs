//! The roles' sides of a fault run: GM, LM and worker steps, registration, and the
//! faults that hit roles (crashes and restarts, refusals, partitions, skew).

use super::{describe_request, tasks, Ev, Held, Item, World};
use crate::sim::faults::check::{self, Known};
use crate::sim::faults::plan::{Fault, Link, Role};
use common::messages::EndsPublished;
use common::messages::WorkerReport;
use common::protocol::facts::TaskFact;
use common::protocol::{ClientToGm, GmAddress, LmRoute, LmToGm, LmToWorker, WorkerToLm};
use common::{GmId, Micros, TaskId};
use gm_core::{DecisionOutcome, GlobalMaster, GmConfig, GmInput};
use lm_core::{LmConfig, LmInput, LocalMaster};

impl World<'_> {
    pub(super) fn arrival(&mut self, k: usize) {
        let g = (k % self.gms.len()) as u16;
        if self.gms[g as usize].is_none() {
            self.note(|| format!("  gm{g} is down: job {k} not accepted"));
            return;
        }
        let tasks = self.jobs[k].1.clone();
        for t in &tasks {
            self.checker.accepted(t.id, g);
        }
        let retry = self.config.retry;
        let submit = match self.gang_spec(k) {
            Some(gang) => ClientToGm::SubmitGang { tasks, retry, gang },
            None => ClientToGm::SubmitJob {
                tasks,
                retry,
                dag: None,
            },
        };
        self.gm_step(g, GmInput::Client(submit));
    }

    pub(super) fn gm_step(&mut self, g: u16, mut input: GmInput) {
        let now = self.clock(Role::Gm(g));
        if self.gms[g as usize].is_none() {
            return;
        }
        // Ends the LM left for the GM to publish: as the GM service, only those of
        // an open task's current run go to the core (`current_runs_only`).
        let mut to_publish = None;
        if let GmInput::Lm(message) = &mut input {
            if let Some(e) = message.ends_gm_publishes_mut() {
                let ends = std::mem::take(&mut e.ends);
                e.ends = (ends.into_iter())
                    .filter(|end| self.current_run_at_gm(end.task, end.attempt))
                    .collect();
                to_publish = Some((e.lm, e.publish));
            }
        }
        // The answer to a reconcile request of a restarted LM is read by the GM
        // service that asked it (the simulator's `lm_reconcile`); one about held
        // preemption requests is the core's (no fairness here yet).
        if let GmInput::Lm(LmToGm::ReconcileAnswer(a)) = input {
            if a.preempts.is_empty() {
                return self.lm_reconciled(g, a);
            }
            input = GmInput::Lm(LmToGm::ReconcileAnswer(a));
        }
        // The tasks an answer launched (the step's other launches, of gang timers,
        // are not the answer's), at the LM that answered.
        let answered_by = match &input {
            GmInput::Lm(m) if m.route() == LmRoute::Answer => Some(m.lm().0),
            _ => None,
        };
        let Some(gm) = self.gms[g as usize].as_mut() else {
            return;
        };
        let mut out = gm.step(now, input);
        // A gang broken after its commit is restarted whole: its members' runs so
        // far are void.
        for (job, members) in &out.gangs_restarted {
            self.gang_restarted(*job, members);
        }
        self.gangs_left(&out);
        for d in &out.decisions {
            if let DecisionOutcome::Unplaceable(_) = d.outcome {
                self.checker.unplaceable(d.task);
            }
        }
        if let Some((lm, publish)) = to_publish {
            // The GM service publishes those it takes, of tasks it had not ended:
            // its tracker ignores the end of an ended task (a restarted GM whose
            // journal no longer holds the task takes it for a first end).
            let checker = &self.checker;
            out.ended.retain(|e| !checker.gm_has_ended(e.task));
            let taken: Vec<_> = (out.ended.iter())
                .filter(|e| e.failure.is_some())
                .cloned()
                .collect();
            for end in &taken {
                if publish == EndsPublished::ByGmAgain {
                    self.checker.may_repeat_failure(end.task);
                }
                let event = common::events::TaskEvent::of_end(lm, end, publish);
                let broken = self.checker.event(&event);
                self.broke(broken);
            }
        }
        if !out.ended.is_empty() && !self.reconcile_ends {
            let broken = self.checker.gm_ended(g, &out.ended);
            self.broke(broken);
        }
        self.track_launches(g, answered_by, &mut out);
        // Failed tasks its job's retry policy runs again: not ended for good.
        for retry in &out.retries {
            self.checker.retrying(retry.task, self.now);
            // The GM service journals the run in the same step, before it answers.
            self.journal_runs
                .insert(retry.task, (retry.attempt, retry.failed));
        }
        if let Some(at) = out.next_wakeup {
            let at = self.to_sim(Role::Gm(g), at).max(self.now);
            let life = self.gm_life[g as usize];
            if self.gm_wake_at[g as usize].is_none_or(|w| at < w || w < self.now) {
                self.gm_wake_at[g as usize] = Some(at);
                self.queue.push(at, Ev::GmTick(g, life));
            }
        }
        for message in out.to_lms {
            self.note(|| format!("  gm{g} sends {}", describe_request(&message)));
            self.call(g, message);
        }
        if out.wants_pass && !self.pass_pending[g as usize] {
            self.pass_pending[g as usize] = true;
            self.queue
                .push(self.now, Ev::Pass(g, self.gm_life[g as usize]));
        }
    }

    /// One LM step; `call` is the GM call being served (its id, attempt and tasks).
    pub(super) fn lm_step(
        &mut self,
        l: u16,
        input: LmInput,
        call: Option<(u64, u32, Vec<TaskId>)>,
    ) {
        let now = self.clock(Role::Lm(l));
        let Some(lm) = self.lms[l as usize].as_mut() else {
            return;
        };
        // A gang commit: checked once its launches are booked.
        let mut commit = None;
        if let LmInput::Gm(common::protocol::GmToLm::Gang(g)) = &input {
            if g.op == common::messages::GangOp::Commit {
                commit = Some((g.gm, g.job));
            }
        }
        let end = match &input {
            LmInput::Worker(WorkerToLm::Report(
                r @ (WorkerReport::Finished { .. } | WorkerReport::Failed { .. }),
            )) => Some(r.task()),
            _ => None,
        };
        // A worker's report of a void run of a gang member (its gang restarted
        // whole since): what the LM makes of it is not the member's story.
        let void = match &input {
            LmInput::Worker(WorkerToLm::Report(r)) => Some((r.task(), r.attempt()))
                .filter(|(t, a)| self.gang_next_run.get(t).is_some_and(|next| a < next))
                .map(|(t, _)| t),
            _ => None,
        };
        let out = match lm.step(now, input) {
            Ok(out) => out,
            Err(e) => {
                self.note(|| format!("  lm{l} refuses: {e}"));
                // An end the event stream never saw, refused: it is lost.
                if let Some(task) = end.filter(|t| !self.checker.ended(t)) {
                    self.checker.mark_known(task, Known::EndLostAtLmRestart);
                }
                return;
            }
        };
        // A finish this LM life did not hold: the life that held it may have
        // published it already.
        for task in &out.unowned_finished {
            self.checker.may_repeat_end(*task);
        }
        for event in &out.events {
            if void.is_some_and(|task| task == event.task) || self.void_gang_end(event) {
                continue;
            }
            let broken = self.checker.event(event);
            self.broke(broken);
        }
        if let Some((gm, job)) = commit {
            self.gang_checked(gm, job, &out);
        }
        // The end of a retried run absorbed without a word: taken for a late report
        // of the run reported lost on that node.
        if let Some(task) = end.filter(|t| void != Some(*t)) {
            let told = out.events.iter().any(|e| e.task == task);
            if !told && self.checker.is_retry(&task) && !self.checker.ended(&task) {
                self.checker.mark_known(task, Known::RetryKilledAsLost);
            }
        }
        let ready = self.ready(l);
        let mut answer = None;
        for (to, message) in out.to_gms {
            if let Some(e) = message.ends_gm_publishes() {
                if e.publish == EndsPublished::ByGm {
                    for end in &e.ends {
                        self.checker.verdict_lost(end.task);
                    }
                }
            }
            match (message.route(), &call) {
                (LmRoute::Answer, Some(_)) => answer = Some(message),
                (LmRoute::State, _) => {
                    if ready {
                        self.publish(l, message)
                    }
                }
                // An answer with no call being served travels like the LM's own
                // messages.
                (LmRoute::Stream, _) | (LmRoute::Answer, None) => {
                    let GmAddress::One(g) = to else { continue };
                    self.send(Role::Lm(l), Role::Gm(g.0), Item::ToGm(message), false);
                }
            }
        }
        let orders = out.to_workers.len();
        for order in out.to_workers {
            let w = self.worker_of(l, order.node());
            let tag = call.as_ref().map(|c| c.0);
            // A retried task killed though no one asked: the LM took its run for a
            // late report of the run it declared lost.
            if let LmToWorker::Kill(k) = &order {
                if self.checker.is_retry(&k.task) {
                    self.checker.mark_known(k.task, Known::RetryKilledAsLost);
                }
            }
            // A start for a dead worker: without worker liveness it waits forever.
            if let (LmToWorker::Start(s), None, None) = (
                &order,
                self.workers[w as usize].as_ref(),
                self.config.worker_timeout,
            ) {
                self.checker.mark_known(s.task.id, Known::WorkerCrash);
            }
            self.send(
                Role::Lm(l),
                Role::Worker(w),
                Item::ToWorker(order, tag),
                false,
            );
        }
        if let (Some((id, _attempt, asked)), Some(answer)) = (call, answer) {
            let answered: Vec<TaskId> = answer.answered_tasks();
            // A retry answered `Duplicate` because the LM took the failed run for
            // finished (its worker listed it on registering again): it never runs.
            let mut duplicates = Vec::new();
            answer.for_each_task(|task, fact| {
                if let TaskFact::Rejected(common::reasons::RejectReason::Duplicate) = fact {
                    duplicates.push(task);
                }
            });
            for task in &duplicates {
                let running = self
                    .workers
                    .iter()
                    .flatten()
                    .any(|w| w.running().iter().any(|x| x.task == *task));
                if !running && self.checker.is_retry(task) {
                    self.checker
                        .mark_known(*task, Known::RetryAnsweredDuplicate);
                }
                // A run resumed from a GM journal answered `Duplicate` by an
                // LM that holds an earlier run (the GM could not reach it when
                // it asked): the GM awaits the resumed run's end, and that of
                // the earlier run is stale to it.
                let older = self.lms[l as usize]
                    .as_ref()
                    .and_then(|lm| lm.running().get(task).map(|a| a.task.attempt));
                let asked_run = self.journal_runs.get(task).map(|r| r.0);
                if self.checker.was_resubmitted(task)
                    && older.is_some_and(|o| asked_run.is_some_and(|a| o < a))
                {
                    self.checker.mark_known(*task, Known::JournalRerun);
                }
            }
            if answered != asked {
                let detail = format!(
                    "task {}: lm{l} answered a request for [{}] with outcomes for [{}]",
                    asked.first().map(ToString::to_string).unwrap_or_default(),
                    tasks(asked.iter().copied()),
                    tasks(answered.iter().copied())
                );
                let broken = (check::Invariant::AnswerFromOtherLife, detail);
                let gm = self.calls.get(&id).map(|c| c.gm as usize);
                let behind = gm.is_some_and(|g| self.gm_clock_behind[g]);
                let result = match behind && !self.config.batch_seq_from_zero {
                    true => self.checker.excuse(Known::GmClockBehind, broken),
                    false => Err(broken),
                };
                self.broke(result);
            }
            if orders == 0 {
                self.send_answer(l, id, answer);
            } else {
                self.held.insert(
                    id,
                    Held {
                        lm: l,
                        remaining: orders,
                        answer: Some(answer),
                    },
                );
            }
        }
    }

    /// A heartbeat over the broker, to every GM.
    pub(super) fn publish(&mut self, l: u16, message: LmToGm) {
        if self.broker_down {
            return;
        }
        for g in 0..self.gms.len() as u16 {
            let rates = self.rates[Link::State as usize];
            if self.blocked(Role::Lm(l), Role::Gm(g)) || self.chance(rates.loss) {
                continue;
            }
            let copies = if self.chance(rates.dup) { 2 } else { 1 };
            for _ in 0..copies {
                let at = self.now + self.transit(Link::State, false);
                self.queue.push(at, Ev::State(g, message.clone()));
            }
        }
    }

    pub(super) fn tick(&mut self, l: u16, life: u32) {
        if self.lm_life[l as usize] != life || self.lms[l as usize].is_none() {
            return;
        }
        self.lm_step(l, LmInput::Tick, None);
        self.check_workers(l);
        let next = self.lms[l as usize]
            .as_ref()
            .map_or(self.now, LocalMaster::next_wakeup);
        let at = self.to_sim(Role::Lm(l), next).max(self.now + Micros(1));
        self.queue.push(at, Ev::Tick(l, life));
    }

    pub(super) fn fault(&mut self, fault: Fault) {
        match fault {
            Fault::Crash(role) => self.crash(role),
            Fault::Restart(role) => self.restart(role),
            Fault::Partition(a, b) => self.partitions.push((a, b)),
            Fault::Heal => self.partitions.clear(),
            Fault::Refuse(w) => {
                if let Some(r) = self.refusing.get_mut(w as usize) {
                    *r = true;
                }
            }
            Fault::Accept(w) => {
                if let Some(r) = self.refusing.get_mut(w as usize) {
                    *r = false;
                }
            }
            Fault::BrokerDown => self.broker_down = true,
            Fault::BrokerUp => self.broker_down = false,
            Fault::Skew(role, ms) => {
                self.pending_skew.insert(role, ms);
            }
            Fault::Rates(None, r) => self.rates = [r; 3],
            Fault::Rates(Some(link), r) => self.rates[link as usize] = r,
        }
    }

    pub(super) fn exists(&self, role: Role) -> bool {
        match role {
            Role::Gm(g) => (g as usize) < self.gms.len(),
            Role::Lm(l) => (l as usize) < self.lms.len(),
            Role::Worker(w) => (w as usize) < self.workers.len(),
        }
    }

    pub(super) fn crash(&mut self, role: Role) {
        if !self.exists(role) || !self.up(role) {
            return;
        }
        // What the role sent and was not yet delivered dies with it.
        let dropped: Vec<(Role, Role)> = self
            .streams
            .keys()
            .filter(|(from, _)| *from == role)
            .copied()
            .collect();
        for key in dropped {
            if let Some(stream) = self.streams.remove(&key) {
                for item in stream.items {
                    match item {
                        Item::ToGm(LmToGm::Ended(e)) => {
                            for end in e.ends {
                                // A worker's end it remembers is announced again
                                // when it registers with the next life.
                                let remembered = self
                                    .ended
                                    .iter()
                                    .flatten()
                                    .any(|x| x.task == end.task && x.attempt == end.attempt);
                                // The LM's own verdicts were not published: the
                                // next life judges again.
                                if remembered || e.publish == EndsPublished::ByGm {
                                    continue;
                                }
                                self.checker.mark_known(end.task, Known::LmCrashLostEnd);
                            }
                        }
                        Item::ToWorker(LmToWorker::Start(s), _) => {
                            self.checker.mark_known(s.task.id, Known::StartLostWithLm);
                        }
                        Item::ToLm(WorkerToLm::Report(
                            r @ (WorkerReport::Finished { .. } | WorkerReport::Failed { .. }),
                        )) => {
                            // The LM still holds it: worker liveness would report it
                            // lost; else only a reconciliation finds it.
                            let Role::Lm(l) = key.1 else { continue };
                            let held = self.lms[l as usize]
                                .as_ref()
                                .is_some_and(|lm| lm.running().contains_key(&r.task()));
                            match (held, self.config.worker_timeout) {
                                (true, None) => {
                                    self.checker.mark_known(r.task(), Known::WorkerCrash)
                                }
                                (true, Some(_)) => {}
                                (false, _) => {
                                    self.checker.mark_known(r.task(), Known::EndLostWithWorker)
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        match role {
            Role::Gm(g) => {
                self.gms[g as usize] = None;
                self.forget_launches(g);
                self.gm_life[g as usize] += 1;
                self.pass_pending[g as usize] = false;
                self.calls.retain(|_, c| c.gm != g);
                if !self.config.journal {
                    for task in self.checker.open_of(g) {
                        if !self.held_anywhere(&task) {
                            self.checker.mark_known(task, Known::GmCrash);
                        }
                    }
                }
            }
            Role::Lm(l) => {
                // Tasks their worker does not hold (it is down, or came back empty):
                // no one will know them.
                let orphans: Vec<TaskId> = self.lms[l as usize]
                    .as_ref()
                    .map(|lm| {
                        lm.running()
                            .iter()
                            .filter(|(t, a)| {
                                let w = self.worker_of(l, a.node);
                                !self.workers[w as usize]
                                    .as_ref()
                                    .is_some_and(|x| x.running().iter().any(|r| r.task == **t))
                            })
                            .map(|(t, _)| *t)
                            .collect()
                    })
                    .unwrap_or_default();
                for task in orphans {
                    self.checker.mark_known(task, Known::EndLostWithWorker);
                }
                self.lms[l as usize] = None;
                self.lm_life[l as usize] += 1;
                self.gates[l as usize] = Default::default();
                self.held.retain(|_, h| h.lm != l);
            }
            Role::Worker(w) => {
                self.worker_crashed(w);
                // Its task processes run on until their helpers kill them.
                let until = self.now + self.config.orphan_linger;
                if let Some(worker) = &self.workers[w as usize] {
                    let runs: Vec<_> = worker
                        .running()
                        .iter()
                        .map(|r| (w, r.task, r.attempt, until))
                        .collect();
                    self.orphans.extend(runs);
                }
                self.workers[w as usize] = None;
                self.worker_life[w as usize] += 1;
                self.wake_at[w as usize] = None;
                // Its ended runs survive (the worker's `ended-runs` file).
            }
        }
    }

    /// Whether an LM or a worker holds the task (the reconciliation a journalled GM
    /// does from the LMs' authoritative state).
    pub(super) fn held_anywhere(&self, task: &TaskId) -> bool {
        self.lms
            .iter()
            .flatten()
            .any(|lm| lm.running().contains_key(task))
            || self
                .workers
                .iter()
                .flatten()
                .any(|w| w.running().iter().any(|r| r.task == *task))
    }

    pub(super) fn restart(&mut self, role: Role) {
        if !self.exists(role) || self.up(role) {
            return;
        }
        if let Some(ms) = self.pending_skew.remove(&role) {
            self.skew.insert(role, ms);
        }
        match role {
            Role::Gm(g) => {
                self.start_gm(g);
                if self.config.journal {
                    self.resume_from_journal(g);
                }
            }
            Role::Lm(l) => self.start_lm(l, true),
            Role::Worker(w) => {
                self.start_worker(w);
                let l = self.placement[w as usize].0;
                self.send(
                    Role::Worker(w),
                    Role::Lm(l),
                    Item::Register {
                        holding: Vec::new(),
                        ended: self.ended[w as usize].clone(),
                        life: self.worker_life[w as usize],
                    },
                    true,
                );
            }
        }
    }

    pub(super) fn start_gm(&mut self, g: u16) {
        let start = self.clock(Role::Gm(g));
        // As the service: a GM with a journal starts its life above the journal's
        // last one whatever its clock says, numbers its batches from it, and the
        // LMs fence its older lives; without one its start time numbers the
        // batches (and may repeat an earlier life's when the clock is behind).
        let (first_batch_seq, life) = if self.config.batch_seq_from_zero {
            (0, 0)
        } else if self.config.journal {
            let life = start.0.max(self.gm_journal_life[g as usize] + 1);
            self.gm_journal_life[g as usize] = life;
            (life, life)
        } else {
            if start < self.gm_started[g as usize] {
                self.gm_clock_behind[g as usize] = true;
            }
            (start.0, 0)
        };
        self.gm_started[g as usize] = self.gm_started[g as usize].max(start);
        let config = GmConfig {
            first_batch_seq,
            life,
            ..GmConfig::new(GmId(g), self.config.gms, self.config.lms)
        };
        self.gms[g as usize] = Some(GlobalMaster::new(config));
    }

    pub(super) fn start_lm(&mut self, l: u16, restarted: bool) {
        let config = LmConfig {
            heartbeat_period: self.config.heartbeat,
        };
        let start = self.clock(Role::Lm(l));
        let spec = &self.cluster.lms[l as usize];
        self.lms[l as usize] = Some(LocalMaster::new(spec, self.config.gms, config, start));
        let life = self.lm_life[l as usize];
        self.queue.push(self.now, Ev::Tick(l, life));
        self.lm_started(l, restarted);
        if !restarted {
            return;
        }
        // Every worker registers again, with what it holds and what it ended.
        let mine: Vec<u32> = self.workers_of(l).collect();
        for w in mine {
            self.register_again(w);
        }
    }
}
