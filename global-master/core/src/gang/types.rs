//! The gang coordinator's types (split from `mod.rs`): its settings and counters,
//! a gang's parts and phases, and what a step wants done.

use common::gang::{GangSpec, DEFAULT_HOLD};
use common::messages::LaunchRequest;
use common::protocol::GmToLm;
use common::retry::RetryPolicy;
use common::{JobId, LmId, Micros, TaskId, TaskSpec};
use std::collections::BTreeMap;

/// How a GM runs gang transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GangConfig {
    /// How long an LM holds a part (from the reserve's arrival).
    pub hold_for: Micros,
    /// How long a gang waits after a refused or abandoned attempt before the next.
    pub retry_after: Micros,
    /// A gang restarted whole waits at least this long (and for every stop to be
    /// answered) before its next generation: longer than a worker's fence (3/5 of
    /// the LM's worker timeout, 6 s by default), so that a member whose kill could
    /// not reach its worker has stopped itself before it runs again elsewhere.
    pub restart_after: Micros,
}

impl Default for GangConfig {
    fn default() -> Self {
        GangConfig {
            hold_for: DEFAULT_HOLD,
            retry_after: Micros(100_000),
            restart_after: Micros(15_000_000),
        }
    }
}

/// Counters of the gang transactions of one GM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GangStats {
    pub submitted: u64,
    /// Reserve rounds (generations) sent.
    pub attempts: u64,
    pub parts_held: u64,
    pub parts_refused: u64,
    /// Answers of an abandoned generation (released if held, else ignored).
    pub stale_answers: u64,
    /// Attempts given up (a refusal, an unanswered part past `commit_by`, an
    /// undelivered reserve): every part released.
    pub released_attempts: u64,
    pub started: u64,
    pub timed_out: u64,
    /// Commits sent again (the transport gave up on one before the part's
    /// earliest expiry).
    pub commits_resent: u64,
    /// Gangs broken after their commit (a part could not launch while others
    /// may have: its LM lost the hold, or a member's node went down): each is
    /// restarted whole (docs/gangs.md, "Restart whole").
    pub broken: u64,
    /// Ends of members' runs of a generation restarted whole: dropped (the run's
    /// work does not count; the member runs again with the gang).
    pub void_ends: u64,
}

#[derive(Clone, Debug)]
pub(super) struct Part {
    pub(super) requests: Vec<LaunchRequest>,
    pub(super) held: bool,
    /// The LM life that answered `Held` (its holds die with it).
    pub(super) life: u64,
    pub(super) committed: bool,
}

#[derive(Clone, Debug)]
pub(super) enum Phase {
    Waiting {
        not_before: Micros,
    },
    Reserving {
        parts: BTreeMap<LmId, Part>,
        commit_by: Micros,
    },
    Committing {
        parts: BTreeMap<LmId, Part>,
        /// The earliest an LM's hold of this generation may expire (the reserve's
        /// departure + the hold): an undelivered commit is sent again until then.
        resend_until: Micros,
    },
    /// Broken after its commit: every LM of the generation was sent a `Stop`;
    /// the next generation waits for each to be answered and for `not_before`.
    Stopping {
        awaiting: std::collections::BTreeSet<LmId>,
        not_before: Micros,
    },
}

#[derive(Clone, Debug)]
pub(super) struct Gang {
    pub(super) tasks: Vec<TaskSpec>,
    pub(super) spec: GangSpec,
    pub(super) retry: RetryPolicy,
    pub(super) deadline: Micros,
    pub(super) generation: u32,
    pub(super) phase: Phase,
    /// Why the last attempt did not start (for "why is my job pending").
    pub(super) why: String,
    /// Waiting after an abandoned attempt: a pass is wanted once `not_before` came
    /// (a timer of its own; a gang that did not fit waits for the next pass).
    pub(super) retry_pending: bool,
    /// Ends of members' runs heard while the generation commits: taken when every
    /// part is committed, dropped if the gang is restarted whole.
    pub(super) ends: Vec<common::messages::TaskEnd>,
}

/// What the gangs want done after a step.
#[derive(Debug, Default)]
pub struct GangEffects {
    pub to_lms: Vec<GmToLm>,
    /// Gangs whose every part was committed: the members that launched.
    pub started: Vec<(JobId, Vec<TaskId>)>,
    /// Tasks to queue as ordinary tasks: the members beyond a started gang's plan,
    /// or every member of a gang timed out with `run_partial`.
    pub to_queue: Vec<TaskSpec>,
    /// Gangs timed out with `fail`: their tasks end failed without running.
    pub failed: Vec<(JobId, Vec<TaskId>)>,
    /// Gangs timed out with `run_partial`: their tasks are in `to_queue`.
    pub partial: Vec<JobId>,
    /// Gangs restarted whole: their members' runs of the broken generation are
    /// void; each member runs next as this attempt.
    pub restarted: Vec<(JobId, Vec<(TaskId, u32)>)>,
    /// Ends of members' runs held while their gang committed, now that every part
    /// is committed: the caller takes them as it takes any end.
    pub ended: Vec<common::messages::TaskEnd>,
    /// Room the view gives back: the parts of an abandoned attempt not held (a
    /// reserve refused or that never reached its LM changes nothing there, so no
    /// snapshot would ever undo its deduction; a held part released changes the
    /// LM's state twice, and its next snapshot sets the view right).
    pub credits: Vec<(LmId, common::NodeId, common::Resources)>,
    /// The members the answering LM launched (its `Committed`), as a launch
    /// answer's: the drivers track where tasks run from them.
    pub launched: Vec<TaskId>,
}

impl GangEffects {
    pub fn is_empty(&self) -> bool {
        self.to_lms.is_empty()
            && self.started.is_empty()
            && self.to_queue.is_empty()
            && self.failed.is_empty()
            && self.partial.is_empty()
            && self.restarted.is_empty()
            && self.ended.is_empty()
            && self.credits.is_empty()
            && self.launched.is_empty()
    }
}
