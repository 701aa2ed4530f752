//! Restarting a broken gang whole (docs/gangs.md, "Restart whole"). A gang is
//! broken when, after its commit went out, one part cannot launch while others may
//! have: its LM lost the hold (it died and came back, or the commit reached it past
//! the expiry: `NotHeld`), its LM cannot be reached past the hold, or a member's
//! node went down while held (the LM then launches nothing of that part). No commit
//! protocol can prevent it (holds live in LM memory, and an LM can die between any
//! confirmation and another LM's launch), so the GM repairs it: every LM of the
//! generation gets a `Stop` (its members there are killed, its hold given back), the
//! members' runs of that generation are void (their ends are dropped, whether they
//! finished or not), each member's attempt goes up, and the gang waits for every
//! stop to be answered and for `restart_after` before its next generation, which
//! starts all its members together again.

use super::types::{Gang, GangConfig, GangEffects, Part, Phase};
use common::bounded::Bounded;
use common::gang::ANY_GENERATION;
use common::messages::TaskEnd;
use common::{JobId, LmId, Micros, TaskId};
use std::collections::BTreeSet;

/// Runs of gang members (task, attempt) of generations restarted whole, remembered
/// (the oldest forgotten first) so that their ends are dropped even after the gang
/// started again.
pub(super) const VOID_MEMORY: usize = 100_000;

/// The void runs of one GM's gangs.
#[derive(Debug)]
pub(super) struct VoidRuns(Bounded<(TaskId, u32)>);

impl Default for VoidRuns {
    fn default() -> Self {
        VoidRuns(Bounded::new(VOID_MEMORY))
    }
}

impl VoidRuns {
    pub(super) fn contains(&self, task: TaskId, attempt: u32) -> bool {
        self.0.contains(&(task, attempt))
    }
}

/// Breaks `gang` (of `job`) after its commit: its parts' LMs are to be sent a
/// `Stop` (returned), its members' runs of this generation become void, and it
/// waits in [`Phase::Stopping`].
pub(super) fn stop(
    now: Micros,
    job: JobId,
    gang: &mut Gang,
    config: &GangConfig,
    void: &mut VoidRuns,
    fx: &mut GangEffects,
) -> Vec<LmId> {
    let awaiting: BTreeSet<LmId> = match &gang.phase {
        Phase::Committing { parts, .. } => parts.keys().copied().collect(),
        _ => return Vec::new(),
    };
    let mut next = Vec::with_capacity(gang.tasks.len());
    for task in &mut gang.tasks {
        void.0.insert((task.id, task.attempt));
        task.attempt += 1;
        next.push((task.id, task.attempt));
    }
    gang.ends.clear();
    gang.why = format!(
        "generation {}: broken after its commit (a part could not launch); stopping it on {} LMs to restart it whole",
        gang.generation,
        awaiting.len()
    );
    fx.restarted.push((job, next));
    let lms = awaiting.iter().copied().collect();
    gang.phase = Phase::Stopping {
        awaiting,
        not_before: now + config.restart_after,
    };
    lms
}

/// The phase of a gang a restarted GM found running in part: as if committed on
/// every LM of `lms` (where its members may run), to be stopped there.
pub(super) fn committed_on(lms: impl Iterator<Item = LmId>, now: Micros) -> Phase {
    let part = Part {
        requests: Vec::new(),
        held: true,
        life: 0,
        committed: true,
    };
    Phase::Committing {
        parts: lms.map(|lm| (lm, part.clone())).collect(),
        resend_until: now,
    }
}

/// `lm` answered the stop: once every LM did and `not_before` came, the gang waits
/// for a pass (true when it does now).
pub(super) fn stop_answered(now: Micros, gang: &mut Gang, lm: LmId) -> bool {
    if let Phase::Stopping { awaiting, .. } = &mut gang.phase {
        awaiting.remove(&lm);
    }
    ready(now, gang)
}

/// A stopped gang whose every stop was answered and whose wait is over goes back
/// to waiting for a pass (true when it did).
pub(super) fn ready(now: Micros, gang: &mut Gang) -> bool {
    match &gang.phase {
        Phase::Stopping {
            awaiting,
            not_before,
        } if awaiting.is_empty() && *not_before <= now => {
            gang.phase = Phase::Waiting { not_before: now };
            if gang.generation == ANY_GENERATION {
                // Stopped by a restarted GM: its generations start over (an LM
                // that saw newer ones answers `Stale` with the newest).
                gang.generation = 0;
            }
            gang.retry_pending = true;
            true
        }
        _ => false,
    }
}

/// When a stopped gang's wait ends (if every stop was answered).
pub(super) fn wakeup(gang: &Gang) -> Option<Micros> {
    match &gang.phase {
        Phase::Stopping {
            awaiting,
            not_before,
        } if awaiting.is_empty() => Some(*not_before),
        _ => None,
    }
}

/// Whether a member's end breaks its committing gang: a failure of its current
/// run that cannot be held (the GM publishes it: a run its LM declared lost), so
/// that the gang is restarted whole, the run void (retried alone, the member
/// would share its next run number with the gang's; fault seed 7972).
pub(super) fn breaks(gang: Option<&Gang>, void: &VoidRuns, end: &TaskEnd, hold: bool) -> bool {
    let Some(gang) = gang else {
        return false;
    };
    !hold
        && end.failure.is_some()
        && matches!(gang.phase, Phase::Committing { .. })
        && !void.contains(end.task, end.attempt)
        && (gang.tasks.iter()).any(|t| t.id == end.task && t.attempt == end.attempt)
}

/// What a member's end means while its gang is here: with `hold`, held while the
/// gang commits (`None`: taken); dropped if its run is void or not the current
/// generation's (`None`); else given back (the caller takes it: a gang that
/// started, or an end the caller must take now).
pub(super) fn take_end(
    gang: Option<&mut Gang>,
    void: &VoidRuns,
    end: TaskEnd,
    hold: bool,
    void_ends: &mut u64,
) -> Option<TaskEnd> {
    if void.contains(end.task, end.attempt) {
        *void_ends += 1;
        return None;
    }
    let Some(gang) = gang else {
        return Some(end);
    };
    if !(gang.tasks.iter()).any(|t| t.id == end.task && t.attempt == end.attempt) {
        // Not a run of this gang's current members (a member beyond a started
        // gang's plan is queued as an ordinary task, not here).
        return Some(end);
    }
    match gang.phase {
        Phase::Committing { .. } if hold => gang.ends.push(end),
        Phase::Committing { .. } => return Some(end),
        // The current attempt has not launched: nothing of it can end.
        _ => *void_ends += 1,
    }
    None
}
