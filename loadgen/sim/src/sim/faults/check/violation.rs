//! What the fault search reports when an invariant breaks: which one
//! ([`Invariant`]) and where and when ([`Violation`], with its history and how to
//! replay it).

use common::{Micros, TaskId};
use std::fmt;

/// Which invariant broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    /// The allocations on a node at its LM exceed its capacity.
    OverCommitted,
    /// A task runs on two workers at once, or starts again after it ended.
    RanTwice,
    /// An LM answered a request with the answer it recorded for another one (the
    /// same (GM, sequence) from another life of the GM).
    AnswerFromOtherLife,
    /// The GM, the LM and the event stream disagree about how a task ended.
    TerminalDisagrees,
    /// After the quiet period an accepted task has not ended (or its GM never heard).
    Liveness,
    /// After the quiet period a GM's view of an LM differs from the LM's state.
    ViewDiverged,
    /// A gang commit launched a member while another was neither held nor
    /// launched, and the GM never restarted the gang whole.
    PartialGang,
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Invariant::OverCommitted => "over-committed node",
            Invariant::RanTwice => "task ran twice",
            Invariant::AnswerFromOtherLife => "answer from another incarnation's cache",
            Invariant::TerminalDisagrees => "terminal states disagree",
            Invariant::Liveness => "accepted task never ended",
            Invariant::ViewDiverged => "GM view differs from LM state",
            Invariant::PartialGang => "gang started partially",
        })
    }
}

/// A broken invariant, with where and when.
#[derive(Clone, Debug)]
pub struct Violation {
    pub seed: u64,
    /// Index of the event after which it was found (0-based).
    pub event: u64,
    pub at: Micros,
    pub invariant: Invariant,
    pub detail: String,
    /// The task it is about, if one (the history is then that task's: see
    /// [`crate::sim::faults::run`]).
    pub task: Option<TaskId>,
    /// The events before it, oldest first (see [`crate::sim::faults::FaultConfig::history`]).
    pub history: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "VIOLATION seed {} event {} at {:.3} s: {}: {}",
            self.seed,
            self.event,
            self.at.as_secs_f64(),
            self.invariant,
            self.detail
        )?;
        writeln!(f, "  history (last {} events):", self.history.len())?;
        for line in &self.history {
            writeln!(f, "    {line}")?;
        }
        writeln!(f, "  replay: loadgen faults --replay {}", self.seed)
    }
}
