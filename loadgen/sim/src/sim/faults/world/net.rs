//! The modelled transport: ordered streams retried until delivered (LM -> worker,
//! worker -> LM, LM -> GM ends and requeues) and GM -> LM calls settled as the GM
//! service's `call_until_settled` does (see [`super::super`]).

use super::{
    describe_item, Call, Ev, Item, World, BUSY_RETRY_AFTER, STREAM_RETRY, UNREACHABLE_AFTER,
};
use crate::sim::faults::check::Known;
use crate::sim::faults::plan::{Link, Role};
use common::protocol::facts::{Asked, TaskFact};
use common::protocol::{GmToLm, LmToGm};
use common::{Micros, TaskId};
use gm_core::{GmInput, Undelivered};
use lm_core::gate::Refusal;
use lm_core::LmInput;

impl World<'_> {
    // ----- ordered streams -----

    pub(super) fn send(&mut self, from: Role, to: Role, item: Item, front: bool) {
        let stream = self.streams.entry((from, to)).or_default();
        if front {
            stream.items.push_front(item);
        } else {
            stream.items.push_back(item);
        }
        if !stream.pumping {
            stream.pumping = true;
            let at = self.now + self.transit(link_of(from, to), true);
            self.queue.push(at, Ev::Pump(from, to));
        }
    }

    pub(super) fn pump(&mut self, from: Role, to: Role) {
        let Some(stream) = self.streams.get(&(from, to)) else {
            return;
        };
        if stream.items.is_empty() {
            if let Some(s) = self.streams.get_mut(&(from, to)) {
                s.pumping = false;
            }
            return;
        }
        let link = link_of(from, to) as usize;
        if !self.up(to) || self.blocked(from, to) || self.chance(self.rates[link].loss) {
            self.queue.push(self.now + STREAM_RETRY, Ev::Pump(from, to));
            return;
        }
        let Some(item) = self
            .streams
            .get_mut(&(from, to))
            .and_then(|s| s.items.pop_front())
        else {
            return;
        };
        let twice = self.chance(self.rates[link].dup);
        if twice {
            self.deliver(from, to, item.clone());
        }
        self.deliver(from, to, item);
        let at = self.now + self.extra_delay(link_of(from, to));
        self.queue.push(at, Ev::Pump(from, to));
    }

    pub(super) fn deliver(&mut self, from: Role, to: Role, item: Item) {
        self.note(|| format!("  deliver {from}->{to} {}", describe_item(&item)));
        match (to, item) {
            (Role::Gm(g), Item::ToGm(message)) => self.gm_step(g, GmInput::Lm(message)),
            (Role::Worker(w), Item::ToWorker(order, call)) => {
                // (The LM modelled without worker liveness predates order keys.)
                let keys = self.config.worker_timeout.is_some();
                if keys && self.keyed[w as usize] != self.worker_life[w as usize] {
                    // Signed with the key of an earlier process of this worker (the
                    // LM has not taken the new one's registration yet): refused, as
                    // the worker service does; the LM drops its stream to the old
                    // process when the registration arrives.
                    self.note(|| {
                        format!(
                            "  w{w} refuses {}: signed for its previous process",
                            order.kind()
                        )
                    });
                    if let Some(call) = call {
                        self.order_delivered(call);
                    }
                    return;
                }
                self.worker_order(w, order);
                if let Some(call) = call {
                    self.order_delivered(call);
                }
            }
            (Role::Lm(l), Item::ToLm(report)) => {
                if let Role::Worker(w) = from {
                    self.last_seen[w as usize] = self.now;
                }
                self.lm_step(l, LmInput::Worker(report), None);
            }
            (
                Role::Lm(l),
                Item::Register {
                    holding,
                    ended,
                    life,
                },
            ) => {
                let Role::Worker(w) = from else { return };
                self.register(l, w, holding, ended, life);
            }
            _ => {}
        }
    }

    // ----- GM -> LM calls -----

    pub(super) fn call(&mut self, g: u16, message: GmToLm) {
        let id = self.next_call;
        self.next_call += 1;
        self.calls.insert(
            id,
            Call {
                gm: g,
                life: self.gm_life[g as usize],
                message,
                started: self.now,
                attempt: 0,
                ambiguous: false,
                backoff: Micros::from_millis(50),
                reached: None,
            },
        );
        self.queue.push(self.now, Ev::Attempt(id));
    }

    pub(super) fn attempt(&mut self, id: u64) {
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        c.attempt += 1;
        if c.attempt > 1 && !self.refresh_resend(id) {
            return;
        }
        let Some(c) = self.calls.get(&id) else {
            return;
        };
        let (g, attempt, life, message) = (c.gm, c.attempt, c.life, c.message.clone());
        let l = message.lm().0;
        if !self.up(Role::Lm(l)) || self.blocked(Role::Gm(g), Role::Lm(l)) {
            if self.calls[&id].ambiguous {
                self.retry(id);
            } else {
                self.queue
                    .push(self.now + UNREACHABLE_AFTER, Ev::Settle(id));
            }
            return;
        }
        self.queue.push(
            self.now + self.config.call_timeout,
            Ev::Timeout(id, attempt),
        );
        let rates = self.rates[Link::GmLm as usize];
        if self.chance(rates.loss) {
            return;
        }
        let copies = if self.chance(rates.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let at = self.now + self.transit(Link::GmLm, false);
            self.queue.push(at, Ev::Request(id, life, message.clone()));
        }
    }

    /// Before a launch batch goes out again, the GM keeps only the requests still in
    /// doubt (as the GM service's resend asks its actor): runs whose end it heard
    /// are left out, and a batch with none left is settled without an answer.
    /// False when the call ended here.
    fn refresh_resend(&mut self, id: u64) -> bool {
        let Some(c) = self.calls.get(&id) else {
            return false;
        };
        let GmToLm::Launch(batch) = &c.message else {
            return true;
        };
        let Some(gm) = self.gms[c.gm as usize].as_mut() else {
            return true;
        };
        match gm.still_in_doubt(batch) {
            Some(rest) => {
                if rest.requests.len() < batch.requests.len() {
                    let (seq, kept) = (rest.seq, rest.requests.len());
                    self.note(|| format!("  resend of seq {seq} keeps {kept} in doubt"));
                }
                if let Some(c) = self.calls.get_mut(&id) {
                    c.message = GmToLm::Launch(rest);
                }
                true
            }
            None => {
                let seq = batch.seq;
                self.calls.remove(&id);
                self.note(|| format!("  resend of seq {seq} dropped: every run in it ended"));
                false
            }
        }
    }

    /// The attempt got no answer in time: in doubt, sent again after the backoff
    /// until the doubt timeout.
    pub(super) fn timeout(&mut self, id: u64, attempt: u32) {
        match self.calls.get_mut(&id) {
            Some(c) if c.attempt == attempt => c.ambiguous = true,
            _ => return,
        }
        self.retry(id);
    }

    pub(super) fn retry(&mut self, id: u64) {
        self.retry_after(id, Micros::ZERO);
    }

    /// [`Self::retry`], waiting at least `at_least` (the peer's retry-after).
    fn retry_after(&mut self, id: u64, at_least: Micros) {
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        let delay = c.backoff.max(at_least);
        c.backoff = Micros((c.backoff.0 * 2).min(2_000_000));
        if self.now + delay > c.started + self.config.doubt_timeout {
            self.give_up(id);
        } else {
            self.queue.push(self.now + delay, Ev::Attempt(id));
        }
    }

    /// The transport gives up: the GM takes the request back.
    pub(super) fn give_up(&mut self, id: u64) {
        let Some(c) = self.calls.remove(&id) else {
            return;
        };
        if self.gm_life[c.gm as usize] == c.life && self.gms[c.gm as usize].is_some() {
            if let GmToLm::Reconcile(r) = &c.message {
                if r.forget {
                    self.restarted_lm_unanswered(c.gm, c.life, r.lm.0, c.started);
                }
            }
            self.gm_step(c.gm, GmInput::Undelivered(Undelivered::of(&c.message)));
        }
    }

    /// A request reaches its LM.
    pub(super) fn request(&mut self, id: u64, message: GmToLm) {
        let l = message.lm().0;
        if !self.up(Role::Lm(l)) {
            return; // refused: the call times out and retries
        }
        // Not ready: "busy" (503 with Retry-After), nothing applied. A late first
        // copy of a batch answered so and never applied is answered busy again (its
        // GM took the batch back); a resend (its GM still in doubt) is applied.
        let readiness = self.readiness(l);
        let lm = self.lms[l as usize].as_ref();
        let admitted = self.gates[l as usize].admit(&message, readiness, |gm, seq| {
            lm.is_some_and(|lm| lm.has_batch(gm, seq))
        });
        match admitted {
            Ok(()) => {}
            Err(Refusal::LateCopy { seq, .. }) => {
                self.note(|| format!("  lm{l} answers a late copy of seq {seq} busy again"));
                self.send_busy(l, id);
                return;
            }
            Err(Refusal::NotReady { .. }) => {
                self.send_busy(l, id);
                return;
            }
        }
        // A gang's answer names no task (it answers for the part as a whole).
        let mut asked: Vec<TaskId> = Vec::new();
        message.for_each_task(|task, what| match what {
            Asked::Launch | Asked::Preempt => asked.push(task),
            Asked::GangReserve => {}
        });
        let lm_life = self.lm_life[l as usize];
        let attempt = match self.calls.get_mut(&id) {
            Some(c) => {
                if c.reached.is_some_and(|first| first != lm_life) {
                    for task in &asked {
                        self.checker.resent(*task);
                    }
                }
                c.reached.get_or_insert(lm_life);
                c.attempt
            }
            None => 0,
        };
        self.lm_step(l, LmInput::Gm(message), Some((id, attempt, asked)));
    }

    pub(super) fn answer(&mut self, id: u64, attempt: u32, message: LmToGm) {
        match self.calls.get(&id) {
            Some(c) if c.attempt == attempt => {}
            _ => return, // a late or repeated answer: the call has moved on
        }
        let Some(c) = self.calls.remove(&id) else {
            return;
        };
        if self.gm_life[c.gm as usize] == c.life && self.gms[c.gm as usize].is_some() {
            // "Launched" for a run whose end (lost) the GM heard and retries since the
            // call began: the GM may take it for the retry's launch.
            let checker = &mut self.checker;
            message.for_each_task(|task, fact| match fact {
                TaskFact::Launched { .. } | TaskFact::Rejected(_) => {
                    if checker.retried_since(&task, c.started) {
                        checker.mark_known(task, Known::StaleAnswerTakenForRetry);
                    }
                }
                TaskFact::PreemptedToLaunch { .. }
                | TaskFact::PreemptRefused(_)
                | TaskFact::PreemptHeld { .. }
                | TaskFact::Requeued { .. }
                | TaskFact::Cancelled
                | TaskFact::NotYours
                | TaskFact::Ended(_)
                | TaskFact::Started => {}
            });
            self.gm_step(c.gm, GmInput::Lm(message));
        }
    }

    pub(super) fn order_delivered(&mut self, call: u64) {
        let Some(h) = self.held.get_mut(&call) else {
            return;
        };
        h.remaining = h.remaining.saturating_sub(1);
        if h.remaining == 0 {
            if let Some(h) = self.held.remove(&call) {
                if let Some(answer) = h.answer {
                    self.send_answer(h.lm, call, answer);
                }
            }
        }
    }

    /// The LM answers "busy" (see [`Self::busy`]), over the lossy link.
    fn send_busy(&mut self, l: u16, call: u64) {
        if let Some((at, attempt)) = self.answer_arrives(l, call) {
            self.queue.push(at, Ev::Busy(call, attempt));
        }
    }

    /// When an answer of `l` to the current attempt of `call` reaches its GM, and
    /// that attempt; `None` when it is lost (or the call is over).
    fn answer_arrives(&mut self, l: u16, call: u64) -> Option<(Micros, u32)> {
        let c = self.calls.get(&call)?;
        let (g, attempt) = (c.gm, c.attempt);
        let loss = self.rates[Link::GmLm as usize].loss;
        if self.blocked(Role::Lm(l), Role::Gm(g)) || self.chance(loss) {
            return None;
        }
        Some((self.now + self.transit(Link::GmLm, false), attempt))
    }

    /// The LM answered "busy" (a not-ready LM's 503 with `Retry-After`, nothing
    /// applied), as the service's `call_until_settled` reads it: settled at once
    /// (the GM takes the request back and passes the LM by for the retry-after
    /// time) unless an earlier attempt may have been acted on, then sent again
    /// after the retry-after time.
    pub(super) fn busy(&mut self, id: u64, attempt: u32) {
        match self.calls.get(&id) {
            Some(c) if c.attempt == attempt => {}
            _ => return, // a late or repeated answer: the call has moved on
        }
        if self.calls[&id].ambiguous {
            self.retry_after(id, BUSY_RETRY_AFTER);
            return;
        }
        let Some(c) = self.calls.remove(&id) else {
            return;
        };
        if self.gm_life[c.gm as usize] != c.life || self.gms[c.gm as usize].is_none() {
            return;
        }
        if let GmToLm::Reconcile(r) = &c.message {
            if r.forget {
                self.restarted_lm_unanswered(c.gm, c.life, r.lm.0, c.started);
            }
        }
        let input = GmInput::Busy {
            request: Undelivered::of(&c.message),
            retry_after: BUSY_RETRY_AFTER,
        };
        self.gm_step(c.gm, input);
    }

    pub(super) fn send_answer(&mut self, l: u16, call: u64, answer: LmToGm) {
        if let Some((at, attempt)) = self.answer_arrives(l, call) {
            self.queue.push(at, Ev::Answer(call, attempt, answer));
        }
    }
}

/// The kind of link a stream runs on.
fn link_of(from: Role, to: Role) -> Link {
    match (from, to) {
        (Role::Worker(_), _) | (_, Role::Worker(_)) => Link::LmWorker,
        _ => Link::GmLm,
    }
}
