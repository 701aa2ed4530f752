//! Streaming reader for Google cluster-usage traces v3 (2019) instance events,
//! exported from the public BigQuery tables as CSV (with a header line) or JSON lines
//! (see [`event`] for the columns).
//!
//! A job is a `collection_id`, a task an `(collection_id, instance_index)`. A task
//! arrives at its first SUBMIT and runs `FINISH - SCHEDULE` (the last SCHEDULE before
//! FINISH; EVICT sends it back to pending). Tasks that end in FAIL / KILL / LOST, or
//! have no FINISH when their job is flushed, are dropped and counted, as are
//! FINISHes without a SCHEDULE and tasks with no SUBMIT.
//!
//! # Bounded memory
//!
//! A collection's events span the file, so jobs are held open while read. A job is
//! **flushed** (handed out) as soon as every instance seen so far has finished or
//! failed; an instance of that collection appearing later is dropped and counted
//! (`"event for a job already flushed"`), so a job whose instances are submitted in
//! waves may be cut short: that is the price of not holding the whole trace. At most
//! [`GoogleConfig::max_open_jobs`] jobs are open at once; opening another flushes the
//! oldest one early, counted under `limits`. Besides open jobs, the reader keeps one
//! 64-bit id per flushed job. Jobs are handed out in flush order, not arrival order.
//!
//! Constraints become ids of our `ConstraintSet` through [`ConstraintRegistry`],
//! reported in [`ReadReport::mappings`]; a 65th distinct constraint is an error.

pub mod constraints;
pub mod event;
mod source;

pub use constraints::ConstraintRegistry;
pub use event::{Event, EventType, RawConstraint};

use super::{ReadReport, TraceError, TraceJob, TraceTask};
use common::{ConstraintSet, Micros, Resources};
use source::{parse_err, Source};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// How the events are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoogleFormat {
    Csv,
    JsonLines,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoogleConfig {
    /// Millicores that a normalised `cpus` of 1.0 stands for (the trace normalises to
    /// its largest machine and does not publish the unit: an assumption to state).
    pub machine_cpu_millis: u64,
    /// MiB that a normalised `memory` of 1.0 stands for (likewise).
    pub machine_memory_mb: u64,
    /// The most jobs held open at once.
    pub max_open_jobs: usize,
}

impl Default for GoogleConfig {
    fn default() -> Self {
        GoogleConfig {
            machine_cpu_millis: 64_000,
            machine_memory_mb: 256 * 1024,
            max_open_jobs: 100_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Finished(Micros),
    Ended(&'static str),
}

#[derive(Debug)]
struct Instance {
    submit: Option<u64>,
    schedule: Option<u64>,
    resources: Option<Resources>,
    constraints: ConstraintSet,
    state: State,
}

#[derive(Debug)]
struct OpenJob {
    seq: u64,
    open: usize,
    instances: HashMap<u32, Instance>,
}

/// Streams [`TraceJob`]s out of Google v3 instance events. See the module docs.
#[derive(Debug)]
pub struct GoogleReader<R: Read> {
    source: Source<R>,
    path: PathBuf,
    cfg: GoogleConfig,
    open: HashMap<u64, OpenJob>,
    by_age: BTreeMap<u64, u64>,
    next_seq: u64,
    flushed: HashSet<u64>,
    ready: VecDeque<TraceJob>,
    registry: ConstraintRegistry,
    latest_arrival: Micros,
    report: ReadReport,
    done: bool,
}

impl GoogleReader<File> {
    pub fn open(path: &Path, format: GoogleFormat, cfg: GoogleConfig) -> Result<Self, TraceError> {
        let file = File::open(path).map_err(|source| TraceError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(GoogleReader::new(file, path, format, cfg))
    }
}

impl<R: Read> GoogleReader<R> {
    pub fn new(input: R, path: &Path, format: GoogleFormat, cfg: GoogleConfig) -> Self {
        let source = match format {
            GoogleFormat::Csv => Source::csv(input),
            GoogleFormat::JsonLines => Source::json_lines(input),
        };
        GoogleReader {
            source,
            path: path.to_owned(),
            cfg,
            open: HashMap::new(),
            by_age: BTreeMap::new(),
            next_seq: 0,
            flushed: HashSet::new(),
            ready: VecDeque::new(),
            registry: ConstraintRegistry::default(),
            latest_arrival: Micros::ZERO,
            report: ReadReport::default(),
            done: false,
        }
    }

    /// What was read, dropped and kept so far, with the constraint mapping.
    pub fn report(&self) -> &ReadReport {
        &self.report
    }

    /// The constraint ids assigned so far.
    pub fn constraints(&self) -> &ConstraintRegistry {
        &self.registry
    }

    fn parse_err(&self, line: u64, field: &str, reason: String) -> TraceError {
        parse_err(&self.path, line, field, reason)
    }

    fn read_event(&mut self) -> Result<Option<(u64, event::Parsed)>, TraceError> {
        self.source.next_event(&self.path)
    }

    fn resources(&mut self, request: Option<(f64, f64)>) -> Option<Resources> {
        let (cpus, mem) = request?;
        if !(0.0..=1.0).contains(&cpus) || !(0.0..=1.0).contains(&mem) {
            self.report
                .caveat("resource_request: outside 0-1 (resources unknown)");
            return None;
        }
        Some(Resources::new(
            (cpus * self.cfg.machine_cpu_millis as f64).round() as u64,
            (mem * self.cfg.machine_memory_mb as f64).round() as u64,
        ))
    }

    fn apply(&mut self, line: u64, ev: Event) -> Result<(), TraceError> {
        if self.flushed.contains(&ev.collection_id) {
            self.report.drop("event for a job already flushed");
            return Ok(());
        }
        let mut constraints = None;
        if !ev.constraints.is_empty() {
            let known = self.registry.len();
            let set = self
                .registry
                .map(&ev.constraints)
                .map_err(|r| self.parse_err(line, "constraint", r))?;
            if self.registry.len() != known {
                self.report.mappings = self.registry.describe_all();
            }
            constraints = Some(set);
        }
        let resources = self.resources(ev.request);
        if !self.open.contains_key(&ev.collection_id) {
            if self.open.len() >= self.cfg.max_open_jobs {
                self.report.limit(format!(
                    "open-job cap of {} hit (oldest job flushed early)",
                    self.cfg.max_open_jobs
                ));
                if let Some((_, oldest)) = self.by_age.pop_first() {
                    self.flush(
                        oldest,
                        "task: no FINISH when the open-job cap flushed its job",
                    );
                }
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            self.by_age.insert(seq, ev.collection_id);
            self.open.insert(
                ev.collection_id,
                OpenJob {
                    seq,
                    open: 0,
                    instances: HashMap::new(),
                },
            );
        }
        let Some(job) = self.open.get_mut(&ev.collection_id) else {
            return Ok(());
        };
        let inst = job.instances.entry(ev.instance_index).or_insert_with(|| {
            job.open += 1;
            Instance {
                submit: None,
                schedule: None,
                resources: None,
                constraints: ConstraintSet::EMPTY,
                state: State::Open,
            }
        });
        if inst.state != State::Open {
            if ev.kind != EventType::Submit {
                self.report
                    .caveat("event after its instance ended (ignored)");
                return Ok(());
            }
            self.report.caveat("instance resubmitted after it ended");
            inst.state = State::Open;
            inst.schedule = None;
            job.open += 1;
        }
        if resources.is_some() {
            inst.resources = resources;
        }
        if let Some(set) = constraints {
            inst.constraints = set;
        }
        match ev.kind {
            EventType::Submit => {
                inst.submit.get_or_insert(ev.time);
            }
            EventType::Schedule => inst.schedule = Some(ev.time),
            EventType::Evict => inst.schedule = None,
            EventType::Finish => {
                inst.state = match inst.schedule {
                    Some(s) => State::Finished(Micros(ev.time.saturating_sub(s))),
                    None => State::Ended("task: FINISH without SCHEDULE"),
                }
            }
            EventType::Fail => inst.state = State::Ended("task: no FINISH (FAIL)"),
            EventType::Kill => inst.state = State::Ended("task: no FINISH (KILL)"),
            EventType::Lost => inst.state = State::Ended("task: no FINISH (LOST)"),
            EventType::Queue
            | EventType::Enable
            | EventType::UpdatePending
            | EventType::UpdateRunning => {}
        }
        if inst.state != State::Open {
            job.open -= 1;
            if job.open == 0 {
                let seq = job.seq;
                self.by_age.remove(&seq);
                self.flush(ev.collection_id, "task: no FINISH");
            }
        }
        Ok(())
    }

    /// Hands out job `cid` (if any of its tasks finished); open tasks count as `why`.
    fn flush(&mut self, cid: u64, why: &'static str) {
        let Some(job) = self.open.remove(&cid) else {
            return;
        };
        self.flushed.insert(cid);
        let mut instances: Vec<(u32, Instance)> = job.instances.into_iter().collect();
        instances.sort_unstable_by_key(|(i, _)| *i);
        let mut tasks = Vec::new();
        let mut arrival = u64::MAX;
        for (_, inst) in instances {
            match (inst.state, inst.submit) {
                (State::Open, _) => self.report.drop(why),
                (State::Ended(reason), _) => self.report.drop(reason),
                (State::Finished(_), None) => self.report.drop("task: no SUBMIT"),
                (State::Finished(duration), Some(submit)) => {
                    arrival = arrival.min(submit);
                    tasks.push(TraceTask {
                        duration,
                        resources: inst.resources,
                        constraints: Some(inst.constraints),
                        stage: None,
                    });
                }
            }
        }
        if tasks.is_empty() {
            self.report.drop("job with no finished task");
            return;
        }
        let arrival = Micros(arrival);
        if arrival < self.latest_arrival {
            self.report.limit("job arrival out of order");
        }
        self.latest_arrival = self.latest_arrival.max(arrival);
        self.report.jobs += 1;
        self.report.tasks += tasks.len() as u64;
        self.ready.push_back(TraceJob {
            id: cid,
            arrival,
            queue: None,
            stages: Vec::new(),
            tasks,
        });
    }
}

impl<R: Read> Iterator for GoogleReader<R> {
    type Item = Result<TraceJob, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(job) = self.ready.pop_front() {
                return Some(Ok(job));
            }
            if self.done {
                return None;
            }
            match self.read_event() {
                Ok(Some((line, parsed))) => {
                    self.report.records += 1;
                    match parsed {
                        Ok(ev) => {
                            if let Err(e) = self.apply(line, ev) {
                                return Some(Err(e));
                            }
                        }
                        Err(reason) => self.report.drop(reason),
                    }
                }
                Ok(None) => {
                    self.done = true;
                    while let Some((_, cid)) = self.by_age.pop_first() {
                        self.flush(cid, "task: no FINISH at end of input");
                    }
                }
                Err(e) => {
                    if matches!(e, TraceError::Io { .. }) {
                        self.done = true;
                    }
                    return Some(Err(e));
                }
            }
        }
    }
}
