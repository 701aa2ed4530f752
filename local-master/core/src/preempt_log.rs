//! The LM's record of the preemptions it made per victim queue within the rate
//! window ([`common::preemption::PreemptionRules::rate_limit`]). A leaf.

use common::preemption::PreemptionRules;
use common::{Micros, QueueId};
use std::collections::{BTreeMap, VecDeque};

#[derive(Debug, Default)]
pub struct PreemptionLog {
    /// Per victim queue: when each of its tasks was preempted, oldest first, within
    /// the last window.
    recent: BTreeMap<QueueId, VecDeque<Micros>>,
}

impl PreemptionLog {
    /// How many more tasks of `queue` this LM may preempt at `now` (`usize::MAX`:
    /// no limit).
    pub fn room(&self, queue: QueueId, now: Micros, rules: &PreemptionRules) -> usize {
        if rules.rate_limit == 0 {
            return usize::MAX;
        }
        let recent = self.recent.get(&queue).map_or(0, |times| {
            times
                .iter()
                .filter(|t| now.since(**t) < rules.rate_window)
                .count()
        });
        (rules.rate_limit as usize).saturating_sub(recent)
    }

    /// `count` tasks of `queue` were preempted at `now`.
    pub fn record(&mut self, queue: QueueId, now: Micros, count: usize, rules: &PreemptionRules) {
        if rules.rate_limit == 0 || count == 0 {
            return;
        }
        let times = self.recent.entry(queue).or_default();
        while times
            .front()
            .is_some_and(|t| now.since(*t) >= rules.rate_window)
        {
            times.pop_front();
        }
        times.extend(std::iter::repeat_n(now, count));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_holds_within_the_window_and_frees_after_it() {
        let rules = PreemptionRules {
            rate_limit: 3,
            rate_window: Micros::from_secs(60),
            ..PreemptionRules::default()
        };
        let mut log = PreemptionLog::default();
        let q = QueueId(1);
        let s = Micros::from_secs;
        assert_eq!(log.room(q, s(0), &rules), 3);
        log.record(q, s(0), 2, &rules);
        log.record(q, s(30), 1, &rules);
        assert_eq!(log.room(q, s(59), &rules), 0);
        assert_eq!(log.room(QueueId(2), s(59), &rules), 3, "per queue");
        assert_eq!(
            log.room(q, s(60), &rules),
            2,
            "the first two left the window"
        );
        assert_eq!(log.room(q, s(90), &rules), 3);
        let unlimited = PreemptionRules {
            rate_limit: 0,
            ..rules
        };
        assert_eq!(log.room(q, s(90), &unlimited), usize::MAX);
    }
}
