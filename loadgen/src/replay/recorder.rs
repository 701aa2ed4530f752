//! Rebuilds per-task records from the event stream of a running system, so that a
//! replay writes the same `tasks.csv` / `summary.json` as the simulator.
//!
//! Arrival is when loadgen submitted the job (its own clock; every process on one
//! machine shares it). The components are attributed from the events as they are
//! observed: framework queuing until the GM's last dispatch, processing until the LM
//! launched the task (including the GM -> LM hop), communication until the worker
//! started it. Events may arrive twice (at-least-once delivery): duplicates, same task,
//! kind and timestamp, are dropped. Events for jobs not (yet) known are held until
//! the submission answer names the job.

use super::event_log::LoggedEvent;
use common::events::{TaskEvent, TaskEventKind};
use common::{JobId, Micros, QueueId, Resources, TaskId, TaskKind};
use megha_sim::sim::ledger::{Decision, TaskRecord};
use megha_sim::sim::workload::Job;
use megha_sim::sim::{Branches, Run, SimCounters, SimOutcome};
use std::collections::{HashMap, HashSet};

#[derive(Debug)]
pub struct Recorder {
    t0: Micros,
    records: Vec<TaskRecord>,
    job_offset: Vec<usize>,
    job_len: Vec<usize>,
    by_job: HashMap<JobId, usize>,
    orphans: HashMap<JobId, Vec<TaskEvent>>,
    seen: HashSet<(TaskId, u64, &'static str)>,
    starts: Vec<u32>,
    terminal: Vec<bool>,
    submitted: Vec<bool>,
    waited: Vec<bool>,
    /// Runs again after a failure (the job's retry policy), seen as a `Requeued`
    /// event after the failure.
    retries: Vec<u32>,
    /// Runs that ended failed (`Failed` events): each but a final one was retried,
    /// whatever order the events of the LM (`Failed`) and the GM (`Requeued`) came in.
    failures: Vec<u32>,
    /// Per task: what a run of it holds (for the per-queue shares).
    holds: Vec<(QueueId, Resources, TaskKind)>,
    /// Per task: its run in progress (index into `runs`).
    open: Vec<Option<usize>>,
    runs: Vec<Run>,
    done: usize,
    /// Per task whose dispatch named a branch of its job's utility tree: the branch
    /// (its last placement's), for `tasks.csv`.
    branches: Branches,
    pub counters: SimCounters,
    /// Every event applied (duplicates dropped), in the order it was received:
    /// `events.jsonl` of the replay's report.
    log: Vec<LoggedEvent>,
}

impl Recorder {
    /// Records for every task of `jobs` (trace order); times are relative to `t0`.
    pub fn new(jobs: &[Job], t0: Micros) -> Recorder {
        let mut records = Vec::new();
        let mut job_offset = Vec::new();
        let mut job_len = Vec::new();
        let mut holds = Vec::new();
        for (k, job) in jobs.iter().enumerate() {
            job_offset.push(records.len());
            job_len.push(job.tasks.len());
            for t in &job.tasks {
                let mut r = TaskRecord::new(k as u64, t.id.index, job.arrival);
                r.queue = t.queue;
                records.push(r);
                holds.push((t.queue, t.resources, t.kind));
            }
        }
        let n = records.len();
        Recorder {
            t0,
            records,
            job_offset,
            job_len,
            by_job: HashMap::new(),
            orphans: HashMap::new(),
            seen: HashSet::new(),
            starts: vec![0; n],
            terminal: vec![false; n],
            submitted: vec![false; n],
            waited: vec![false; n],
            retries: vec![0; n],
            failures: vec![0; n],
            holds,
            open: vec![None; n],
            runs: Vec::new(),
            done: 0,
            branches: Branches::default(),
            counters: SimCounters::default(),
            log: Vec::new(),
        }
    }

    /// Every event applied so far, in the order received (see [`LoggedEvent`]),
    /// taken out of the recorder.
    pub fn take_log(&mut self) -> Vec<LoggedEvent> {
        std::mem::take(&mut self.log)
    }

    pub fn total(&self) -> usize {
        self.records.len()
    }

    /// Tasks finished or reported unplaceable.
    pub fn done(&self) -> usize {
        self.done
    }

    /// The submission of trace job `k` was accepted as `job` at `arrival` (absolute).
    pub fn submitted(&mut self, k: usize, job: JobId, arrival: Micros) {
        let Some(&offset) = self.job_offset.get(k) else {
            return;
        };
        let rel = arrival.since(self.t0);
        for i in offset..offset + self.job_len[k] {
            let r = &mut self.records[i];
            r.arrival = rel;
            r.mark = rel;
            self.submitted[i] = true;
        }
        self.by_job.insert(job, k);
        if let Some(held) = self.orphans.remove(&job) {
            for ev in held {
                self.apply(ev);
            }
        }
    }

    pub fn apply(&mut self, ev: TaskEvent) {
        let Some(&k) = self.by_job.get(&ev.task.job) else {
            self.orphans.entry(ev.task.job).or_default().push(ev);
            return;
        };
        let key = service_kit::topology::event_key(&ev.kind);
        if !self.seen.insert((ev.task, ev.at.0, key)) {
            return;
        }
        if ev.task.index as usize >= self.job_len[k] {
            return;
        }
        self.counters.events += 1;
        let i = self.job_offset[k] + ev.task.index as usize;
        let at = ev.at.since(self.t0);
        self.log.push(LoggedEvent {
            job: k as u64,
            task: ev.task.index,
            at_s: at.as_secs_f64(),
            kind: ev.kind.clone(),
        });
        let r = &mut self.records[i];
        match ev.kind {
            TaskEventKind::Queued { gm } => r.gm = Some(gm),
            TaskEventKind::Dispatched {
                lm,
                node,
                placement,
                branch,
                ..
            } => {
                r.attempts += 1;
                // Events of different services may arrive out of order: a dispatch
                // seen after the launch (of a later attempt) does not move the task.
                if r.launch.is_none() {
                    r.lm = Some(lm);
                    r.node = Some(node);
                    r.decision = Decision::from_placement(placement);
                    let id = TaskId::new(r.job, r.index);
                    match branch {
                        Some(b) => self.branches.insert(id, b.into()),
                        None => self.branches.remove(&id),
                    };
                }
                r.queued_until(at);
            }
            TaskEventKind::Requeued { .. } => {
                self.counters.requeues += 1;
                self.waited[i] = true;
                // Requeued after it failed (or was lost): its job's retry policy runs
                // it again, so it has not ended, and it may start once more.
                if self.terminal[i] && self.records[i].finish.is_none() {
                    self.terminal[i] = false;
                    self.done -= 1;
                    self.retries[i] += 1;
                }
            }
            TaskEventKind::Unplaceable { .. } => {
                r.decision = Decision::Unplaceable;
                self.mark_terminal(i);
            }
            TaskEventKind::Launched { lm, node } => {
                // Launched with no live dispatch after an attempt: the GM's preemption
                // request launched it (the LM picks the node, no dispatch event).
                if r.decision == Decision::Pending && r.attempts > 0 {
                    r.decision = Decision::Preemption;
                }
                r.lm = Some(lm);
                r.node = Some(node);
                r.launch = Some(at);
                r.processed_until(at);
                if r.decision == Decision::Repartition {
                    self.counters.repartitions += 1;
                }
            }
            TaskEventKind::Rejected { .. } => {
                r.rejections += 1;
                r.decision = Decision::Pending;
                self.counters.lm_rejections += 1;
            }
            TaskEventKind::Started { lm, node } => {
                r.lm = Some(lm);
                r.node = Some(node);
                r.start = Some(at);
                r.in_flight_until(at);
                self.starts[i] += 1;
                // A start after a failure whose retry (`Requeued`, from the GM) came
                // before the failure itself (`Failed`, from the LM): not ended.
                if self.terminal[i] && self.records[i].finish.is_none() {
                    self.terminal[i] = false;
                    self.done -= 1;
                }
                if self.open[i].is_none() {
                    let (queue, resources, kind) = self.holds[i];
                    self.open[i] = Some(self.runs.len());
                    self.runs.push(Run {
                        task: ev.task,
                        kind,
                        promoted_at: None,
                        queue,
                        resources,
                        start: at,
                        end: None,
                    });
                }
            }
            TaskEventKind::Finished { .. } => {
                r.finish = Some(at);
                self.end_run(i, at);
                self.mark_terminal(i);
            }
            TaskEventKind::Preempted { lost, .. } => {
                self.end_run(i, at);
                let r = &mut self.records[i];
                // The run ends here; the task is queued again and starts afresh.
                r.preemptions += 1;
                r.lost_work += lost;
                // As the simulator counts them: every preemption, and among them the
                // QUEUEABLE tasks killed (reclaimed, shed or preempted).
                if self.holds[i].2 == TaskKind::Queueable {
                    self.counters.queueable_kills += 1;
                }
                self.counters.preemptions += 1;
                self.counters.wasted += lost;
                self.waited[i] = true;
            }
            // An end too (an exec task's non-zero exit, a start failure, a task the
            // GM gave up on at shutdown): the replay stops waiting for it; with no
            // finish time it counts as never finished in the reports.
            TaskEventKind::Failed { .. } | TaskEventKind::Cancelled { .. } => {
                if matches!(ev.kind, TaskEventKind::Failed { .. }) {
                    self.failures[i] += 1;
                }
                self.end_run(i, at);
                self.mark_terminal(i);
            }
            TaskEventKind::Promoted { .. } => self.counters.promoted += 1,
            // Its GM stopped with it queued and resumes it from its journal once
            // restarted: not an end; it waited (at least) until then.
            TaskEventKind::Suspended { .. } => self.waited[i] = true,
        }
    }

    fn end_run(&mut self, i: usize, at: Micros) {
        if let Some(run) = self.open[i].take() {
            self.runs[run].end = Some(at);
        }
    }

    fn mark_terminal(&mut self, i: usize) {
        if !self.terminal[i] {
            self.terminal[i] = true;
            self.done += 1;
        }
    }

    /// (trace job, task index) of submitted tasks that never finished.
    pub fn unfinished(&self) -> Vec<(u64, u32)> {
        self.filter(|i, s| s.submitted[i] && !s.terminal[i])
    }

    /// Tasks never accepted by a GM.
    pub fn unsubmitted(&self) -> Vec<(u64, u32)> {
        self.filter(|i, s| !s.submitted[i])
    }

    /// Tasks that started more than once per run (once, plus once per preemption and
    /// per retry after a failure): must be empty. Retries are counted from the
    /// `Requeued` events that followed a failure and, since those (from the GM) may
    /// overtake the `Failed` event (from the LM, e.g. one that was cut off the network
    /// when it declared the run lost), also as the failed runs that were not the
    /// task's last end.
    pub fn started_twice(&self) -> Vec<(u64, u32)> {
        self.filter(|i, s| {
            let ended_failed = u32::from(s.terminal[i] && s.records[i].finish.is_none());
            let retried = s.retries[i].max(s.failures[i].saturating_sub(ended_failed));
            s.starts[i] > 1 + s.records[i].preemptions + retried
        })
    }

    /// Allocation overhead samples (seconds): the allocation time of every started
    /// task that never waited for free resources (no `Requeued` event), so that what
    /// remains is scheduling, messaging and validation, not queueing for capacity.
    /// Also returns how many started tasks did wait.
    pub fn overhead(&self) -> (Vec<f64>, usize) {
        let mut samples = Vec::new();
        let mut waited = 0;
        for (i, r) in self.records.iter().enumerate() {
            match r.allocation() {
                Some(_) if self.waited[i] => waited += 1,
                Some(a) => samples.push(a.as_secs_f64()),
                None => {}
            }
        }
        (samples, waited)
    }

    fn filter(&self, keep: impl Fn(usize, &Recorder) -> bool) -> Vec<(u64, u32)> {
        (0..self.records.len())
            .filter(|&i| keep(i, self))
            .map(|i| (self.records[i].job, self.records[i].index))
            .collect()
    }

    pub fn into_outcome(self, span: Micros) -> SimOutcome {
        // From events alone: every task that started also finished, so the resources
        // it held went back.
        let drained = self
            .records
            .iter()
            .all(|r| r.start.is_none() || r.finish.is_some());
        SimOutcome {
            probe: None,
            branches: self.branches,
            records: self.records,
            counters: self.counters,
            span,
            drained,
            runs: self.runs,
        }
    }
}

#[cfg(test)]
mod tests;
