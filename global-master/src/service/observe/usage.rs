//! Accounting (Slurm's `sacct`/`sreport`): per user and queue, the runs that ended,
//! their wall time, and the CPU and memory they reserved (reserved resources x run
//! time), by the hour, over a time range (`GET /v1/usage`, `megha usage`).
//!
//! - A task is *booked* when its job is accepted (its user, queue and resources);
//!   each of its runs is *charged* when it ends (finished, failed, lost, preempted,
//!   or stopped by a cancel): run time = end - start as its worker reported them
//!   (0 for a run that never started), booked in the hour (GM clock) it ended in.
//! - Resources *used*, as the workers measured each exec run from its cgroup (CPU
//!   time; peak memory where the kernel gives one run's alone): summed over the
//!   runs measured (`runs_measured`; synthetic and burn runs, runs on hosts without
//!   cgroups and runs that never started are not), the peak the highest of them
//!   ([`USED_MEASURED`]).
//! - Bounded: hours older than [`RETENTION`] are dropped, and at most [`MAX_ROWS`]
//!   (hour, user, queue) rows are kept, oldest hours dropped first; the journal
//!   keeps the same rows ([`crate::service::durable::journal`], table `usage`), so
//!   a restarted GM answers as before.

use common::messages::RunUsage;
use common::{Micros, Resources, TaskId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;

/// One hour: the resolution of the accounting.
pub const BUCKET_SECONDS: u64 = 3600;
/// How long usage is kept: 92 days (a quarter).
pub const RETENTION: std::time::Duration = std::time::Duration::from_secs(92 * 24 * 3600);
/// (hour, user, queue) rows kept at most (about 100 bytes each).
pub const MAX_ROWS: usize = 100_000;
/// What the answer says of the resources used.
pub const USED_MEASURED: &str =
    "measured by the workers from each exec run's cgroup: cpu_seconds_used sums the runs_measured runs, memory_peak_mb is the highest peak among them; the reserved figures are what every run held";
/// The user of jobs submitted without one (a GM without a tokens file).
pub const NO_USER: &str = "-";

/// Sums over runs, in integer units (exact, whatever the order of addition).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub runs: u64,
    /// Run time, milliseconds.
    pub wall_ms: u64,
    /// Reserved CPU x run time, thousandths of a core x milliseconds.
    pub cpu_milli_ms: u64,
    /// Reserved memory x run time, MiB x milliseconds.
    pub memory_mb_ms: u64,
    /// Runs whose worker measured what they used.
    pub runs_measured: u64,
    /// CPU time those runs used, microseconds.
    pub cpu_used_us: u64,
    /// The highest peak memory among them, MiB (0: none measured).
    pub memory_peak_mb: u64,
}

impl Totals {
    /// One run of `resources` for `ran`, which used `used` (if measured).
    pub fn of_run(resources: Resources, ran: Micros, used: Option<RunUsage>) -> Totals {
        let ms = ran.0 / 1000;
        Totals {
            runs: 1,
            wall_ms: ms,
            cpu_milli_ms: resources.cpu_millis.saturating_mul(ms),
            memory_mb_ms: resources.memory_mb.saturating_mul(ms),
            runs_measured: u64::from(used.is_some()),
            cpu_used_us: used.map_or(0, |u| u.cpu_us),
            memory_peak_mb: used.and_then(|u| u.memory_peak_mb).unwrap_or(0),
        }
    }

    pub fn add(&mut self, other: &Totals) {
        self.runs = self.runs.saturating_add(other.runs);
        self.wall_ms = self.wall_ms.saturating_add(other.wall_ms);
        self.cpu_milli_ms = self.cpu_milli_ms.saturating_add(other.cpu_milli_ms);
        self.memory_mb_ms = self.memory_mb_ms.saturating_add(other.memory_mb_ms);
        self.runs_measured = self.runs_measured.saturating_add(other.runs_measured);
        self.cpu_used_us = self.cpu_used_us.saturating_add(other.cpu_used_us);
        self.memory_peak_mb = self.memory_peak_mb.max(other.memory_peak_mb);
    }
}

/// A row of the accounting: (hour start in Unix seconds, user, queue).
pub type UsageKey = (u64, String, String);

/// A row and its sums.
pub type UsageRow = (UsageKey, Totals);

/// What a task's runs are charged to.
#[derive(Clone, Debug)]
struct Booking {
    user: Arc<str>,
    queue: Arc<str>,
    resources: Resources,
}

/// The accounting of one GM: see the module documentation.
#[derive(Debug, Default)]
pub struct Ledger {
    bookings: HashMap<TaskId, Booking>,
    /// Bookings kept after the last prune (see [`Ledger::prune`]).
    pruned_at: usize,
    rows: BTreeMap<UsageKey, Totals>,
    /// Per queue, since this process started (the Prometheus counters).
    per_queue: BTreeMap<Arc<str>, Totals>,
    /// Run ends of tasks never booked (not charged): logged and counted.
    pub unbooked: u64,
}

impl Ledger {
    /// Books `task` (of `user`, in `queue`, reserving `resources`).
    pub fn book(&mut self, task: TaskId, user: Option<&str>, queue: &str, resources: Resources) {
        let booking = Booking {
            user: Arc::from(user.unwrap_or(NO_USER)),
            queue: Arc::from(queue),
            resources,
        };
        self.bookings.insert(task, booking);
    }

    /// Charges one run of `task` that ran for `ran`, used `used` (when its worker
    /// measured it) and ended at `now` (GM clock): the row to add to the journal,
    /// or `None` for a task never booked (counted).
    pub fn charge(
        &mut self,
        now: Micros,
        task: TaskId,
        ran: Micros,
        used: Option<RunUsage>,
    ) -> Option<UsageRow> {
        let Some(b) = self.bookings.get(&task) else {
            self.unbooked += 1;
            tracing::warn!(%task, "a run ended of a task this GM did not book: not charged");
            return None;
        };
        let totals = Totals::of_run(b.resources, ran, used);
        let hour = now.0 / 1_000_000 / BUCKET_SECONDS * BUCKET_SECONDS;
        let key = (hour, b.user.to_string(), b.queue.to_string());
        self.per_queue
            .entry(b.queue.clone())
            .or_default()
            .add(&totals);
        self.add(key.clone(), totals);
        Some((key, totals))
    }

    /// The task ended for good: its runs are charged no more.
    pub fn close(&mut self, task: TaskId) {
        self.bookings.remove(&task);
    }

    /// Forgets the bookings of tasks `open` says ended (ended without a run to
    /// charge: unplaceable, cancelled while queued), once the bookings doubled since
    /// the last prune (amortised: a constant cost per booking).
    pub fn prune(&mut self, open: impl Fn(TaskId) -> bool) {
        if self.bookings.len() < 2 * self.pruned_at + 1024 {
            return;
        }
        self.bookings.retain(|t, _| open(*t));
        self.pruned_at = self.bookings.len();
    }

    /// Adds rows (read back from the journal, or charged) and trims.
    pub fn add(&mut self, key: UsageKey, totals: Totals) {
        self.rows.entry(key).or_default().add(&totals);
        while self.rows.len() > MAX_ROWS {
            self.rows.pop_first();
        }
    }

    /// Drops the hours older than [`RETENTION`] before `now`.
    pub fn expire(&mut self, now: Micros) {
        let cutoff = (now.0 / 1_000_000).saturating_sub(RETENTION.as_secs());
        while self
            .rows
            .first_key_value()
            .is_some_and(|(k, _)| k.0 < cutoff)
        {
            self.rows.pop_first();
        }
    }

    /// Per queue, since this process started.
    pub fn per_queue(&self) -> impl Iterator<Item = (&str, &Totals)> {
        self.per_queue.iter().map(|(q, t)| (&**q, t))
    }

    /// Sums per (user, queue) over the hours in `[since, until)` (Unix seconds; an
    /// hour counts when it starts in the range), of `user` and `queue` when given,
    /// and their total.
    pub fn query(&self, q: &UsageQuery) -> (Vec<UsageLine>, UsageLine) {
        let mut sums: BTreeMap<(&str, &str), Totals> = BTreeMap::new();
        let since = q.since / BUCKET_SECONDS * BUCKET_SECONDS;
        for ((hour, user, queue), totals) in
            self.rows.range((since, String::new(), String::new())..)
        {
            if *hour >= q.until {
                break;
            }
            if q.user.as_deref().is_some_and(|u| u != user)
                || q.queue.as_deref().is_some_and(|x| x != queue)
            {
                continue;
            }
            sums.entry((user, queue)).or_default().add(totals);
        }
        let mut total = Totals::default();
        let lines = (sums.into_iter())
            .map(|((user, queue), t)| {
                total.add(&t);
                UsageLine::new(user, queue, &t)
            })
            .collect();
        (lines, UsageLine::new("*", "*", &total))
    }
}

/// What `GET /v1/usage` asks.
#[derive(Clone, Debug, Default)]
pub struct UsageQuery {
    pub user: Option<String>,
    pub queue: Option<String>,
    pub since: u64,
    pub until: u64,
}

/// One (user, queue) of the answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UsageLine {
    pub user: String,
    pub queue: String,
    /// Runs that ended (a retried or preempted task counts each run).
    pub runs: u64,
    /// Their run time (start to end at the worker), seconds.
    pub wall_seconds: f64,
    /// Reserved CPU x run time, core-seconds.
    pub cpu_seconds_reserved: f64,
    /// Reserved memory x run time, MiB-seconds.
    pub memory_mb_seconds_reserved: f64,
    /// Runs whose worker measured what they used (exec runs on a worker with
    /// cgroups).
    pub runs_measured: u64,
    /// CPU time those runs used (every process of each run), seconds.
    pub cpu_seconds_used: f64,
    /// The highest peak memory of one run among them, MiB; `null` when none was
    /// measured.
    pub memory_peak_mb: Option<u64>,
}

impl UsageLine {
    pub fn new(user: &str, queue: &str, t: &Totals) -> UsageLine {
        UsageLine {
            user: user.to_owned(),
            queue: queue.to_owned(),
            runs: t.runs,
            wall_seconds: t.wall_ms as f64 / 1e3,
            cpu_seconds_reserved: t.cpu_milli_ms as f64 / 1e6,
            memory_mb_seconds_reserved: t.memory_mb_ms as f64 / 1e3,
            runs_measured: t.runs_measured,
            cpu_seconds_used: t.cpu_used_us as f64 / 1e6,
            memory_peak_mb: (t.memory_peak_mb > 0).then_some(t.memory_peak_mb),
        }
    }
}

#[cfg(test)]
mod tests;
