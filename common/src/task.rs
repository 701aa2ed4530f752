//! Tasks and their kinds.

use crate::{ConstraintSet, Micros, QueueId, Resources, TaskId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How a task is scheduled.
///
/// - `Short`: the Megha path. Placed only where the GM's view shows free resources,
///   validated by the LM, never queued at a worker. The default.
/// - `Guaranteed` / `Queueable`: Mercury's container types (GUARANTEED goes through the
///   designated GM; QUEUEABLE may wait in worker queues and be killed for GUARANTEED work).
/// - `LongRunning`: an LRA container with tags, placed by the designated GM's ILP placer.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    #[default]
    Short,
    Guaranteed,
    Queueable,
    LongRunning,
}

impl TaskKind {
    /// Work that must be handled by the designated GM.
    pub fn needs_designated_gm(self) -> bool {
        matches!(self, TaskKind::Guaranteed | TaskKind::LongRunning)
    }
}

/// Everything a scheduler needs to know about one task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    pub id: TaskId,
    /// The user queue the task was submitted to.
    pub queue: QueueId,
    /// A submission that names no type is Short.
    #[serde(default)]
    pub kind: TaskKind,
    pub resources: Resources,
    pub constraints: ConstraintSet,
    /// How long the task runs once started (synthetic tasks replayed from traces).
    pub duration: Micros,
    /// Tags for LRA placement constraints (MEDEA); empty for most tasks.
    #[serde(default)]
    pub tags: Vec<Arc<str>>,
    /// How the worker runs the task; `None`: the worker's default executor
    /// (synthetic unless the worker is configured otherwise). Always `None` in the
    /// simulator and in trace replay.
    #[serde(default)]
    pub executor: Option<Executor>,
    /// Which run of the task this is: 1 for the first, `n + 1` after `n` failed or
    /// lost runs (its job's retry policy). Every report of a run carries it, so a
    /// late report of a lost run is never taken for its retry's.
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// How many times the task was preempted so far (the LM's cool-down and
    /// per-task cap, see [`crate::preemption::PreemptionRules`]).
    #[serde(default)]
    pub preemptions: u32,
    /// Its job's priority class value ([`crate::priority`]); 0 without classes.
    #[serde(default)]
    pub priority: u16,
}

fn first_attempt() -> u32 {
    1
}

/// How a worker runs a task. Externally tagged (bincode has no self-describing
/// formats); the public JSON API has its own `{"type": ...}` shape and converts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Executor {
    /// Holds the task's resources for its duration and runs nothing.
    Synthetic,
    /// Busy-loops one thread per requested core (rounded up) until the task's
    /// CPU-seconds (cores x duration) are consumed.
    Burn,
    /// Runs a command under the task's CPU and memory limits; ends when it exits.
    Exec(Arc<ExecCommand>),
    /// A `burn` whose run time depends on its placement (soft constraints,
    /// docs/alsched.md): the task's `duration` when the GM placed it on a branch of
    /// its job's utility tree, `slow_duration` elsewhere. Last, so that the wire
    /// codes of the others are unchanged.
    BurnByPlacement(BurnByPlacement),
}

/// What a [`Executor::BurnByPlacement`] task runs for, besides its `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BurnByPlacement {
    /// How long it runs off its preferred placement.
    pub slow_duration: Micros,
    /// Set by the GM at each placement: true when the placement took a branch of
    /// the job's utility tree. False until then (a task placed otherwise runs slow).
    pub preferred: bool,
}

impl Executor {
    /// A short lowercase name (metrics label, logs).
    pub fn label(&self) -> &'static str {
        match self {
            Executor::Synthetic => "synthetic",
            Executor::Burn | Executor::BurnByPlacement(_) => "burn",
            Executor::Exec(_) => "exec",
        }
    }

    /// How long a burn task with this executor and the spec's `duration` burns;
    /// `None` for the others.
    pub fn burn_duration(&self, duration: Micros) -> Option<Micros> {
        match self {
            Executor::Burn => Some(duration),
            Executor::BurnByPlacement(b) if b.preferred => Some(duration),
            Executor::BurnByPlacement(b) => Some(b.slow_duration),
            Executor::Synthetic | Executor::Exec(_) => None,
        }
    }
}

/// A command a worker runs for a task (the `exec` executor).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecCommand {
    /// The program: a path, or a name looked up in the worker's `PATH`.
    pub program: String,
    pub args: Vec<String>,
    /// Added to the worker's environment.
    pub env: BTreeMap<String, String>,
    /// Working directory; `None`: the task's directory under the worker's data dir.
    pub cwd: Option<String>,
}

impl TaskSpec {
    /// A short task with no constraints, for tests and examples.
    pub fn short(id: TaskId, resources: Resources, duration: Micros) -> Self {
        TaskSpec {
            id,
            queue: QueueId(0),
            kind: TaskKind::Short,
            resources,
            constraints: ConstraintSet::EMPTY,
            duration,
            tags: Vec::new(),
            executor: None,
            attempt: 1,
            preemptions: 0,
            priority: 0,
        }
    }

    pub fn with_executor(mut self, executor: Executor) -> Self {
        self.executor = Some(executor);
        self
    }

    pub fn with_constraints(mut self, constraints: ConstraintSet) -> Self {
        self.constraints = constraints;
        self
    }

    pub fn with_queue(mut self, queue: QueueId) -> Self {
        self.queue = queue;
        self
    }

    pub fn with_kind(mut self, kind: TaskKind) -> Self {
        self.kind = kind;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Micros, TaskId};

    #[test]
    fn a_submission_without_a_kind_is_short() {
        let task = TaskSpec::short(TaskId::new(1, 0), Resources::cores(1, 1), Micros(1))
            .with_kind(TaskKind::Queueable);
        let mut json = serde_json::to_value(&task).unwrap();
        assert_eq!(json["kind"], "queueable");
        json.as_object_mut().unwrap().remove("kind");
        let back: TaskSpec = serde_json::from_value(json).unwrap();
        assert_eq!(back.kind, TaskKind::Short);
    }

    #[test]
    fn a_burn_by_placement_runs_slow_off_its_preferred_placement() {
        let mut b = BurnByPlacement {
            slow_duration: Micros(30),
            preferred: false,
        };
        let fast = Micros(10);
        assert_eq!(
            Executor::BurnByPlacement(b).burn_duration(fast),
            Some(Micros(30))
        );
        b.preferred = true;
        assert_eq!(Executor::BurnByPlacement(b).burn_duration(fast), Some(fast));
        assert_eq!(Executor::Burn.burn_duration(fast), Some(fast));
        assert_eq!(Executor::Synthetic.burn_duration(fast), None);
    }

    #[test]
    fn executors_round_trip_through_the_wire_codec() {
        let exec = Executor::Exec(Arc::new(ExecCommand {
            program: "sh".into(),
            args: vec!["-c".into(), "exit 3".into()],
            env: [("A".to_owned(), "1".to_owned())].into(),
            cwd: Some("/tmp".into()),
        }));
        for executor in [
            None,
            Some(Executor::Synthetic),
            Some(Executor::Burn),
            Some(exec),
            Some(Executor::BurnByPlacement(BurnByPlacement {
                slow_duration: Micros(7),
                preferred: true,
            })),
        ] {
            let mut task = TaskSpec::short(TaskId::new(1, 0), Resources::cores(1, 1), Micros(1));
            task.executor = executor;
            let bytes = crate::codec::encode(&crate::ClusterName::default(), &task).unwrap();
            assert_eq!(
                crate::codec::decode::<TaskSpec>(&crate::ClusterName::default(), &bytes).unwrap(),
                task
            );
        }
    }
}
