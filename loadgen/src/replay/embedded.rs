//! Embedded mode: N GMs, M LMs and K workers per LM in this process, the same actors
//! as the binaries, linked by actix mailboxes instead of HTTP and the broker. Needs
//! nothing installed. Must run inside an actix `System` on a tokio runtime.
//!
//! With [`EmbeddedConfig::exec`] the workers run burn and exec tasks for real (each
//! worker under `<data_dir>/lm<L>-w<S>/`, logs in its `tasks/<job>.<index>/`, see
//! [`task_log`]); without, such tasks fail at their worker saying so.

pub mod http;

use super::driver::{JobSubmission, SubmitError, Submitter};
use super::facts::ClusterFacts;
use actix::{Actor, Addr};
use anyhow::{anyhow, Context, Result};
use common::cluster::ClusterSpec;
use common::events::TaskEvent;
use common::fairness::FairnessConfig;
use common::messages::{LmSnapshot, WorkerReport};
use common::protocol::{GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::{Executor, GmId, LmId, Micros, TaskId};
use global_master::core::{GmConfig, GmInput};
use global_master::service::actor::deliver::{Deliver, LmLink};
use global_master::service::actor::lra_actor::{ended_tasks, TasksEnded};
use global_master::service::actor::queries::GetLoad;
use global_master::service::actor::{GmActor, SubmitJob, SubmitRefused};
use global_master::service::observe::report::RenderMetrics;
use local_master::service::actor::gm::FromGm;
use local_master::service::actor::workers::{FromWorker, Register};
use local_master::service::actor::{LmActor, PublishNow};
use local_master::service::orders::GmLink;
use megha_sim::sim::MercuryOptions;
use service_kit::links::{fn_link, LinkError, Sink};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use worker::exec::logs::Stream;
use worker::exec::{ExecSettings, Executors};
use worker::service::actor::{Assign, FromLm, WorkerActor};

#[derive(Clone, Debug)]
pub struct EmbeddedConfig {
    pub cluster: ClusterSpec,
    pub workers_per_lm: u32,
    pub heartbeat: Micros,
    pub publish_min_interval: Duration,
    pub batch_size: usize,
    pub max_queued: usize,
    /// User queues (the same for every GM and LM); `None`: one queue, no preemption.
    pub fairness: Option<Arc<FairnessConfig>>,
    /// QUEUEABLE work (Mercury) on every LM, worker and GM; `None`: LMs refuse it.
    pub mercury: Option<MercuryOptions>,
    /// The GM that places GUARANTEED work and LRAs (a `tune` of [`start_with`] may
    /// still change it).
    pub designated_gm: GmId,
    /// Run burn and exec tasks with these settings (each worker in a directory of
    /// its own under `data_dir`); `None`: only synthetic tasks run.
    pub exec: Option<ExecSettings>,
}

/// A worker's directory under the embedded cluster's exec data dir.
pub fn worker_dir(data_dir: &Path, lm: LmId, slot: u32) -> PathBuf {
    data_dir.join(format!("lm{}-w{slot}", lm.0))
}

/// A task's output (`stream`: stdout or stderr) as the worker that ran it last kept
/// it (or, with `attempt`, as the worker that ran that attempt kept it), read from
/// the exec data dir (the embedded GMs have no LM URLs to proxy logs through);
/// `None` if no worker has it.
pub fn task_log(
    data_dir: &Path,
    task: TaskId,
    stream: Stream,
    attempt: Option<u32>,
) -> Option<String> {
    let workers = std::fs::read_dir(data_dir).ok()?.flatten();
    if attempt.is_some() {
        let log = worker::exec::logs::Log {
            task,
            stream,
            attempt,
        };
        return workers
            .into_iter()
            .find_map(|w| worker::exec::logs::tail(&w.path().join("tasks"), log, None).ok());
    }
    let mut found: Option<(std::time::SystemTime, String)> = None;
    for entry in workers {
        let path = worker::exec::logs::task_dir(&entry.path().join("tasks"), task)
            .join(stream.file_name());
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        if found.as_ref().is_none_or(|(at, _)| modified > *at) {
            found = Some((modified, std::fs::read_to_string(&path).ok()?));
        }
    }
    found.map(|(_, text)| text)
}

#[derive(Debug)]
pub struct EmbeddedCluster {
    pub gms: Vec<Addr<GmActor>>,
    pub lms: Vec<Addr<LmActor>>,
    pub workers: Vec<Addr<WorkerActor>>,
}

fn mailbox<E: std::fmt::Display>(e: E) -> LinkError {
    LinkError::Unreachable(e.to_string())
}

/// Starts every role; `events` receives every task event.
pub async fn start(cfg: &EmbeddedConfig, events: Sink<Vec<TaskEvent>>) -> Result<EmbeddedCluster> {
    start_with(cfg, &|c| c, events).await
}

/// [`start`] with every GM's core configuration passed through `tune` (designated
/// GM, LRA placer, ...). The ends of tasks (finished, preempted) also go to the
/// designated GM, which forgets the tags of its LRA containers that ended.
pub async fn start_with(
    cfg: &EmbeddedConfig,
    tune: &dyn Fn(GmConfig) -> GmConfig,
    events: Sink<Vec<TaskEvent>>,
) -> Result<EmbeddedCluster> {
    let gm_slot: Arc<OnceLock<Vec<Addr<GmActor>>>> = Arc::new(OnceLock::new());
    let designated = tune(GmConfig {
        designated_gm: cfg.designated_gm,
        ..GmConfig::new(GmId(0), cfg.cluster.gms, 1)
    })
    .designated_gm
    .index();
    let to_designated = gm_slot.clone();
    let observer = events.clone();
    let lm_events: Sink<Vec<TaskEvent>> = Arc::new(move |batch: Vec<TaskEvent>| {
        let ended = ended_tasks(&batch);
        if !ended.is_empty() {
            if let Some(gm) = to_designated.get().and_then(|g| g.get(designated)) {
                gm.do_send(TasksEnded(ended));
            }
        }
        observer(batch);
    });
    let fanout = gm_slot.clone();
    let snapshots: Sink<LmSnapshot> = Arc::new(move |s: LmSnapshot| {
        if let Some(gms) = fanout.get() {
            for g in gms {
                g.do_send(Deliver(GmInput::Lm(LmToGm::State(s.clone()))));
            }
        }
    });
    let gms = cfg.cluster.gms;
    // LM messages (preempted tasks) go to their GM's mailbox (the GMs start after
    // the LMs).
    let gm_links: Vec<GmLink> = (0..gms as usize)
        .map(|g| {
            let slot = gm_slot.clone();
            fn_link(move |messages: Vec<LmToGm>| {
                let gm = slot.get().and_then(|all| all.get(g)).cloned();
                async move {
                    let gm =
                        gm.ok_or_else(|| LinkError::Unreachable(format!("gm{g} not started")))?;
                    for message in messages {
                        gm.send(Deliver(GmInput::Lm(message)))
                            .await
                            .map_err(mailbox)?;
                    }
                    Ok(())
                }
            })
        })
        .collect();
    let mut lms = Vec::new();
    let mut workers = Vec::new();
    for spec in &cfg.cluster.lms {
        let mut lm = LmActor::new(
            spec,
            gms,
            cfg.heartbeat,
            cfg.workers_per_lm,
            snapshots.clone(),
            lm_events.clone(),
            cfg.publish_min_interval,
        );
        if let Some(fairness) = &cfg.fairness {
            lm = lm.with_fairness(fairness.clone());
        }
        if let Some(mercury) = &cfg.mercury {
            lm = lm.with_queueable(mercury.lm_config());
        }
        let lm = lm.with_gms(gm_links.clone());
        let lm = lm.start();
        for slot in 0..cfg.workers_per_lm {
            let to_lm = lm.clone();
            let reports = fn_link(move |r: Vec<WorkerReport>| {
                let lm = to_lm.clone();
                async move {
                    lm.send(FromWorker(r.into_iter().map(WorkerToLm::Report).collect()))
                        .await
                        .map_err(mailbox)?
                        .map_err(LinkError::Unreachable)
                }
            });
            let mut w = WorkerActor::new(reports);
            if let Some(settings) = &cfg.exec {
                let settings = ExecSettings {
                    data_dir: worker_dir(&settings.data_dir, spec.id, slot),
                    ..settings.clone()
                };
                let dir = settings.data_dir.display().to_string();
                let exec = Executors::new(settings)
                    .with_context(|| format!("cannot make the worker data dir {dir}"))?;
                w = w.with_executors(exec, Executor::Synthetic);
            }
            if let Some(mercury) = &cfg.mercury {
                w = w.with_queueing(mercury.queue_order, mercury.cap);
            }
            let w = w.start();
            let to_w = w.clone();
            let link = fn_link(move |orders: Vec<LmToWorker>| {
                let w = to_w.clone();
                async move { w.send(FromLm(orders)).await.map_err(mailbox) }
            });
            let assignment = lm
                .send(Register {
                    slot,
                    url: String::new(),
                    link,
                    holding: Vec::new(),
                    ended: Vec::new(),
                    // In-process: registered once, never repeated.
                    process: None,
                })
                .await?
                .map_err(|e| anyhow!(e))?;
            w.send(Assign(assignment)).await?;
            workers.push(w);
        }
        lms.push(lm);
    }
    let mut gm_addrs = Vec::new();
    for g in 0..gms {
        let links: Vec<LmLink> = lms
            .iter()
            .map(|lm| {
                let lm = lm.clone();
                fn_link(move |message: GmToLm| {
                    let lm = lm.clone();
                    async move {
                        match lm.send(FromGm(message)).await {
                            Ok(Ok(answer)) => Ok::<LmToGm, LinkError>(answer),
                            Ok(Err(e)) => Err(LinkError::Failed(e.to_string())),
                            Err(e) => Err(mailbox(e)),
                        }
                    }
                })
            })
            .collect();
        let mut config = GmConfig {
            batch_size: cfg.batch_size,
            fairness: cfg.fairness.clone(),
            designated_gm: cfg.designated_gm,
            ..GmConfig::new(GmId(g), gms, lms.len() as u16)
        };
        if let Some(mercury) = &cfg.mercury {
            config = mercury.gm_config(config);
        }
        let config = tune(config);
        gm_addrs.push(GmActor::new(config, links, events.clone(), cfg.max_queued).start());
    }
    let _ = gm_slot.set(gm_addrs.clone());
    for lm in &lms {
        lm.send(PublishNow).await?;
    }
    Ok(EmbeddedCluster {
        gms: gm_addrs,
        lms,
        workers,
    })
}

/// Submits straight into the GM actors' mailboxes.
/// What the events do not say, asked of every GM actor: the cluster it sees and its
/// preemption counters (from its metrics page, as `loadgen replay` reads them).
pub async fn gm_facts(gms: &[Addr<GmActor>]) -> ClusterFacts {
    let mut facts = ClusterFacts::default();
    for gm in gms {
        match (gm.send(GetLoad).await, gm.send(RenderMetrics).await) {
            (Ok(load), Ok(metrics)) => facts.add_gm(load.nodes, load.capacity, &metrics.encode()),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "cannot read a GM's cluster view and counters")
            }
        }
    }
    facts
}

pub fn submitter(gms: Vec<Addr<GmActor>>) -> Submitter {
    submitter_routed(gms, None)
}

/// [`submitter`], with jobs holding GUARANTEED (or long-running) tasks sent to the
/// `designated` GM, as the other GMs' HTTP APIs forward them.
pub fn submitter_routed(gms: Vec<Addr<GmActor>>, designated: Option<usize>) -> Submitter {
    let gms = Arc::new(gms);
    Arc::new(move |gm: usize, job: JobSubmission| {
        let central = job.tasks.iter().any(|t| t.kind.needs_designated_gm());
        let gm = match designated {
            Some(d) if central => d,
            _ => gm,
        };
        let addr = gms[gm % gms.len()].clone();
        Box::pin(async move {
            let submit = SubmitJob {
                tasks: job.tasks,
                retry: None,
                user: None,
                dag: job.dag,
                admin: true,
                idempotency: None,
                names: Default::default(),
                after_elsewhere: Vec::new(),
                spec: None,
                utility: None,
                gang: job.gang,
            };
            match addr.send(submit).await {
                Ok(Ok((job, _))) => Ok(job),
                Ok(Err(SubmitRefused::QueueFull { .. })) => {
                    Err(SubmitError::Busy(Duration::from_millis(50)))
                }
                Ok(Err(e @ (SubmitRefused::UnknownJob { .. } | SubmitRefused::OtherGm { .. }))) => {
                    Err(SubmitError::Refused(format!("{e:?}")))
                }
                Ok(Err(SubmitRefused::ShuttingDown)) => {
                    Err(SubmitError::Refused("GM shutting down".into()))
                }
                Ok(Err(SubmitRefused::JournalFailed)) => {
                    Err(SubmitError::Refused("GM cannot write its journal".into()))
                }
                Err(e) => Err(SubmitError::Refused(e.to_string())),
            }
        })
    })
}
