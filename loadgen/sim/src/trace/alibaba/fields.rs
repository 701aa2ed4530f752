//! The columns of the two Alibaba 2018 batch tables and how each value is judged:
//! usable, a known trace artefact to count (empty, `-1`, `101` in normalised fields),
//! or malformed text (an error naming the field).

use crate::trace::ReadReport;
use common::Resources;

/// Which of the two batch tables a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlibabaTable {
    /// `batch_task.csv`: one row per task (a DAG stage) with `instance_num` instances.
    Task,
    /// `batch_instance.csv`: one row per instance.
    Instance,
}

/// Column indices of one table.
struct Layout {
    columns: usize,
    task_name: usize,
    count: Option<usize>,
    cpu: (usize, &'static str),
    mem: (usize, &'static str),
}

const JOB_NAME: usize = 2;
const STATUS: usize = 4;
const START: usize = 5;
const END: usize = 6;

impl AlibabaTable {
    fn layout(self) -> Layout {
        match self {
            AlibabaTable::Task => Layout {
                columns: 9,
                task_name: 0,
                count: Some(1),
                cpu: (7, "plan_cpu"),
                mem: (8, "plan_mem"),
            },
            AlibabaTable::Instance => Layout {
                columns: 14,
                task_name: 1,
                count: None,
                cpu: (11, "cpu_max"),
                mem: (13, "mem_max"),
            },
        }
    }
}

/// Reader settings for Alibaba files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlibabaConfig {
    /// MiB that a normalised memory of 100 stands for (the trace does not publish the
    /// machines' absolute memory, so this is an assumption the caller states).
    pub machine_memory_mb: u64,
    /// `instance_num` above this is counted and the task dropped (guards memory).
    pub max_instances_per_task: u64,
}

impl Default for AlibabaConfig {
    fn default() -> Self {
        AlibabaConfig {
            machine_memory_mb: 64 * 1024,
            max_instances_per_task: 1_000_000,
        }
    }
}

/// One usable row: `count` identical tasks of `task_name` in `job_name`.
#[derive(Debug)]
pub(super) struct Row<'a> {
    pub task_name: &'a str,
    pub count: u64,
    pub start_s: u64,
    pub end_s: u64,
    pub resources: Option<Resources>,
}

/// A malformed field: (field name, reason).
pub(super) type FieldError = (&'static str, String);

enum Value {
    Ok(f64),
    Invalid(&'static str),
}

const STATUSES: [&str; 7] = [
    "Terminated",
    "Failed",
    "Running",
    "Waiting",
    "Cancelled",
    "Interrupted",
    "Ready",
];

fn number(text: &str, field: &'static str, max: Option<f64>) -> Result<Value, FieldError> {
    if text.is_empty() {
        return Ok(Value::Invalid("empty"));
    }
    let v: f64 = text
        .parse()
        .map_err(|_| (field, format!("{text:?} is not a number")))?;
    if !v.is_finite() {
        return Err((field, format!("{text:?} is not a finite number")));
    }
    Ok(if v == -1.0 {
        Value::Invalid("-1")
    } else if v < 0.0 {
        Value::Invalid("negative")
    } else if max.is_some_and(|m| v > m) {
        Value::Invalid(if v == 101.0 { "101" } else { "above 100" })
    } else {
        Value::Ok(v)
    })
}

/// The job name of a record (grouping happens before validation).
pub(super) fn job_name(record: &csv::StringRecord) -> &str {
    record.get(JOB_NAME).map(str::trim).unwrap_or("")
}

/// Parses one record. `Ok(None)` means the row was dropped and counted in `report`.
pub(super) fn parse_row<'a>(
    table: AlibabaTable,
    cfg: &AlibabaConfig,
    record: &'a csv::StringRecord,
    report: &mut ReadReport,
) -> Result<Option<Row<'a>>, FieldError> {
    let layout = table.layout();
    if record.len() != layout.columns {
        return Err((
            "columns",
            format!(
                "expected {} columns, found {}",
                layout.columns,
                record.len()
            ),
        ));
    }
    let get = |i: usize| record.get(i).map(str::trim).unwrap_or("");
    if get(JOB_NAME).is_empty() {
        report.drop("job_name: empty");
        return Ok(None);
    }
    let status = get(STATUS);
    if status != "Terminated" {
        let shown = if status.is_empty() {
            "empty"
        } else if STATUSES.contains(&status) {
            status
        } else {
            "other"
        };
        report.drop(format!("status: {shown}"));
        return Ok(None);
    }
    let start = match number(get(START), "start_time", None)? {
        Value::Ok(v) => v as u64,
        Value::Invalid(why) => {
            report.drop(format!("start_time: {why}"));
            return Ok(None);
        }
    };
    let end = match number(get(END), "end_time", None)? {
        Value::Ok(0.0) => {
            report.drop("end_time: 0 (unfinished)");
            return Ok(None);
        }
        Value::Ok(v) => v as u64,
        Value::Invalid(why) => {
            report.drop(format!("end_time: {why}"));
            return Ok(None);
        }
    };
    if end < start {
        report.drop("end_time before start_time");
        return Ok(None);
    }
    let count = match layout.count {
        None => 1,
        Some(i) => match number(get(i), "instance_num", None)? {
            Value::Ok(v) if v < 1.0 || v.fract() != 0.0 => {
                report.drop("instance_num: not a positive integer");
                return Ok(None);
            }
            Value::Ok(v) if v as u64 > cfg.max_instances_per_task => {
                report.drop(format!(
                    "instance_num: above max_instances_per_task = {}",
                    cfg.max_instances_per_task
                ));
                return Ok(None);
            }
            Value::Ok(v) => v as u64,
            Value::Invalid(why) => {
                report.drop(format!("instance_num: {why}"));
                return Ok(None);
            }
        },
    };
    let (cpu_i, cpu_name) = layout.cpu;
    let (mem_i, mem_name) = layout.mem;
    let cpu = number(get(cpu_i), cpu_name, None)?;
    let mem = number(get(mem_i), mem_name, Some(100.0))?;
    let resources = match (cpu, mem) {
        (Value::Ok(cpu), Value::Ok(mem)) => Some(Resources::new(
            (cpu * 10.0).round() as u64,
            (mem / 100.0 * cfg.machine_memory_mb as f64).round() as u64,
        )),
        (cpu, mem) => {
            for (v, name) in [(cpu, cpu_name), (mem, mem_name)] {
                if let Value::Invalid(why) = v {
                    report.caveat(format!("{name}: {why} (resources unknown)"));
                }
            }
            None
        }
    };
    Ok(Some(Row {
        task_name: get(layout.task_name),
        count,
        start_s: start,
        end_s: end,
        resources,
    }))
}
