//! One retry policy for every retry loop of the services: delays doubling from a
//! minimum up to a maximum, each with jitter (backon's exponential backoff: the delay
//! plus a random part of it), so that peers that failed together (every worker of a
//! restarted LM, every subscriber of a restarted broker) do not retry in step.

use backon::{BackoffBuilder as _, ExponentialBackoff, ExponentialBuilder};
use std::time::Duration;

/// The delays of one retry loop; [`Backoff::reset`] after a success. Cheap to make:
/// the delays (and their random source) are drawn up only at the first retry, so a
/// call that succeeds at once costs nothing here.
#[derive(Debug)]
pub struct Backoff {
    builder: ExponentialBuilder,
    delays: Option<ExponentialBackoff>,
    max: Duration,
    failures: u32,
}

impl Backoff {
    /// Delays from `min`, doubling, up to `max` (before jitter: a delay may reach up to
    /// twice its base), for ever.
    pub fn new(min: Duration, max: Duration) -> Self {
        let builder = ExponentialBuilder::default()
            .with_min_delay(min)
            .with_max_delay(max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Backoff {
            delays: None,
            builder,
            max,
            failures: 0,
        }
    }

    /// How long to wait before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let builder = self.builder;
        (self.delays.get_or_insert_with(|| builder.build()).next()).unwrap_or(self.max)
    }

    /// Back to the shortest delay (after a success).
    pub fn reset(&mut self) {
        self.delays = None;
        self.failures = 0;
    }

    /// Delays taken since the last success: 0 when the last attempt succeeded.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_within_their_jitter_stay_bounded_and_reset() {
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(2));
        let mut b = Backoff::new(min, max);
        let first: Vec<Duration> = (0..12).map(|_| b.next_delay()).collect();
        for (i, d) in first.iter().enumerate() {
            let base = (min * 2u32.pow(i as u32)).min(max);
            assert!(
                *d >= base && *d <= base * 2,
                "delay {i}: {d:?} against base {base:?}"
            );
        }
        assert_eq!(b.failures(), 12);
        b.reset();
        assert_eq!(b.failures(), 0);
        let again = b.next_delay();
        assert!(again >= min && again <= min * 2, "{again:?}");
    }

    #[test]
    fn two_loops_that_failed_together_do_not_retry_in_step() {
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(5));
        let mut a = Backoff::new(min, max);
        let mut b = Backoff::new(min, max);
        let same = (0..8).filter(|_| a.next_delay() == b.next_delay()).count();
        assert!(same < 8, "eight identical delays in a row: no jitter");
    }
}
