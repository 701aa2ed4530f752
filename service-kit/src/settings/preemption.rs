//! The rules that bound preemption ([`common::preemption::PreemptionRules`]) as
//! flags and config-file settings, flattened into the GM's and the LM's settings
//! (give both the same values). Absent: the rules' defaults.

use anyhow::{bail, Result};
use common::preemption::PreemptionRules;
use common::Micros;
use serde::{Deserialize, Serialize};

#[derive(clap::Args, Clone, Debug, Default, Serialize, Deserialize)]
#[command(next_help_heading = "Preemption rules (with --queue; the same on every GM and LM)")]
#[serde(default)]
pub struct PreemptArgs {
    /// Fraction of each queue's share never preempted, in [0, 1] (1: only what a
    /// queue holds beyond its share is preempted). Default 1.
    #[arg(long, env = "MEGHA_PREEMPT_PROTECTED_FRACTION", value_name = "F")]
    pub preempt_protected_fraction: Option<f64>,
    /// A preempted task is not preempted again until it has run this long since it
    /// restarted, seconds. Default 0 (none).
    #[arg(long, env = "MEGHA_PREEMPT_COOLDOWN_S", value_name = "SECS")]
    pub preempt_cooldown_s: Option<f64>,
    /// A task preempted this many times is never preempted again (0: no cap).
    /// Default 3.
    #[arg(long, env = "MEGHA_PREEMPT_MAX_PER_TASK", value_name = "N")]
    pub preempt_max_per_task: Option<u32>,
    /// Tasks of one queue an LM may preempt per --preempt-rate-window-s (0: no
    /// limit). Default 20.
    #[arg(long, env = "MEGHA_PREEMPT_RATE_LIMIT", value_name = "N")]
    pub preempt_rate_limit: Option<u32>,
    /// The window of --preempt-rate-limit, seconds. Default 60.
    #[arg(long, env = "MEGHA_PREEMPT_RATE_WINDOW_S", value_name = "SECS")]
    pub preempt_rate_window_s: Option<f64>,
    /// A GM preempts only for a task whose queue stays within its share once it
    /// runs. Default true.
    #[arg(long, env = "MEGHA_PREEMPT_WITHIN_SHARE_AFTER", value_name = "BOOL")]
    pub preempt_within_share_after: Option<bool>,
    /// A task that could preempt first waits this long for room to free by itself,
    /// seconds. Default 0.
    #[arg(long, env = "MEGHA_PREEMPT_GRACE_S", value_name = "SECS")]
    pub preempt_grace_s: Option<f64>,
    /// An LM holds a fairness preemption this long for room that frees by itself
    /// before it kills, seconds (0: kill at once). Default 120.
    #[arg(long, env = "MEGHA_PREEMPT_HOLD_S", value_name = "SECS")]
    pub preempt_hold_s: Option<f64>,
    /// The unused part of each queue's share is lent to the other queues, in
    /// proportion to their shares, for preemption. Default true.
    #[arg(long, env = "MEGHA_PREEMPT_LEND_IDLE_SHARES", value_name = "BOOL")]
    pub preempt_lend_idle_shares: Option<bool>,
    /// Tasks of one queue an LM may preempt per --preempt-rate-window-s for a
    /// higher priority class of the same queue (0: no limit). Default 0.
    #[arg(long, env = "MEGHA_PREEMPT_PRIORITY_RATE_LIMIT", value_name = "N")]
    pub preempt_priority_rate_limit: Option<u32>,
    /// A task preempted this many times is never preempted again for a higher
    /// class of its queue (0: no cap). Default 0.
    #[arg(long, env = "MEGHA_PREEMPT_PRIORITY_MAX_PER_TASK", value_name = "N")]
    pub preempt_priority_max_per_task: Option<u32>,
}

impl PreemptArgs {
    /// The rules, defaults filled in and ranges checked.
    pub fn rules(&self) -> Result<PreemptionRules> {
        let d = PreemptionRules::default();
        let secs = |name: &str, s: Option<f64>, default: Micros| match s {
            None => Ok(default),
            Some(s) if s.is_finite() && s >= 0.0 => Ok(Micros::from_secs_f64(s)),
            Some(s) => bail!("--{name} must be a number of seconds, at least 0; got {s}"),
        };
        let rules = PreemptionRules {
            protected_fraction: self
                .preempt_protected_fraction
                .unwrap_or(d.protected_fraction),
            cooldown: secs("preempt-cooldown-s", self.preempt_cooldown_s, d.cooldown)?,
            max_per_task: self.preempt_max_per_task.unwrap_or(d.max_per_task),
            rate_limit: self.preempt_rate_limit.unwrap_or(d.rate_limit),
            rate_window: secs(
                "preempt-rate-window-s",
                self.preempt_rate_window_s,
                d.rate_window,
            )?,
            within_share_after: self
                .preempt_within_share_after
                .unwrap_or(d.within_share_after),
            grace: secs("preempt-grace-s", self.preempt_grace_s, d.grace)?,
            hold: secs("preempt-hold-s", self.preempt_hold_s, d.hold)?,
            lend_idle_shares: self.preempt_lend_idle_shares.unwrap_or(d.lend_idle_shares),
            priority_rate_limit: self
                .preempt_priority_rate_limit
                .unwrap_or(d.priority_rate_limit),
            priority_max_per_task: self
                .preempt_priority_max_per_task
                .unwrap_or(d.priority_max_per_task),
        };
        rules.validate().map_err(anyhow::Error::msg)?;
        Ok(rules)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_settings_are_the_defaults_and_ranges_are_checked() {
        let rules = PreemptArgs::default().rules().unwrap();
        assert_eq!(rules, PreemptionRules::default());
        let set = PreemptArgs {
            preempt_cooldown_s: Some(30.0),
            preempt_rate_limit: Some(0),
            ..PreemptArgs::default()
        };
        let rules = set.rules().unwrap();
        assert_eq!(rules.cooldown, Micros::from_secs(30));
        assert_eq!(rules.rate_limit, 0);
        let bad = PreemptArgs {
            preempt_protected_fraction: Some(2.0),
            ..PreemptArgs::default()
        };
        assert!(bad.rules().unwrap_err().to_string().contains("protected"));
        let bad = PreemptArgs {
            preempt_grace_s: Some(-1.0),
            ..PreemptArgs::default()
        };
        assert!(bad
            .rules()
            .unwrap_err()
            .to_string()
            .contains("preempt-grace-s"));
    }
}
