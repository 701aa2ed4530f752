//! Reports of a run: `tasks.csv` (one row per task) and `summary.json`.

use crate::sim::ledger::{Decision, TaskRecord};
use crate::sim::{Branches, SimCounters, SimOutcome};
use common::{JobId, Micros, TaskId};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

pub const TASKS_CSV_HEADER: &str = "job,task,queue,arrival_s,decision,gm,lm,node,attempts,rejections,preemptions,launch_s,start_s,finish_s,allocation_s,framework_queuing_s,processing_s,worker_queuing_s,communication_s,branch";

/// One `tasks.csv` row at a time, into a reused buffer: integers and times as
/// `seconds.micros` (six digits) written two digits at a time into a stack buffer and
/// copied once; the text `format!` gave, without a `String` per field (`format!` was
/// a fifth of a YH1_sub run, digit-by-digit pushes 8%, `itoa` about the same).
#[derive(Default)]
struct RowWriter {
    row: Vec<u8>,
}

/// "00" to "99".
const PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Writes `v` so that it ends at `buf`'s end; returns where it starts.
fn digits_into(buf: &mut [u8], mut v: u64) -> usize {
    let mut i = buf.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + v as u8;
    }
    i
}

impl RowWriter {
    fn int(&mut self, v: u64) {
        let mut buf = [0u8; 20];
        let from = digits_into(&mut buf, v);
        self.row.extend_from_slice(&buf[from..]);
    }

    fn secs(&mut self, t: Micros) {
        // Whole seconds (up to 20 digits), the point, six digits of microseconds:
        // 1,000,000 + micros has seven digits, a 1 (where the point goes) and the six
        // zero-padded ones.
        let mut buf = [0u8; 27];
        digits_into(&mut buf[20..], 1_000_000 + t.0 % 1_000_000);
        buf[20] = b'.';
        let from = digits_into(&mut buf[..20], t.0 / 1_000_000);
        self.row.extend_from_slice(&buf[from..]);
    }

    /// A field followed by its comma: empty for `None`.
    fn opt_int(&mut self, v: Option<u64>) {
        if let Some(v) = v {
            self.int(v);
        }
        self.row.push(b',');
    }

    fn opt_secs(&mut self, t: Option<Micros>) {
        if let Some(t) = t {
            self.secs(t);
        }
        self.row.push(b',');
    }

    fn field(&mut self, text: &str) {
        self.row.extend_from_slice(text.as_bytes());
        self.row.push(b',');
    }

    /// The row of `r`, its last field `branch` (quoted if it holds a comma or a
    /// quote; a tree path does not), ending in a newline.
    fn write(&mut self, r: &TaskRecord, branch: &str) -> &[u8] {
        self.row.clear();
        self.opt_int(Some(r.job));
        self.opt_int(Some(r.index.into()));
        self.opt_int(Some(r.queue.0.into()));
        self.opt_secs(Some(r.arrival));
        self.field(r.decision.as_str());
        self.opt_int(r.gm.map(|g| g.0.into()));
        self.opt_int(r.lm.map(|l| l.0.into()));
        self.opt_int(r.node.map(|n| n.0.into()));
        self.opt_int(Some(r.attempts.into()));
        self.opt_int(Some(r.rejections.into()));
        self.opt_int(Some(r.preemptions.into()));
        self.opt_secs(r.launch);
        self.opt_secs(r.start);
        self.opt_secs(r.finish);
        self.opt_secs(r.allocation());
        // The components of a task that never started are left empty.
        let started = r.start.is_some();
        for component in [
            r.framework_queuing,
            r.processing,
            r.worker_queuing,
            r.communication,
        ] {
            self.opt_secs(started.then_some(component));
        }
        if branch.contains([',', '"']) {
            self.row.push(b'"');
            self.row
                .extend_from_slice(branch.replace('"', "\"\"").as_bytes());
            self.row.push(b'"');
        } else {
            self.row.extend_from_slice(branch.as_bytes());
        }
        self.row.push(b'\n');
        &self.row
    }
}

/// Writes one row per task, sorted by (job, task), times in seconds with microsecond
/// precision: byte-identical for identical runs.
///
/// The last column, `branch` (soft constraints, docs/alsched.md): the branch of its
/// job's utility tree the task's last placement took (its tree path), `none` when
/// no branch had room, empty for a task of a job without a tree or never placed.
pub fn write_tasks_csv<W: Write>(
    out: &mut W,
    records: &[TaskRecord],
    branches: &Branches,
) -> std::io::Result<()> {
    writeln!(out, "{TASKS_CSV_HEADER}")?;
    let mut order: Vec<&TaskRecord> = records.iter().collect();
    order.sort_by_key(|r| (r.job, r.index));
    let mut row = RowWriter::default();
    for r in order {
        // A run without trees skips the lookups (the YH1_sub run's speed).
        let branch = if branches.is_empty() {
            ""
        } else {
            let id = TaskId {
                job: JobId(r.job),
                index: r.index,
            };
            branches.get(&id).map_or("", |b| b)
        };
        out.write_all(row.write(r, branch))?;
    }
    Ok(())
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: usize,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

impl Distribution {
    /// Nearest-rank percentiles of `values` (seconds).
    pub fn of(mut values: Vec<f64>) -> Distribution {
        if values.is_empty() {
            return Distribution::default();
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let pick = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        Distribution {
            count: n,
            mean: values.iter().sum::<f64>() / n as f64,
            p50: pick(0.50),
            p90: pick(0.90),
            p99: pick(0.99),
            p99_9: pick(0.999),
            max: values[n - 1],
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ComponentMeans {
    pub framework_queuing: f64,
    pub processing: f64,
    pub worker_queuing: f64,
    pub communication: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub scheduler: String,
    pub seed: u64,
    pub nodes: usize,
    pub tasks: usize,
    pub started: usize,
    pub finished: usize,
    /// Tasks no node can ever host (constraints or size): reported, never run.
    pub unplaceable: usize,
    /// Tasks that never finished for any other reason (must be zero).
    pub never_finished: usize,
    /// Allocation time (start - arrival), seconds.
    pub allocation_s: Distribution,
    /// Mean of each component over started tasks, seconds.
    pub components_mean_s: ComponentMeans,
    pub lm_rejections: u64,
    pub repartitions: u64,
    pub requeues: u64,
    pub heartbeats: u64,
    /// When LMs sent their state: heartbeat (only), or changes/MIN (also after every
    /// change, at most once per MIN, as the services do).
    pub lm_publish: String,
    /// Change-triggered LM state publications (`lm_publish` changes/...).
    pub state_publications: u64,
    pub idle_ticks_skipped: u64,
    pub launch_batches: u64,
    pub probes: u64,
    pub over_commits: u64,
    pub preempt_attempts: u64,
    pub preempt_refused: u64,
    pub preemptions: u64,
    /// The most times one task was preempted.
    pub max_task_preemptions: u32,
    pub wasted_task_seconds: f64,
    /// The task-type policy (Mercury hybrid-GQ); "short" when every task is Short.
    pub task_types: String,
    /// Tasks finished per second between the first arrival and the last finish.
    pub task_throughput_per_s: f64,
    /// Job latency (last task's finish - job arrival) over jobs that finished, seconds.
    pub job_latency_s: Distribution,
    /// QUEUEABLE tasks killed (for other work, or shed) and requeued.
    pub queueable_kills: u64,
    /// Of those, queued tasks dropped by load shedding.
    pub shed: u64,
    /// QUEUEABLE containers promoted to GUARANTEED.
    pub promoted: u64,
    /// QUEUEABLE placement attempts held back by their job's quota.
    pub quota_held: u64,
    /// Which blocked tasks the GMs retried on a gain of resources (indexed, all).
    pub wake: String,
    /// GM placement attempts of tasks tried before, and blocked tasks woken.
    pub retries: u64,
    pub woken: u64,
    /// Jain's index of normalised shares per window (runs with queues only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<crate::fairness::FairnessSummary>,
    pub events: u64,
    pub simulated_span_s: f64,
    pub wall_time_s: f64,
    /// CPU time of the simulation itself (reading and writing files excluded).
    pub cpu_time_s: f64,
    pub peak_rss_mb: f64,
}

impl Summary {
    pub fn new(
        scheduler: &str,
        seed: u64,
        nodes: usize,
        outcome: &SimOutcome,
        wall_time_s: f64,
    ) -> Summary {
        let records = &outcome.records;
        let started: Vec<&TaskRecord> = records.iter().filter(|r| r.start.is_some()).collect();
        let n = started.len().max(1) as f64;
        let mean = |f: fn(&TaskRecord) -> Micros| {
            started.iter().map(|r| f(r).as_secs_f64()).sum::<f64>() / n
        };
        let unplaceable = records
            .iter()
            .filter(|r| r.decision == Decision::Unplaceable)
            .count();
        let finished = records.iter().filter(|r| r.finish.is_some()).count();
        let c: &SimCounters = &outcome.counters;
        Summary {
            scheduler: scheduler.to_owned(),
            seed,
            nodes,
            tasks: records.len(),
            started: started.len(),
            finished,
            unplaceable,
            never_finished: records.len() - finished - unplaceable,
            allocation_s: Distribution::of(
                started
                    .iter()
                    .filter_map(|r| r.allocation())
                    .map(Micros::as_secs_f64)
                    .collect(),
            ),
            components_mean_s: ComponentMeans {
                framework_queuing: mean(|r| r.framework_queuing),
                processing: mean(|r| r.processing),
                worker_queuing: mean(|r| r.worker_queuing),
                communication: mean(|r| r.communication),
            },
            lm_rejections: c.lm_rejections,
            repartitions: c.repartitions,
            requeues: c.requeues,
            heartbeats: c.heartbeats,
            lm_publish: String::new(),
            state_publications: c.state_publications,
            idle_ticks_skipped: c.idle_ticks_skipped,
            launch_batches: c.launch_batches,
            probes: c.probes,
            over_commits: c.over_commits,
            preempt_attempts: c.preempt_attempts,
            preempt_refused: c.preempt_refused,
            preemptions: c.preemptions,
            max_task_preemptions: records.iter().map(|r| r.preemptions).max().unwrap_or(0),
            wasted_task_seconds: c.wasted.as_secs_f64(),
            task_types: "short".to_owned(),
            task_throughput_per_s: throughput(records),
            job_latency_s: Distribution::of(job_latencies(records)),
            queueable_kills: c.queueable_kills,
            shed: c.shed,
            promoted: c.promoted,
            quota_held: c.quota_held,
            wake: String::new(),
            retries: c.retries,
            woken: c.woken,
            fairness: None,
            events: c.events,
            simulated_span_s: outcome.span.as_secs_f64(),
            wall_time_s,
            cpu_time_s: 0.0,
            peak_rss_mb: peak_rss_mb().unwrap_or(0.0),
        }
    }
}

/// Finished tasks per second from the first arrival to the last finish.
pub fn throughput(records: &[TaskRecord]) -> f64 {
    let first = records.iter().map(|r| r.arrival).min();
    let last = records.iter().filter_map(|r| r.finish).max();
    let finished = records.iter().filter(|r| r.finish.is_some()).count();
    match (first, last) {
        (Some(a), Some(b)) if b > a => finished as f64 / b.since(a).as_secs_f64(),
        _ => 0.0,
    }
}

/// Per job whose every task finished: last finish - arrival, in seconds.
pub fn job_latencies(records: &[TaskRecord]) -> Vec<f64> {
    let mut jobs: std::collections::BTreeMap<u64, (Micros, Option<Micros>)> =
        std::collections::BTreeMap::new();
    for r in records {
        let entry = jobs.entry(r.job).or_insert((r.arrival, Some(Micros::ZERO)));
        entry.0 = entry.0.min(r.arrival);
        entry.1 = match (entry.1, r.finish) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
    }
    jobs.values()
        .filter_map(|(arrival, finish)| finish.map(|f| f.since(*arrival).as_secs_f64()))
        .collect()
}

/// CPU time this process has used so far (all threads), in seconds, where /proc
/// says: `/proc/self/schedstat` (nanoseconds), else utime + stime of
/// `/proc/self/stat` (clock ticks, taken as 100 per second).
pub fn cpu_seconds() -> Option<f64> {
    if let Ok(text) = std::fs::read_to_string("/proc/self/schedstat") {
        if let Some(ns) = text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            return Some(ns / 1e9);
        }
    }
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (in parentheses, which may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Peak resident memory of this process (VmHWM), in MiB, where /proc says.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Writes `tasks.csv` and `summary.json` into `dir`.
pub fn write_run(dir: &Path, outcome: &SimOutcome, summary: &Summary) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    write_tasks_file(dir, outcome)?;
    write_summary(dir, summary)
}

/// Writes the `tasks.csv` of `outcome` into `dir` (which exists).
pub fn write_tasks_file(dir: &Path, outcome: &SimOutcome) -> std::io::Result<()> {
    let mut csv = std::io::BufWriter::new(std::fs::File::create(dir.join("tasks.csv"))?);
    write_tasks_csv(&mut csv, &outcome.records, &outcome.branches)?;
    csv.flush()
}

/// Writes `summary.json` into `dir` (which exists).
pub fn write_summary(dir: &Path, summary: &Summary) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(summary).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("summary.json"), json + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let d = Distribution::of((1..=1000).map(|i| i as f64).collect());
        assert_eq!(
            (d.p50, d.p90, d.p99, d.p99_9, d.max),
            (500.0, 900.0, 990.0, 999.0, 1000.0)
        );
        assert_eq!(Distribution::of(vec![]).count, 0);
    }

    /// A run without trees has an empty `branch` column; a task of a job with one
    /// names its branch (quoted when it would break the row).
    #[test]
    fn the_branch_column_is_empty_without_a_tree() {
        let records = [
            TaskRecord::new(1, 0, Micros(0)),
            TaskRecord::new(2, 0, Micros(0)),
        ];
        let mut out = Vec::new();
        write_tasks_csv(&mut out, &records, &Branches::default()).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with(",communication_s,branch"), "{text}");
        assert!(lines[1..].iter().all(|l| l.ends_with(",")), "{text}");
        let branches: Branches = [(TaskId::new(2, 0), "utility.max[0],x".into())]
            .into_iter()
            .collect();
        let mut out = Vec::new();
        write_tasks_csv(&mut out, &records, &branches).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].ends_with(","), "{text}");
        assert!(lines[2].ends_with(",\"utility.max[0],x\""), "{text}");
    }

    /// The row as `format!` writes it (the writer before [`RowWriter`]).
    fn formatted(r: &TaskRecord) -> String {
        let secs = |t: Micros| format!("{}.{:06}", t.0 / 1_000_000, t.0 % 1_000_000);
        let opt_secs = |t: Option<Micros>| t.map(secs).unwrap_or_default();
        fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
            v.map(|v| v.to_string()).unwrap_or_default()
        }
        let comp = |m: Micros| {
            if r.start.is_some() {
                secs(m)
            } else {
                String::new()
            }
        };
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\n",
            r.job,
            r.index,
            r.queue.0,
            secs(r.arrival),
            r.decision.as_str(),
            opt(r.gm.map(|g| g.0)),
            opt(r.lm.map(|l| l.0)),
            opt(r.node.map(|n| n.0)),
            r.attempts,
            r.rejections,
            r.preemptions,
            opt_secs(r.launch),
            opt_secs(r.start),
            opt_secs(r.finish),
            opt_secs(r.allocation()),
            comp(r.framework_queuing),
            comp(r.processing),
            comp(r.worker_queuing),
            comp(r.communication),
        )
    }

    proptest::proptest! {
        #[test]
        fn rows_are_those_format_wrote(
            job in proptest::prelude::any::<u64>(),
            index in proptest::prelude::any::<u32>(),
            small in proptest::prelude::any::<(u16, u16, u16, u32)>(),
            counts in proptest::prelude::any::<(u32, u32, u32)>(),
            times in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::Just(0u64),
                    0u64..3_000_000,
                    proptest::prelude::any::<u64>()
                ],
                9,
            ),
            present in proptest::prelude::any::<[bool; 7]>(),
            decision in 0usize..6,
        ) {
            use crate::sim::ledger::Decision;
            use common::{GmId, LmId, NodeId, QueueId};
            let t = |i: usize| Micros(times[i]);
            let mut r = TaskRecord::new(job, index, t(0));
            r.queue = QueueId(small.0);
            r.decision = [
                Decision::Pending,
                Decision::Internal,
                Decision::Repartition,
                Decision::LateBinding,
                Decision::Preemption,
                Decision::Unplaceable,
            ][decision];
            r.gm = present[0].then_some(GmId(small.1));
            r.lm = present[1].then_some(LmId(small.2));
            r.node = present[2].then_some(NodeId(small.3));
            (r.attempts, r.rejections, r.preemptions) = counts;
            r.launch = present[3].then_some(t(1));
            r.start = present[4].then_some(t(2));
            r.finish = present[5].then_some(t(3));
            r.framework_queuing = t(4);
            r.processing = t(5);
            r.worker_queuing = t(6);
            r.communication = t(7);
            let mut writer = RowWriter::default();
            let row = String::from_utf8(writer.write(&r, "").to_vec()).unwrap();
            proptest::prop_assert_eq!(row, formatted(&r));
            // The buffer is reused: a second row is not appended to the first.
            let again = String::from_utf8(writer.write(&r, "").to_vec()).unwrap();
            proptest::prop_assert_eq!(again, formatted(&r));
        }
    }
}
