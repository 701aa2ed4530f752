//! The per-user cap on jobs of a preempting priority class (issue 37): a user's
//! `preempting_jobs_per_minute` (tokens file) bounds how many such jobs this GM
//! takes from that user in any 60 s; one more is a 429 naming `priority_class`,
//! with the seconds until one is free. Admins have no cap. Time is an input.

use common::Micros;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The window the cap counts over.
pub const WINDOW: Micros = Micros(60_000_000);

/// The largest `preempting_jobs_per_minute` a tokens file may give (each counted
/// job is remembered for a minute).
pub const MAX_PER_MINUTE: u32 = 100_000;

/// When each user's preempting jobs of the last minute were taken.
#[derive(Debug, Default)]
pub struct PreemptingCap {
    taken: HashMap<Arc<str>, VecDeque<Micros>>,
}

impl PreemptingCap {
    /// Takes one of `user`'s `per_minute` preempting jobs at `now`; `Err(seconds)`
    /// (at least 1) until one is free, nothing taken.
    pub fn take(&mut self, user: &Arc<str>, per_minute: u32, now: Micros) -> Result<(), u64> {
        let times = self.taken.entry(user.clone()).or_default();
        while times
            .front()
            .is_some_and(|t| now.0.saturating_sub(t.0) >= WINDOW.0)
        {
            times.pop_front();
        }
        if times.len() >= per_minute as usize {
            let oldest = times.front().copied().unwrap_or(now);
            let wait = (oldest.0 + WINDOW.0).saturating_sub(now.0);
            return Err(wait.div_ceil(1_000_000).max(1));
        }
        times.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::admission::users::Users;
    use common::priority::PriorityClasses;

    #[test]
    fn a_user_takes_at_most_n_preempting_jobs_in_any_minute() {
        let (mut cap, bob, carol): (PreemptingCap, Arc<str>, Arc<str>) =
            (PreemptingCap::default(), "bob".into(), "carol".into());
        let s = |secs: u64| Micros(secs * 1_000_000);
        assert_eq!(cap.take(&bob, 2, s(0)), Ok(()));
        assert_eq!(cap.take(&bob, 2, s(10)), Ok(()));
        // The third within the minute waits for the first to leave it.
        assert_eq!(cap.take(&bob, 2, s(20)), Err(40));
        assert_eq!(cap.take(&bob, 2, Micros(59_999_999)), Err(1));
        // Another user's count is their own.
        assert_eq!(cap.take(&carol, 2, s(20)), Ok(()));
        // A refusal took nothing: at 60 s the first left the window.
        assert_eq!(cap.take(&bob, 2, s(60)), Ok(()));
        assert_eq!(cap.take(&bob, 2, s(61)), Err(9));
        assert_eq!(cap.take(&bob, 2, s(70)), Ok(()));
    }

    #[test]
    fn the_tokens_file_gives_the_cap_per_user() {
        let classes = PriorityClasses::parse(&["batch:0,urgent:9:preempting".into()], None, 1000)
            .expect("classes");
        let file = |cap: &str| {
            format!("[[users]]\nname = \"bob\"\ntoken = \"bob-token-0123456789\"\nqueues = [\"*\"]\npriority_classes = [\"urgent\"]\n{cap}")
        };
        let bob = |cap: &str| {
            let users = Users::parse(&file(cap), false, &classes).expect(cap);
            let bob = users.find(b"bob-token-0123456789").expect("bob");
            bob.preempting_per_minute()
        };
        assert_eq!(bob(""), None);
        assert_eq!(bob("preempting_jobs_per_minute = 3\n"), Some(3));
        for bad in ["0", "100001", "-1"] {
            let text = file(&format!("preempting_jobs_per_minute = {bad}\n"));
            let err = format!("{:#}", Users::parse(&text, false, &classes).expect_err(bad));
            assert!(err.contains("preempting_jobs_per_minute"), "{bad}: {err}");
        }
    }
}
