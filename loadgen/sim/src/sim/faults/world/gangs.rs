//! The fault run's gang invariant (issue 37): after a gang commit launched members,
//! every member is launched or held somewhere, and the known gaps it excuses.

use super::World;
use crate::sim::faults::check::{self, Known};
use common::{GmId, TaskId};

impl World<'_> {
    /// After a gang commit launched members of `job`: every member is launched (now
    /// or before) or held at some LM, so none can be left out of the gang.
    pub(super) fn gang_whole(
        &self,
        gm: GmId,
        job: common::JobId,
        launched_now: bool,
        lost: &[TaskId],
    ) -> Result<(), check::Broken> {
        if !launched_now {
            return Ok(());
        }
        let Some((_, tasks)) = self
            .jobs
            .iter()
            .find(|(_, t)| t.first().is_some_and(|t| t.id.job == job))
        else {
            return Ok(());
        };
        let held: Vec<TaskId> = (self.lms.iter().flatten())
            .filter_map(|lm| lm.gang_hold(gm, job))
            .flat_map(|(_, tasks)| tasks)
            .collect();
        match tasks.iter().find(|t| !self.checker.launched(&t.id) && !held.contains(&t.id)) {
            None => Ok(()),
            Some(t) if lost.contains(&t.id) => Err((
                check::Invariant::PartialGang,
                format!("lost: a commit of {job}'s gang launched members while {} was reported lost (its node went down while held)", t.id),
            )),
            Some(t) => Err((
                check::Invariant::PartialGang,
                format!("a commit of {job}'s gang launched members while {} was neither held nor launched", t.id),
            )),
        }
    }

    /// [`World::gang_whole`], excusing (as known gaps) a part that died with its
    /// LM (an LM is down, or restarted since the gang arrived) and a member whose
    /// node went down while held (reported lost by the commit).
    pub(super) fn gang_checked(
        &mut self,
        gm: GmId,
        job: common::JobId,
        launched_now: bool,
        lost: &[TaskId],
    ) -> Result<(), check::Broken> {
        let result = self.gang_whole(gm, job, launched_now, lost);
        let lm_died = self.lms.iter().any(Option::is_none)
            || self.gang_lm_lives.get(&job) != Some(&self.lm_life);
        match result {
            Err(broken) if broken.1.starts_with("lost:") => {
                self.checker.excuse(Known::GangMemberLostWithWorker, broken)
            }
            Err(broken) if lm_died => self.checker.excuse(Known::GangPartDiedWithLm, broken),
            other => other,
        }
    }
}
