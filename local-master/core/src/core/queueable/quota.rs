//! Per-job quotas on QUEUEABLE containers (Mercury 4.1), the LM's half.
//!
//! The LM counts, per job, its outstanding QUEUEABLE containers (queued at a worker
//! or running) and its running GUARANTEED ones, and reports them in every snapshot.
//! A job is placed by one GM, which is authoritative for the job's quota across LMs:
//! it adds up every LM's counts and what it has sent since, and holds tasks back. The
//! LM enforces its share, the absolute limit (`max`) on its own counts, as a guard
//! against a GM that over-sends (a restarted GM, a bug); a relative limit (`ratio`)
//! depends on GUARANTEED containers on other LMs, which only the GM sees.

use crate::core::LocalMaster;
use common::quota::JobContainers;
use common::reasons::RejectReason;
use common::{JobId, TaskKind, TaskSpec};

impl LocalMaster {
    /// One more (or one fewer, `delta` = -1) container of `kind` for `job`.
    pub(crate) fn count_job(&mut self, job: JobId, kind: TaskKind, delta: i32) {
        if !matches!(kind, TaskKind::Queueable | TaskKind::Guaranteed) {
            return;
        }
        let entry = self.jobs.entry(job).or_default();
        let slot = match kind {
            TaskKind::Queueable => &mut entry.queueable,
            _ => &mut entry.guaranteed,
        };
        *slot = slot.saturating_add_signed(delta);
        if *entry == JobContainers::default() {
            self.jobs.remove(&job);
        }
    }

    /// A job's containers on this LM.
    pub fn job_containers(&self, job: JobId) -> JobContainers {
        self.jobs.get(&job).copied().unwrap_or_default()
    }

    /// Every job with containers here, sorted by job (as sent in snapshots).
    pub(crate) fn job_counts(&self) -> Vec<(JobId, JobContainers)> {
        let mut jobs: Vec<_> = self.jobs.iter().map(|(j, c)| (*j, *c)).collect();
        jobs.sort_unstable_by_key(|(j, _)| *j);
        jobs
    }

    /// The LM's share of the quota: one more QUEUEABLE container of the task's job
    /// must stay within the absolute limit on this LM.
    pub(crate) fn check_quota(&self, task: &TaskSpec) -> Result<(), RejectReason> {
        let Some(limit) = self.queueable.as_ref().and_then(|q| q.quota.max) else {
            return Ok(());
        };
        if self.job_containers(task.id.job).queueable >= limit {
            return Err(RejectReason::OverQueueableQuota {
                job: task.id.job,
                limit,
            });
        }
        Ok(())
    }
}
