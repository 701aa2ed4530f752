//! Streaming readers for Alibaba cluster-trace-v2018 `batch_task.csv` and
//! `batch_instance.csv` (no header line).
//!
//! # Ordering required for bounded memory
//!
//! A job is assembled from consecutive rows with the same `job_name` and handed out
//! as soon as a row of another job appears, so memory holds one job at a time. The
//! reader therefore requires each job's rows to be **contiguous** (grouped by
//! `job_name`; `sort -t, -k3,3 -s` achieves it). It does not assume this: when a job
//! name reappears after its group was closed, the new group is emitted as a separate
//! job and counted under `limits["job rows not contiguous"]` in the [`ReadReport`].
//! Detection keeps a 64-bit hash per closed job (the only state that grows with the
//! trace: about 16 bytes per job). Jobs are emitted in file order; a job arriving
//! before an earlier-emitted one is counted under `limits["job arrival out of order"]`.
//!
//! # What becomes of each row
//!
//! One [`TraceTask`] per instance: a `batch_task` row yields `instance_num` tasks with
//! the task's span `end_time - start_time` as duration and `plan_cpu` / `plan_mem` as
//! resources; a `batch_instance` row yields one task with its own span and
//! `cpu_max` / `mem_max` (peak usage) as resources. CPU is in hundredths of a core
//! (100 = 1000 millicores); memory is normalised 0-100 and mapped to MiB through
//! [`AlibabaConfig::machine_memory_mb`]. The job arrives at the earliest start of its
//! kept rows. Rows whose status is not `Terminated`, whose `end_time` is 0, or whose
//! times are empty / `-1` / negative are dropped; rows with unusable resource values
//! are kept without resources. Both are counted per category. Text that is not a
//! number at all is an error naming the file, line and field.

mod dag;
mod fields;

pub use dag::{parse_dag_name, DagName};
pub use fields::{AlibabaConfig, AlibabaTable};

use super::{DagStage, ReadReport, TraceError, TraceJob, TraceTask};
use common::Micros;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};

/// A job being assembled from its rows.
#[derive(Debug)]
struct JobBuilder {
    name: String,
    arrival_s: Option<u64>,
    stages: Vec<DagStage>,
    tasks: Vec<TraceTask>,
}

impl JobBuilder {
    fn new(name: &str) -> Self {
        JobBuilder {
            name: name.to_owned(),
            arrival_s: None,
            stages: Vec::new(),
            tasks: Vec::new(),
        }
    }

    fn add(&mut self, row: &fields::Row<'_>, report: &mut ReadReport) {
        let stage = parse_dag_name(row.task_name).map(|dag| {
            match self.stages.iter().find(|s| s.id == dag.id) {
                Some(s) if s.name != row.task_name => {
                    report.caveat("dag: two task names with the same id (first kept)")
                }
                Some(_) => {}
                None => self.stages.push(DagStage {
                    id: dag.id,
                    name: row.task_name.to_owned(),
                    depends_on: dag.depends_on,
                }),
            }
            dag.id
        });
        self.arrival_s = Some(self.arrival_s.map_or(row.start_s, |a| a.min(row.start_s)));
        let task = TraceTask {
            duration: Micros::from_secs(row.end_s - row.start_s),
            resources: row.resources,
            constraints: None,
            stage,
        };
        self.tasks
            .extend(std::iter::repeat_n(task, row.count as usize));
    }

    fn finish(mut self, id: u64, report: &mut ReadReport) -> Option<TraceJob> {
        let arrival_s = self.arrival_s?;
        self.stages.sort_by_key(|s| s.id);
        let ids: Vec<u32> = self.stages.iter().map(|s| s.id).collect();
        for stage in &mut self.stages {
            let before = stage.depends_on.len();
            stage.depends_on.retain(|d| ids.binary_search(d).is_ok());
            for _ in stage.depends_on.len()..before {
                report.caveat("dag: dependency on a stage with no kept rows (edge dropped)");
            }
        }
        Some(TraceJob {
            id,
            arrival: Micros::from_secs(arrival_s),
            queue: None,
            stages: self.stages,
            tasks: self.tasks,
        })
    }
}

/// Streams [`TraceJob`]s out of one Alibaba batch table. See the module docs for the
/// ordering it needs and what it does with each row.
#[derive(Debug)]
pub struct AlibabaReader<R: Read> {
    csv: csv::Reader<R>,
    table: AlibabaTable,
    cfg: AlibabaConfig,
    path: PathBuf,
    record: csv::StringRecord,
    current: Option<JobBuilder>,
    pending: Option<TraceJob>,
    pending_err: Option<TraceError>,
    closed: HashSet<u64>,
    next_id: u64,
    latest_arrival: Micros,
    report: ReadReport,
    done: bool,
}

impl AlibabaReader<File> {
    pub fn open(path: &Path, table: AlibabaTable, cfg: AlibabaConfig) -> Result<Self, TraceError> {
        let file = File::open(path).map_err(|source| TraceError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(AlibabaReader::new(file, path, table, cfg))
    }
}

fn name_hash(name: &str) -> u64 {
    let mut h = DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
}

impl<R: Read> AlibabaReader<R> {
    pub fn new(input: R, path: &Path, table: AlibabaTable, cfg: AlibabaConfig) -> Self {
        let csv = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(input);
        AlibabaReader {
            csv,
            table,
            cfg,
            path: path.to_owned(),
            record: csv::StringRecord::new(),
            current: None,
            pending: None,
            pending_err: None,
            closed: HashSet::new(),
            next_id: 0,
            latest_arrival: Micros::ZERO,
            report: ReadReport::default(),
            done: false,
        }
    }

    /// What was read, dropped and kept so far (complete once iteration has ended).
    pub fn report(&self) -> &ReadReport {
        &self.report
    }

    fn line(&self) -> u64 {
        self.record.position().map_or(0, |p| p.line())
    }

    fn csv_error(&self, err: csv::Error) -> TraceError {
        let line = err.position().map_or(self.line(), |p| p.line());
        match err.into_kind() {
            csv::ErrorKind::Io(source) => TraceError::Io {
                path: self.path.clone(),
                source,
            },
            other => TraceError::Parse {
                path: self.path.clone(),
                line,
                field: "record".to_owned(),
                reason: format!("{other:?}"),
            },
        }
    }

    /// Closes the current job, returning it unless none of its rows were kept.
    fn close(&mut self) -> Option<TraceJob> {
        let builder = self.current.take()?;
        self.closed.insert(name_hash(&builder.name));
        let Some(job) = builder.finish(self.next_id, &mut self.report) else {
            self.report.drop("job with no kept rows");
            return None;
        };
        self.next_id += 1;
        if job.arrival < self.latest_arrival {
            self.report.limit("job arrival out of order");
        }
        self.latest_arrival = self.latest_arrival.max(job.arrival);
        self.report.jobs += 1;
        self.report.tasks += job.tasks.len() as u64;
        Some(job)
    }

    /// Reads one record; a job it closed goes to `pending`.
    fn step(&mut self) -> Result<(), TraceError> {
        self.report.records += 1;
        let name = fields::job_name(&self.record);
        if !name.is_empty() && self.current.as_ref().is_none_or(|c| c.name != name) {
            let builder = JobBuilder::new(name);
            self.pending = self.close();
            if self.closed.contains(&name_hash(&builder.name)) {
                self.report.limit("job rows not contiguous");
            }
            self.current = Some(builder);
        }
        match fields::parse_row(self.table, &self.cfg, &self.record, &mut self.report) {
            Ok(Some(row)) => {
                if let Some(builder) = self.current.as_mut() {
                    builder.add(&row, &mut self.report);
                }
            }
            Ok(None) => {}
            Err((field, reason)) => {
                return Err(TraceError::Parse {
                    path: self.path.clone(),
                    line: self.line(),
                    field: field.to_owned(),
                    reason,
                })
            }
        }
        Ok(())
    }
}

impl<R: Read> Iterator for AlibabaReader<R> {
    type Item = Result<TraceJob, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(job) = self.pending.take() {
                return Some(Ok(job));
            }
            if let Some(e) = self.pending_err.take() {
                return Some(Err(e));
            }
            if self.done {
                return None;
            }
            match self.csv.read_record(&mut self.record) {
                Ok(true) => {
                    if let Err(e) = self.step() {
                        // Hand out the job this row closed before its error.
                        if let Some(job) = self.pending.take() {
                            self.pending_err = Some(e);
                            return Some(Ok(job));
                        }
                        return Some(Err(e));
                    }
                }
                Ok(false) => {
                    self.done = true;
                    if let Some(job) = self.close() {
                        return Some(Ok(job));
                    }
                }
                Err(e) => {
                    let err = self.csv_error(e);
                    if matches!(err, TraceError::Io { .. }) {
                        self.done = true;
                    }
                    return Some(Err(err));
                }
            }
        }
    }
}
