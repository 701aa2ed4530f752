//! The rules that keep preemption from churning (issue 37 item 3), shared by GMs,
//! LMs and the simulator through [`crate::fairness::FairnessConfig::rules`]. A leaf.
//!
//! Megha's Algorithm 2 alone preempts whenever a queue under its share waits and
//! another is over its own; with eventually consistent views and "least lost work
//! first", the task preempted is often the one that just restarted, and two queues
//! can take the same room from each other again and again. These rules bound that:
//!
//! - a *protected fraction* of each queue's share is never preempted: the LM picks
//!   victims only while the victim queue keeps at least `protected_fraction x share`
//!   of the LM's capacity (1.0: only what a queue holds beyond its share is taken);
//! - a preempted task is not preempted again within a *cool-down* after it restarts,
//!   and never after `max_per_task` preemptions;
//! - a *rate limit* per LM and victim queue: at most `rate_limit` of its tasks
//!   preempted per `rate_window` (the LM refuses `rate_limited` beyond it);
//! - a *grace* period: a task that could preempt waits that long for room to free
//!   by itself first (most room frees within minutes under a short-task workload);
//! - a *hold* at the LM: an LM that would have to kill for a fairness preemption
//!   first holds the request; the first room that frees there (a task ending) and
//!   fits launches the waiting task with no kill, ahead of any launch from a GM
//!   (the LM is the one writer of its nodes, so that room cannot go to a queue over
//!   its share first); only when nothing fitting freed within `hold` does it kill;
//! - *idle shares lent*: the part of its share a queue does not use (all of it
//!   when it uses nothing) is lent to the others, in proportion to their
//!   shares, unless the queue is known to want room (a task of it waits at the
//!   deciding GM), so that a queue with work is not held at its share while
//!   another keeps the room an idle queue left;
//! - *no preemption for a task that would wait anyway*: the LM launches the task in
//!   the room it frees in the same step (or kills nothing), and with
//!   `within_share_after` the GM asks only when the task's queue stays within its
//!   share once the task runs (else the task itself would be the next victim).
//!
//! *Priority* preemption within a queue (a preempting class displacing a lower
//! class of its own queue, [`crate::priority`]) has a budget of its own
//! ([`PreemptionRules::for_priority`]): the cap, the rate limit, the protected
//! share, the hold and the grace exist against flip-flop between queues, which
//! cannot happen there (a victim is always of a lower class of the same queue,
//! so it never takes the room back, and no share moves). By default it has no
//! rate limit and no per-task cap (`priority_rate_limit`,
//! `priority_max_per_task`); the cool-down, "no kill for a task that would wait"
//! and "gangs whole or not at all" hold for it as for fairness.

use crate::Micros;
use serde::{Deserialize, Serialize};

/// The rules. Defaults, measured with `loadgen experiment fairness` (docs/fairness.md): the
/// whole share protected, at most 3 preemptions per task, 20 per queue per LM
/// per minute, no preemption that would put the task's own queue over its
/// share, a 120-second hold at the LM, the unused part of shares lent; no
/// cool-down and no grace (both cost fairness there for few preemptions saved:
/// a cool-down makes older, costlier tasks the victims).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PreemptionRules {
    /// Fraction of each queue's share never preempted, in [0, 1].
    pub protected_fraction: f64,
    /// A preempted task is not preempted again until it has run this long since its
    /// restart.
    pub cooldown: Micros,
    /// A task preempted this many times is never preempted again (0: no cap).
    pub max_per_task: u32,
    /// Tasks of one queue an LM may preempt per `rate_window` (0: no limit).
    pub rate_limit: u32,
    pub rate_window: Micros,
    /// The GM asks only when the task's queue is within its share with the task.
    pub within_share_after: bool,
    /// A task that could preempt first waits this long for room to free by itself
    /// (tasks ending); it preempts only once it has waited so long.
    pub grace: Micros,
    /// An LM holds a fairness preemption request this long for room that frees by
    /// itself before it kills (0: kill at once). Priority preemptions are not held.
    pub hold: Micros,
    /// The unused part of each queue's share is lent to the others in proportion
    /// to their shares ([`crate::fairness::FairnessConfig::entitled`]): a queue
    /// may preempt up to its share plus its part of what is lent, and a queue
    /// over that is a victim.
    pub lend_idle_shares: bool,
    /// Tasks of one queue an LM may preempt per `rate_window` for priority
    /// preemptions within that queue (0: no limit), counted apart from
    /// `rate_limit`.
    pub priority_rate_limit: u32,
    /// A task preempted this many times is never a priority preemption's victim
    /// again (0: no cap).
    pub priority_max_per_task: u32,
}

impl Default for PreemptionRules {
    fn default() -> Self {
        PreemptionRules {
            protected_fraction: 1.0,
            cooldown: Micros::ZERO,
            max_per_task: 3,
            rate_limit: 20,
            rate_window: Micros::from_secs(60),
            within_share_after: true,
            grace: Micros::ZERO,
            // Tuned with `loadgen experiment fairness` (docs/fairness.md): with
            // both, Jain's index >= 0.86 at <= 0.1 preemptions per task at 204,
            // 504 and 1,500 nodes; a 60-second hold killed too often at 204.
            hold: Micros::from_secs(120),
            lend_idle_shares: true,
            // Priority preemption is acyclic (a victim never takes the room
            // back), so its churn is bounded by the higher class's arrivals:
            // no budget beyond that (docs/priorities.md).
            priority_rate_limit: 0,
            priority_max_per_task: 0,
        }
    }
}

impl PreemptionRules {
    /// Megha's Algorithm 2 as the paper has it: none of the rules.
    pub const UNBOUNDED: PreemptionRules = PreemptionRules {
        protected_fraction: 0.0,
        cooldown: Micros::ZERO,
        max_per_task: 0,
        rate_limit: 0,
        rate_window: Micros::ZERO,
        within_share_after: false,
        grace: Micros::ZERO,
        hold: Micros::ZERO,
        lend_idle_shares: false,
        priority_rate_limit: 0,
        priority_max_per_task: 0,
    };

    /// The rules for a priority preemption within one queue: its own rate limit
    /// and per-task cap, the same cool-down; no protected share, hold or grace
    /// (the queue keeps its usage, and the higher class should not wait).
    pub fn for_priority(&self) -> PreemptionRules {
        PreemptionRules {
            protected_fraction: 0.0,
            max_per_task: self.priority_max_per_task,
            rate_limit: self.priority_rate_limit,
            within_share_after: false,
            grace: Micros::ZERO,
            hold: Micros::ZERO,
            lend_idle_shares: false,
            ..*self
        }
    }

    /// Checks the ranges; the message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.protected_fraction) {
            return Err(format!(
                "preempt protected fraction {} must be in [0, 1]",
                self.protected_fraction
            ));
        }
        if (self.rate_limit > 0 || self.priority_rate_limit > 0) && self.rate_window == Micros::ZERO
        {
            return Err("a preempt rate limit needs a positive rate window".into());
        }
        Ok(())
    }

    /// Whether a running task, preempted `preemptions` times before and started at
    /// `started_at` (if it has started), may be preempted at `now`.
    pub fn may_preempt_task(
        &self,
        preemptions: u32,
        started_at: Option<Micros>,
        now: Micros,
    ) -> bool {
        if self.max_per_task > 0 && preemptions >= self.max_per_task {
            return false;
        }
        if preemptions == 0 || self.cooldown == Micros::ZERO {
            return true;
        }
        // Not started yet: it has run nothing since its restart.
        started_at.is_some_and(|s| now.since(s) >= self.cooldown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_in_cool_down_or_at_the_cap_is_not_preempted() {
        let rules = PreemptionRules {
            cooldown: Micros::from_secs(60),
            max_per_task: 3,
            ..PreemptionRules::default()
        };
        let t = |s| Some(Micros::from_secs(s));
        let now = Micros::from_secs(100);
        // (preemptions before, started at, may preempt)
        let cases = [
            (0, t(99), true),
            (0, None, true),
            (1, t(41), false),
            (1, t(40), true),
            (1, None, false),
            (2, t(0), true),
            (3, t(0), false),
        ];
        for (n, started, want) in cases {
            assert_eq!(
                rules.may_preempt_task(n, started, now),
                want,
                "{n} preemptions, started {started:?}"
            );
        }
        assert!(PreemptionRules::UNBOUNDED.may_preempt_task(9, t(99), now));
    }

    #[test]
    fn ranges_are_checked() {
        assert!(PreemptionRules::default().validate().is_ok());
        let bad = PreemptionRules {
            protected_fraction: 1.5,
            ..PreemptionRules::default()
        };
        assert!(bad.validate().unwrap_err().contains("protected fraction"));
        let bad = PreemptionRules {
            rate_window: Micros::ZERO,
            ..PreemptionRules::default()
        };
        assert!(bad.validate().is_err());
    }
}
