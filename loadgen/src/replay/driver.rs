//! The replay loop, independent of the transport: submits each job at its (sped-up)
//! arrival time through a [`Submitter`], feeds every event from the receiver to the
//! [`Recorder`], shows progress, and stops when every submitted task has finished or
//! been reported unplaceable, or when the timeout after the last arrival expires.

use super::facts::ClusterFacts;
use super::recorder::Recorder;
use common::dag::JobDag;
use common::events::TaskEvent;
use common::fairness::FairnessConfig;
use common::gang::GangSpec;
use common::{JobId, Micros};
use global_master::service::admission::api::NewTask;
use megha_sim::sim::workload::Job;
use megha_sim::sim::SimOutcome;
use service_kit::clock;
use service_kit::links::BoxFut;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Why a submission was not accepted.
#[derive(Debug, Clone)]
pub enum SubmitError {
    /// The GM is full: retry after this long (429 Retry-After).
    Busy(Duration),
    /// Refused for good (4xx) or the GM is unreachable.
    Refused(String),
}

/// One job as the replay submits it: its tasks, and its DAG when its tasks are in
/// stages (see `common::dag`).
#[derive(Clone, Debug)]
pub struct JobSubmission {
    pub tasks: Vec<NewTask>,
    pub dag: Option<Arc<JobDag>>,
    /// Its gang (docs/gangs.md), its timeout divided by the speed-up.
    pub gang: Option<GangSpec>,
}

/// Submits one job to GM number `gm`; answers the job id.
pub type Submitter =
    Arc<dyn Fn(usize, JobSubmission) -> BoxFut<Result<JobId, SubmitError>> + Send + Sync>;

#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Arrival times and task durations are divided by this.
    pub speedup: f64,
    /// At most this many tasks per second are submitted (None: the trace's pace).
    pub rate_cap: Option<f64>,
    /// How long after the last arrival to wait for tasks to finish.
    pub timeout: Duration,
    /// No progress bar.
    pub quiet: bool,
    /// GMs to spread jobs over, round-robin (without queues).
    pub gms: usize,
    /// User queues: each job goes to the GM serving its queue.
    pub queues: Option<Arc<FairnessConfig>>,
    /// Gangs (issue 37): per trace job id, its gang in trace time; such a job is
    /// submitted as one gang. `None`: no job is a gang.
    pub gangs: Option<Arc<Gangs>>,
}

/// The replayed jobs that are gangs, by trace job id (see [`ReplayOptions::gangs`]).
pub type Gangs = rustc_hash::FxHashMap<u64, GangSpec>;

#[derive(Debug)]
pub struct ReplayResult {
    pub outcome: SimOutcome,
    pub unfinished: Vec<(u64, u32)>,
    pub unsubmitted: Vec<(u64, u32)>,
    pub started_twice: Vec<(u64, u32)>,
    pub refusals: Vec<String>,
    pub wall_s: f64,
    /// See [`Recorder::overhead`].
    pub overhead_s: Vec<f64>,
    pub waited_for_resources: usize,
    /// What the events do not say, read from the GMs by the caller after the run.
    pub facts: ClusterFacts,
    /// Every event received, in order (`events.jsonl`).
    pub events: Vec<super::event_log::LoggedEvent>,
}

/// Converts a job's tasks for submission, durations divided by `speedup`.
pub fn job_tasks(job: &Job, speedup: f64) -> Vec<NewTask> {
    job.tasks
        .iter()
        .map(|t| NewTask {
            queue: t.queue,
            kind: t.kind,
            resources: t.resources,
            constraints: t.constraints,
            duration: Micros((t.duration.0 as f64 / speedup).round() as u64),
            tags: t.tags.iter().map(|s| s.to_string()).collect(),
            executor: t.executor.clone(),
            priority: 0,
        })
        .collect()
}

type Answer = (usize, Micros, Result<JobId, String>);

fn spawn_submissions(
    jobs: &[Job],
    submit: Submitter,
    opts: &ReplayOptions,
    tx: mpsc::UnboundedSender<Answer>,
) {
    let speedup = opts.speedup;
    let gms = opts.gms.max(1);
    let plan: Vec<(usize, Duration, JobSubmission, usize)> = jobs
        .iter()
        .enumerate()
        .map(|(k, j)| {
            let at = Duration::from_secs_f64(j.arrival.as_secs_f64() / speedup);
            let gm = super::queues::gm_for(j, opts.queues.as_deref(), k % gms);
            let gang = opts
                .gangs
                .as_ref()
                .and_then(|g| g.get(&j.id))
                .map(|g| GangSpec {
                    timeout: Micros((g.timeout.0 as f64 / speedup).round() as u64),
                    ..*g
                });
            let job = JobSubmission {
                tasks: job_tasks(j, speedup),
                dag: j.dag.clone(),
                gang,
            };
            (k, at, job, gm)
        })
        .collect();
    let cap = opts.rate_cap;
    tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut sent = 0usize;
        for (k, at, tasks, gm) in plan {
            let mut due = start + at;
            if let Some(cap) = cap {
                due = due.max(start + Duration::from_secs_f64(sent as f64 / cap));
            }
            tokio::time::sleep_until(due).await;
            sent += tasks.tasks.len();
            let (submit, tx) = (submit.clone(), tx.clone());
            tokio::spawn(async move {
                let arrival = clock::now();
                loop {
                    match submit(gm, tasks.clone()).await {
                        Ok(job) => {
                            let _ = tx.send((k, arrival, Ok(job)));
                            return;
                        }
                        Err(SubmitError::Busy(wait)) => tokio::time::sleep(wait).await,
                        Err(SubmitError::Refused(m)) => {
                            let _ = tx.send((k, arrival, Err(m)));
                            return;
                        }
                    }
                }
            });
        }
    });
}

/// Replays `jobs` and returns the rebuilt records.
pub async fn replay(
    jobs: &[Job],
    submit: Submitter,
    mut events: mpsc::UnboundedReceiver<TaskEvent>,
    opts: &ReplayOptions,
) -> ReplayResult {
    let started = Instant::now();
    let t0 = clock::now();
    let mut rec = Recorder::new(jobs, t0);
    let (tx, mut answers) = mpsc::unbounded_channel();
    spawn_submissions(jobs, submit, opts, tx);
    let last = jobs.iter().map(|j| j.arrival).max().unwrap_or_default();
    let deadline = tokio::time::Instant::now()
        + Duration::from_secs_f64(last.as_secs_f64() / opts.speedup)
        + opts.timeout;
    let bar = if opts.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(rec.total() as u64)
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} tasks done",
    ) {
        bar.set_style(style);
    }
    bar.set_message("replay");
    let mut answered = 0;
    let mut accepted_tasks = 0;
    let mut refusals = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        if answered == jobs.len() && rec.done() >= accepted_tasks {
            break;
        }
        tokio::select! {
            Some((k, arrival, result)) = answers.recv() => {
                answered += 1;
                match result {
                    Ok(job) => {
                        accepted_tasks += jobs[k].tasks.len();
                        rec.submitted(k, job, arrival);
                    }
                    Err(m) => refusals.push(format!("trace job {k}: {m}")),
                }
            }
            Some(ev) = events.recv() => {
                rec.apply(ev);
                while let Ok(ev) = events.try_recv() {
                    rec.apply(ev);
                }
            }
            _ = tick.tick() => bar.set_position(rec.done() as u64),
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    bar.finish_and_clear();
    let span = clock::now().since(t0);
    let (overhead_s, waited_for_resources) = rec.overhead();
    let events = rec.take_log();
    ReplayResult {
        events,
        overhead_s,
        waited_for_resources,
        unfinished: rec.unfinished(),
        unsubmitted: rec.unsubmitted(),
        started_twice: rec.started_twice(),
        refusals,
        outcome: rec.into_outcome(span),
        wall_s: started.elapsed().as_secs_f64(),
        facts: ClusterFacts::default(),
    }
}
