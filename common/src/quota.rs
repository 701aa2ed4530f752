//! Per-application quotas on QUEUEABLE containers (Mercury 4.1).
//!
//! An operator bounds how many QUEUEABLE containers one application (here: one job)
//! may have outstanding at once (queued at a worker or running), either absolutely
//! (`max:N`) or relative to the GUARANTEED containers the job holds (`ratio:R`, at
//! least one so that a job never starves), or both (the smaller wins).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A quota policy applied to every job separately. The default limits nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueableQuota {
    /// At most this many outstanding QUEUEABLE containers per job.
    pub max: Option<u32>,
    /// At most this many per GUARANTEED container the job holds (floor, at least 1).
    pub ratio: Option<f64>,
}

impl QueueableQuota {
    pub const UNLIMITED: QueueableQuota = QueueableQuota {
        max: None,
        ratio: None,
    };

    /// True when the policy limits something.
    pub fn is_limited(&self) -> bool {
        self.max.is_some() || self.ratio.is_some()
    }

    /// The most outstanding QUEUEABLE containers a job holding `guaranteed`
    /// GUARANTEED containers may have; `None` when unlimited.
    pub fn limit(&self, guaranteed: u32) -> Option<u32> {
        let relative = self
            .ratio
            .map(|r| ((r * f64::from(guaranteed)).floor() as u32).max(1));
        match (self.max, relative) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl fmt::Display for QueueableQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.max, self.ratio) {
            (None, None) => write!(f, "none"),
            (Some(n), None) => write!(f, "max:{n}"),
            (None, Some(r)) => write!(f, "ratio:{r}"),
            (Some(n), Some(r)) => write!(f, "max:{n},ratio:{r}"),
        }
    }
}

impl FromStr for QueueableQuota {
    type Err = String;

    /// `none`, `max:N`, `ratio:R` or `max:N,ratio:R`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut quota = QueueableQuota::UNLIMITED;
        if s.trim() == "none" {
            return Ok(quota);
        }
        for part in s.split(',') {
            let (name, value) = part.trim().split_once(':').ok_or_else(|| {
                format!("quota {s:?}: expected none, max:N, ratio:R or max:N,ratio:R")
            })?;
            match name {
                "max" => match value.parse::<u32>() {
                    Ok(n) if n >= 1 => quota.max = Some(n),
                    _ => return Err(format!("quota {s:?}: max must be a whole number >= 1")),
                },
                "ratio" => match value.parse::<f64>() {
                    Ok(r) if r.is_finite() && r > 0.0 => quota.ratio = Some(r),
                    _ => return Err(format!("quota {s:?}: ratio must be a number > 0")),
                },
                other => return Err(format!("quota {s:?}: unknown limit {other:?}")),
            }
        }
        Ok(quota)
    }
}

/// One job's containers on one LM, as the LM reports them in its snapshots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobContainers {
    /// QUEUEABLE containers queued at a worker or running.
    pub queueable: u32,
    /// GUARANTEED containers running (promoted ones included).
    pub guaranteed: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prints_and_limits() {
        for s in ["none", "max:3", "ratio:2", "max:5,ratio:0.5"] {
            let q: QueueableQuota = s.parse().unwrap();
            assert_eq!(q.to_string(), s);
        }
        for bad in ["max:0", "ratio:-1", "max", "cap:3", "ratio:inf"] {
            assert!(bad.parse::<QueueableQuota>().is_err(), "{bad}");
        }
        let q: QueueableQuota = "max:5,ratio:2".parse().unwrap();
        assert_eq!(
            q.limit(0),
            Some(1),
            "a job without GUARANTEED work keeps one"
        );
        assert_eq!(q.limit(2), Some(4));
        assert_eq!(q.limit(10), Some(5));
        assert_eq!(QueueableQuota::UNLIMITED.limit(7), None);
    }
}
