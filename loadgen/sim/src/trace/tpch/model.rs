//! The TPC-H DAGs as read from the file ([`TpchDag`], [`TpchStage`]): stages with
//! their edges, task counts and measured task durations. A leaf.

use crate::trace::DagStage;
use common::Micros;

/// One query at one input size.
#[derive(Clone, Debug, PartialEq)]
pub struct TpchDag {
    /// `tpch-2g-q1`.
    pub name: String,
    /// Input size, `2g` .. `100g`.
    pub scale: String,
    /// Query number, 1 to 22.
    pub query: u32,
    /// In file order; `dag.depends_on` holds the parents of each.
    pub stages: Vec<TpchStage>,
}

/// One stage: how many tasks, and the durations measured for them on Spark.
#[derive(Clone, Debug, PartialEq)]
pub struct TpchStage {
    /// Id (the file's `stage`), name `s<id>`, parents (from the file's `edges`).
    pub dag: DagStage,
    pub tasks: u32,
    /// Tasks of the first wave (never empty: the fallback of the other two).
    pub first_wave: Vec<Micros>,
    /// Tasks of later waves, on an executor that already ran one of the stage's tasks.
    pub rest_wave: Vec<Micros>,
    /// First-wave tasks on an executor new to the job.
    pub fresh: Vec<Micros>,
}

impl TpchStage {
    /// Tasks of later waves (first wave when none were measured).
    pub fn rest_or_first(&self) -> &[Micros] {
        if self.rest_wave.is_empty() {
            &self.first_wave
        } else {
            &self.rest_wave
        }
    }

    /// Tasks on fresh executors (first wave when none were measured).
    pub fn fresh_or_first(&self) -> &[Micros] {
        if self.fresh.is_empty() {
            &self.first_wave
        } else {
            &self.fresh
        }
    }
}
