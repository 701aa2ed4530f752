//! A job's retry policy: how many times the GM that owns a job runs a task that
//! ended `failed` (non-zero exit, signal, start failure, refused by its worker) or
//! was `lost` with its worker, and how long it waits between two runs.
//!
//! The default is one attempt (no retry): a command may have side effects, so running
//! it again is the submitter's choice (`max_attempts` in the job spec). The backoff
//! before attempt `n + 1` (after `n` failed runs) is
//! `min(initial * factor^(n - 1), max)`.

use crate::Micros;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Runs of one task at most, the first included (1: never retried).
    pub max_attempts: u32,
    pub backoff: Backoff,
}

/// Exponential backoff between the runs of a failed task.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Backoff {
    /// Wait after the first failure.
    pub initial: Micros,
    /// Each further failure multiplies the wait by this (at least 1).
    pub factor: f64,
    /// The longest wait.
    pub max: Micros,
}

impl Default for Backoff {
    /// 1 s, doubling, at most 60 s.
    fn default() -> Self {
        Backoff {
            initial: Micros::from_secs(1),
            factor: 2.0,
            max: Micros::from_secs(60),
        }
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::NONE
    }
}

impl RetryPolicy {
    /// One attempt: a failed task stays failed.
    pub const NONE: RetryPolicy = RetryPolicy {
        max_attempts: 1,
        backoff: Backoff {
            initial: Micros(1_000_000),
            factor: 2.0,
            max: Micros(60_000_000),
        },
    };

    /// The most attempts a job may ask for.
    pub const MAX_ATTEMPTS: u32 = 100;

    /// True when a task that failed `failed` times may run again.
    pub fn retries_after(&self, failed: u32) -> bool {
        failed < self.max_attempts
    }

    /// True when the policy ever retries.
    pub fn retries(&self) -> bool {
        self.max_attempts > 1
    }

    /// The wait before the next run of a task that failed `failed` (>= 1) times.
    pub fn delay(&self, failed: u32) -> Micros {
        let b = &self.backoff;
        let exponent = failed.saturating_sub(1).min(64) as i32;
        let wait = b.initial.0 as f64 * b.factor.max(1.0).powi(exponent);
        if !wait.is_finite() || wait >= b.max.0 as f64 {
            b.max
        } else {
            Micros(wait.round() as u64).min(b.max)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_grows_by_its_factor_up_to_its_max() {
        let policy = RetryPolicy {
            max_attempts: 5,
            backoff: Backoff {
                initial: Micros::from_millis(100),
                factor: 3.0,
                max: Micros::from_secs(1),
            },
        };
        let waits: Vec<u64> = (1..=4).map(|n| policy.delay(n).0 / 1000).collect();
        assert_eq!(waits, vec![100, 300, 900, 1000]);
        assert!(policy.retries_after(4));
        assert!(!policy.retries_after(5));
        assert_eq!(policy.delay(10_000), Micros::from_secs(1));
        assert!(!RetryPolicy::default().retries());
        assert!(!RetryPolicy::default().retries_after(1));
    }
}
