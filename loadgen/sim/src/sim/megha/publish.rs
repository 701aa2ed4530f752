//! Change-triggered state publication by the simulated LMs ([`LmPublish::Changes`]),
//! the rule of the services' LM actor (`local-master/src/service/actor.rs`,
//! `state_changed`): after a change (an answer to a GM's request, a worker's report
//! of a finished or failed task) the LM publishes its state to every GM at once if
//! its last publication (heartbeats included) is at least the minimum interval old,
//! else once at the end of the interval, whatever changes in between. A publication
//! costs the LM a snapshot (per node) and reaches the GMs after the network delay.
//!
//! With [`LmPublish::Heartbeat`] (the default) nothing here runs, so the schedules
//! are those of the reference-compatible simulator.

use super::{Ev, Sim};
use crate::sim::{CostModel, LmPublish};
use common::protocol::LmToGm;
use common::Micros;
use gm_core::GmInput;

impl Sim<'_> {
    /// The state of LM `l` changed at `at` (when its step was done).
    pub(super) fn lm_state_changed(&mut self, l: usize, at: Micros) {
        let LmPublish::Changes { min_interval } = self.config.lm_publish else {
            return;
        };
        if self.publish_scheduled[l] {
            return;
        }
        let next = self.last_publish[l] + min_interval;
        if at >= next {
            self.lm_publish(l, at);
        } else {
            self.publish_scheduled[l] = true;
            self.push(next, Ev::LmPublish(l));
        }
    }

    /// The scheduled publication of LM `l` is due.
    pub(super) fn lm_publish_due(&mut self, now: Micros, l: usize) {
        self.publish_scheduled[l] = false;
        self.lm_publish(l, now);
    }

    /// LM `l` sends its state to every GM as soon as it is free from `at`.
    fn lm_publish(&mut self, l: usize, at: Micros) {
        let start = at.max(self.lm_busy[l]);
        let snapshot = self.lms[l].snapshot(start);
        let cost = CostModel::per_unit(snapshot.free.len() as u64, self.costs.lm_snapshot_node_ns);
        let done = start + cost;
        self.lm_busy[l] = done;
        self.last_publish[l] = start;
        self.counters.state_publications += 1;
        let arrive = done + self.delay();
        let gms = self.gms.len();
        for g in 0..gms {
            let message = LmToGm::State(snapshot.clone());
            self.push_gm(arrive + self.costs.fanout(g), g, GmInput::Lm(message));
        }
    }
}

#[cfg(test)]
mod tests;
