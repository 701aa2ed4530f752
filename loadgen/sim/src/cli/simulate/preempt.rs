//! The simulator's flags for the rules that bound preemption
//! ([`common::preemption::PreemptionRules`]), named as the GM and LM services name
//! them; the defaults are the rules' defaults.

use anyhow::{bail, Result};
use clap::Args;
use common::preemption::PreemptionRules;
use common::Micros;

#[derive(Args, Debug, Clone)]
pub struct PreemptArgs {
    /// Fraction of each queue's share never preempted, in [0, 1] (1: only what a
    /// queue holds beyond its share is preempted).
    #[arg(long, default_value_t = PreemptionRules::default().protected_fraction, value_name = "F")]
    pub preempt_protected_fraction: f64,
    /// A preempted task is not preempted again until it has run this long since it
    /// restarted, seconds (0: no cool-down).
    #[arg(long, default_value_t = PreemptionRules::default().cooldown.as_secs_f64(), value_name = "SECS")]
    pub preempt_cooldown_s: f64,
    /// A task preempted this many times is never preempted again (0: no cap).
    #[arg(long, default_value_t = PreemptionRules::default().max_per_task, value_name = "N")]
    pub preempt_max_per_task: u32,
    /// Tasks of one queue an LM may preempt per --preempt-rate-window-s (0: no limit).
    #[arg(long, default_value_t = PreemptionRules::default().rate_limit, value_name = "N")]
    pub preempt_rate_limit: u32,
    /// The window of --preempt-rate-limit, seconds.
    #[arg(long, default_value_t = PreemptionRules::default().rate_window.as_secs_f64(), value_name = "SECS")]
    pub preempt_rate_window_s: f64,
    /// A GM preempts only for a task whose queue stays within its share once it runs.
    #[arg(long, default_value_t = PreemptionRules::default().within_share_after, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub preempt_within_share_after: bool,
    /// A task that could preempt first waits this long for room to free by itself,
    /// seconds (0: preempt at once, as Megha's Algorithm 2).
    #[arg(long, default_value_t = PreemptionRules::default().grace.as_secs_f64(), value_name = "SECS")]
    pub preempt_grace_s: f64,
    /// An LM holds a fairness preemption this long for room that frees by itself
    /// before it kills, seconds (0: kill at once).
    #[arg(long, default_value_t = PreemptionRules::default().hold.as_secs_f64(), value_name = "SECS")]
    pub preempt_hold_s: f64,
    /// The unused part of each queue's share is lent to the other queues, in
    /// proportion to their shares, for preemption.
    #[arg(long, default_value_t = PreemptionRules::default().lend_idle_shares, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub preempt_lend_idle_shares: bool,
    /// Tasks of one queue an LM may preempt per --preempt-rate-window-s for a
    /// higher priority class of the same queue (0: no limit).
    #[arg(long, default_value_t = PreemptionRules::default().priority_rate_limit, value_name = "N")]
    pub preempt_priority_rate_limit: u32,
    /// A task preempted this many times is never preempted again for a higher
    /// class of its queue (0: no cap).
    #[arg(long, default_value_t = PreemptionRules::default().priority_max_per_task, value_name = "N")]
    pub preempt_priority_max_per_task: u32,
}

impl PreemptArgs {
    pub fn rules(&self) -> Result<PreemptionRules> {
        let secs = |name: &str, s: f64| {
            if !(s.is_finite() && s >= 0.0) {
                bail!("--{name} must be a number of seconds, at least 0; got {s}");
            }
            Ok(Micros::from_secs_f64(s))
        };
        let rules = PreemptionRules {
            protected_fraction: self.preempt_protected_fraction,
            cooldown: secs("preempt-cooldown-s", self.preempt_cooldown_s)?,
            max_per_task: self.preempt_max_per_task,
            rate_limit: self.preempt_rate_limit,
            rate_window: secs("preempt-rate-window-s", self.preempt_rate_window_s)?,
            within_share_after: self.preempt_within_share_after,
            grace: secs("preempt-grace-s", self.preempt_grace_s)?,
            hold: secs("preempt-hold-s", self.preempt_hold_s)?,
            lend_idle_shares: self.preempt_lend_idle_shares,
            priority_rate_limit: self.preempt_priority_rate_limit,
            priority_max_per_task: self.preempt_priority_max_per_task,
        };
        rules.validate().map_err(anyhow::Error::msg)?;
        Ok(rules)
    }
}
