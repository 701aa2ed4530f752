//! User queues and their shares (Megha section IV-C), shared by GMs, LMs and the
//! simulator.
//!
//! Each queue has a share of the data center's resources and is served by exactly one
//! GM. A queue's *usage share* is its dominant share (DRF, the default: the larger of
//! its CPU and memory fractions) or its CPU fraction (the paper's single-resource
//! share). A queue is *over share* when its usage share exceeds its configured share.

use crate::{GmId, QueueId, Resources};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The one implicit queue of a deployment that configures none (fairness off).
pub const DEFAULT_QUEUE: &str = "default";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SharePolicy {
    /// Dominant-resource share across CPU and memory.
    #[default]
    Drf,
    /// CPU only, as in the Megha paper.
    Cpu,
}

impl std::str::FromStr for SharePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "drf" => Ok(SharePolicy::Drf),
            "cpu" => Ok(SharePolicy::Cpu),
            other => Err(format!("share policy `{other}` is not one of drf, cpu")),
        }
    }
}

impl SharePolicy {
    /// The fraction of `total` that `usage` represents under this policy.
    pub fn share(self, usage: &Resources, total: &Resources) -> f64 {
        match self {
            SharePolicy::Drf => usage.dominant_share(total),
            SharePolicy::Cpu if total.cpu_millis > 0 => {
                usage.cpu_millis as f64 / total.cpu_millis as f64
            }
            SharePolicy::Cpu => 0.0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueSpec {
    pub id: QueueId,
    pub name: String,
    /// Fraction of the data center, in (0, 1].
    pub share: f64,
    /// The GM that serves this queue.
    pub gm: GmId,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FairnessConfig {
    pub policy: SharePolicy,
    pub queues: Vec<QueueSpec>,
    /// What bounds preemption (protected share, cool-down, rate limit).
    #[serde(default)]
    pub rules: crate::preemption::PreemptionRules,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FairnessError {
    #[error("queue `{name}`: share {share} must be in (0, 1]")]
    BadShare { name: String, share: f64 },
    #[error("queues: shares add up to {0:.3}, more than 1")]
    Oversubscribed(f64),
    #[error("queue `{0}` is defined twice")]
    Duplicate(String),
    #[error("queue `{name}`: {gm} does not exist (there are {gms} GMs)")]
    UnknownGm { name: String, gm: GmId, gms: u16 },
    #[error("queue spec `{spec}`: expected NAME:SHARE:GM, e.g. analytics:0.25:1")]
    Syntax { spec: String },
    #[error("{0}")]
    Rules(String),
}

impl FairnessConfig {
    /// Parses `name:share:gm,...` (queue ids are assigned in order from 0).
    pub fn parse(text: &str, policy: SharePolicy, gms: u16) -> Result<Self, FairnessError> {
        let mut queues = Vec::new();
        for (i, spec) in text.split(',').filter(|s| !s.trim().is_empty()).enumerate() {
            let parts: Vec<&str> = spec.trim().split(':').collect();
            let syntax = || FairnessError::Syntax {
                spec: spec.to_owned(),
            };
            let [name, share, gm] = parts.as_slice() else {
                return Err(syntax());
            };
            queues.push(QueueSpec {
                id: QueueId(i as u16),
                name: name.to_string(),
                share: share.parse().map_err(|_| syntax())?,
                gm: GmId(gm.parse().map_err(|_| syntax())?),
            });
        }
        let config = FairnessConfig {
            policy,
            queues,
            rules: Default::default(),
        };
        config.validate(gms)?;
        Ok(config)
    }

    pub fn validate(&self, gms: u16) -> Result<(), FairnessError> {
        self.rules.validate().map_err(FairnessError::Rules)?;
        let mut total = 0.0;
        for (i, q) in self.queues.iter().enumerate() {
            if !(q.share > 0.0 && q.share <= 1.0) {
                return Err(FairnessError::BadShare {
                    name: q.name.clone(),
                    share: q.share,
                });
            }
            if self.queues[..i]
                .iter()
                .any(|o| o.name == q.name || o.id == q.id)
            {
                return Err(FairnessError::Duplicate(q.name.clone()));
            }
            if q.gm.0 >= gms {
                return Err(FairnessError::UnknownGm {
                    name: q.name.clone(),
                    gm: q.gm,
                    gms,
                });
            }
            total += q.share;
        }
        if total > 1.0 + 1e-9 {
            return Err(FairnessError::Oversubscribed(total));
        }
        Ok(())
    }

    /// Parses a list of `NAME:SHARE:GM` items (each may itself hold several, comma
    /// separated), as given by repeated flags or a TOML array.
    pub fn from_specs(
        specs: &[String],
        policy: SharePolicy,
        gms: u16,
    ) -> Result<Self, FairnessError> {
        Self::parse(&specs.join(","), policy, gms)
    }

    /// The same queues under other preemption rules.
    pub fn with_rules(mut self, rules: crate::preemption::PreemptionRules) -> Self {
        self.rules = rules;
        self
    }

    /// The queue with this name.
    pub fn by_name(&self, name: &str) -> Option<&QueueSpec> {
        self.queues.iter().find(|q| q.name == name)
    }

    pub fn queue(&self, id: QueueId) -> Option<&QueueSpec> {
        self.queues.iter().find(|q| q.id == id)
    }

    /// The configured share of a queue (0 for an unknown queue).
    pub fn share_of(&self, id: QueueId) -> f64 {
        self.queue(id).map_or(0.0, |q| q.share)
    }

    /// How far a queue's usage exceeds its share (negative when under).
    pub fn violation(&self, id: QueueId, usage: &Resources, total: &Resources) -> f64 {
        self.policy.share(usage, total) - self.share_of(id)
    }

    /// The share `id` is entitled to now, given every queue's `usage` of `total`
    /// and the queues known to `want` room (the one a task waits in, and the
    /// deciding GM's queues with tasks waiting): its share; under the rule
    /// `lend_idle_shares`, plus its part of what the other queues leave unused.
    /// A queue under its share (other than `id` and those that want room) lends
    /// the part it does not use (all of it when it uses nothing); the others
    /// borrow it in proportion to their shares
    /// (weighted max-min, one round: a queue alone with work may grow into the
    /// room the others leave, and one with more work than its share takes from
    /// it). With every queue at or over its share, its share.
    pub fn entitled(
        &self,
        id: QueueId,
        usage: &BTreeMap<QueueId, Resources>,
        total: &Resources,
        want: &dyn Fn(QueueId) -> bool,
    ) -> f64 {
        let share = self.share_of(id);
        if !self.rules.lend_idle_shares {
            return share;
        }
        let mut lent = 0.0;
        let mut borrowers = 0.0;
        for q in &self.queues {
            let used = usage
                .get(&q.id)
                .map_or(0.0, |u| self.policy.share(u, total));
            if q.id != id && !want(q.id) && used < q.share {
                lent += q.share - used;
            } else {
                borrowers += q.share;
            }
        }
        if borrowers > 0.0 {
            share + lent * share / borrowers
        } else {
            share
        }
    }

    /// How far a queue's usage exceeds the share it is entitled to now, with the
    /// queues that `want` room ([`FairnessConfig::entitled`]; negative when
    /// under).
    pub fn entitled_violation(
        &self,
        id: QueueId,
        usage: &BTreeMap<QueueId, Resources>,
        total: &Resources,
        want: &dyn Fn(QueueId) -> bool,
    ) -> f64 {
        let used = usage.get(&id).copied().unwrap_or_default();
        self.policy.share(&used, total) - self.entitled(id, usage, total, want)
    }
}

/// Jain's fairness index of `xs`: 1 when all equal, 1/n when one takes everything.
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || squares == 0.0 {
        return 1.0;
    }
    sum * sum / (xs.len() as f64 * squares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_validates_queue_specs() {
        let c = FairnessConfig::parse("a:0.1:0,b:0.25:1,c:0.15:1,d:0.5:2", SharePolicy::Drf, 3)
            .unwrap();
        assert_eq!(c.queues.len(), 4);
        assert_eq!(c.queues[2].gm, GmId(1));
        assert_eq!(c.share_of(QueueId(3)), 0.5);
        let err = FairnessConfig::parse("a:0.7:0,b:0.7:0", SharePolicy::Drf, 1).unwrap_err();
        assert!(matches!(err, FairnessError::Oversubscribed(_)));
        let err = FairnessConfig::parse("a:0.5:4", SharePolicy::Drf, 3).unwrap_err();
        assert_eq!(
            err.to_string(),
            "queue `a`: gm4 does not exist (there are 3 GMs)"
        );
        assert!(FairnessConfig::parse("a:x:0", SharePolicy::Drf, 1).is_err());
        assert!(FairnessConfig::parse("a:0:0", SharePolicy::Drf, 1).is_err());
    }

    #[test]
    fn drf_uses_the_dominant_dimension() {
        let total = Resources::new(10_000, 1000);
        let c = FairnessConfig::parse("a:0.3:0", SharePolicy::Drf, 1).unwrap();
        let usage = Resources::new(1000, 400);
        assert!((c.violation(QueueId(0), &usage, &total) - 0.1).abs() < 1e-9);
        let cpu = FairnessConfig {
            policy: SharePolicy::Cpu,
            ..c
        };
        assert!((cpu.violation(QueueId(0), &usage, &total) + 0.2).abs() < 1e-9);
    }

    #[test]
    fn the_unused_part_of_shares_is_lent_in_proportion_to_the_borrowers_shares() {
        let rules = crate::preemption::PreemptionRules {
            lend_idle_shares: true,
            ..Default::default()
        };
        let c = FairnessConfig::parse("a:0.1:0,b:0.25:0,c:0.15:0,d:0.5:0", SharePolicy::Cpu, 1)
            .unwrap()
            .with_rules(rules);
        let total = Resources::cores(100, 100);
        let usage: BTreeMap<QueueId, Resources> = [
            (QueueId(0), Resources::cores(40, 1)),
            (QueueId(1), Resources::cores(25, 1)),
            (QueueId(2), Resources::cores(15, 1)),
            (QueueId(3), Resources::cores(20, 1)),
        ]
        .into();
        let (a, b, c_, d) = (QueueId(0), QueueId(1), QueueId(2), QueueId(3));
        // d uses 0.2 of its 0.5: its 0.3 goes to a, b and c (0.5 of shares).
        let entitled = |q, waiting: QueueId| c.entitled(q, &usage, &total, &|w| w == waiting);
        assert!((entitled(b, b) - (0.25 + 0.3 * 0.25 / 0.5)).abs() < 1e-9);
        assert!((entitled(a, b) - (0.1 + 0.3 * 0.1 / 0.5)).abs() < 1e-9);
        // a at 0.4 is over 0.16: b may preempt it.
        assert!(c.entitled_violation(a, &usage, &total, &|w| w == b) > 0.2);
        // With d waiting, nothing is lent: every queue is at its share or in want.
        assert!((entitled(b, d) - 0.25).abs() < 1e-9);
        assert!((entitled(c_, d) - 0.15).abs() < 1e-9);
        // A queue that uses nothing lends all of its share.
        let idle: BTreeMap<QueueId, Resources> =
            [(a, Resources::cores(60, 1)), (b, Resources::cores(25, 1))].into();
        assert!((c.entitled(b, &idle, &total, &|w| w == b) - 0.25 / 0.35).abs() < 1e-9);
        // Off: the static share.
        let off = c.clone().with_rules(crate::preemption::PreemptionRules {
            lend_idle_shares: false,
            ..Default::default()
        });
        assert_eq!(off.entitled(b, &usage, &total, &|w| w == b), 0.25);
        // A queue known to want room (waiting at the deciding GM) lends nothing.
        let both = |w| w == b || w == d;
        assert!((c.entitled(b, &usage, &total, &both) - 0.25).abs() < 1e-9);
    }

    #[test]
    fn jain_index_bounds() {
        assert!((jain_index(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    }
}
