//! A trace's jobs and tasks as every reader yields them ([`TraceJob`]), the readers'
//! error ([`TraceError`]), and [`read_all`]. A leaf: the readers import it.

use common::{ConstraintSet, Micros, Resources};
use std::path::PathBuf;

/// One job of a trace: tasks that arrive together.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceJob {
    /// Dense job number in trace order (0, 1, ...), unless the format carries ids.
    pub id: u64,
    /// Arrival time relative to the start of the trace.
    pub arrival: Micros,
    /// User queue name, when the trace says (fairness experiments); `None` = default.
    pub queue: Option<String>,
    /// DAG structure of the job (Alibaba task names, TPC-H DAGs), empty when the
    /// trace has none.
    pub stages: Vec<DagStage>,
    pub tasks: Vec<TraceTask>,
}

/// One stage of a job's DAG: a named group of identical tasks and the stages it
/// depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DagStage {
    pub id: u32,
    pub name: String,
    pub depends_on: Vec<u32>,
}

/// One task of a trace. Fields the format does not carry are `None` and get defaults
/// (or synthesised values) when the workload is built.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceTask {
    pub duration: Micros,
    pub resources: Option<Resources>,
    pub constraints: Option<ConstraintSet>,
    /// The DAG stage this task belongs to, if any.
    pub stage: Option<u32>,
}

impl TraceTask {
    pub fn with_duration(duration: Micros) -> Self {
        TraceTask {
            duration,
            resources: None,
            constraints: None,
            stage: None,
        }
    }
}

/// Why a trace could not be read. Always names the file, and the line (or DAG) and
/// field where there is one.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The OS error is the source, not part of this message, so `{:#}` prints it once.
    #[error("cannot read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: field `{field}`: {reason}")]
    Parse {
        path: PathBuf,
        line: u64,
        field: String,
        reason: String,
    },
    /// A comma-separated line where a `.tr` line was expected: the file is most
    /// likely one of the CSV formats, read without `--format`.
    #[error(
        "{path}:{line}: looks like CSV, not the `.tr` format (`arrival_s n_tasks mean_s d1 .. dn`); \
         pass --format alibaba-task, alibaba-instance or google-csv \
         (or convert it with `loadgen trace convert`)"
    )]
    LooksLikeCsv { path: PathBuf, line: u64 },
    /// A DAG of a DAG file (TPC-H) that parsed but is not a valid DAG (a cycle, an
    /// edge naming a missing stage, a stage without tasks, a bad number). `field` is
    /// the JSON path inside the DAG, such as `edges[2]` or `stages[3].tasks`.
    #[error("{path}: DAG `{dag}`: field `{field}`: {reason}")]
    Dag {
        path: PathBuf,
        dag: String,
        field: String,
        reason: String,
    },
    /// A selection the file cannot satisfy (e.g. a size filter naming a size the file
    /// does not have).
    #[error("{path}: {reason}")]
    Selection { path: PathBuf, reason: String },
}

impl TraceError {
    /// This error as one line for the operator who named the file with `given_by`
    /// (a flag such as `--trace`): a file that cannot be opened says which path, which
    /// flag and why, once.
    pub fn given_by(self, given_by: &str) -> anyhow::Error {
        match self {
            TraceError::Io { path, source } => anyhow::anyhow!(
                "cannot open trace {} (given by {given_by}): {source}",
                path.display()
            ),
            other => other.into(),
        }
    }
}

/// Reads a whole trace into memory (for the simulator, which needs it all anyway).
pub fn read_all<I: Iterator<Item = Result<TraceJob, TraceError>>>(
    reader: I,
) -> Result<Vec<TraceJob>, TraceError> {
    reader.collect()
}
