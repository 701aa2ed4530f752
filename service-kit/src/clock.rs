//! The wall clock. Services feed the cores `now` as microseconds since the Unix epoch,
//! so that timestamps from different processes on one machine compare directly.

use common::Micros;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn now() -> Micros {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Micros(since.as_micros() as u64)
}

/// How long until `at`, as a std duration (zero when `at` has passed).
pub fn until(at: Micros) -> std::time::Duration {
    std::time::Duration::from_micros(at.since(now()).0)
}
