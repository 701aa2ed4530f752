//! Embedded mode: N GMs, M LMs and K workers per LM in this process, the same actors
//! as the binaries, linked by actix mailboxes instead of HTTP and the broker. Needs
//! nothing installed. Must run inside an actix `System` on a tokio runtime.

use super::driver::{SubmitError, Submitter};
use actix::{Actor, Addr};
use anyhow::{anyhow, Result};
use common::cluster::ClusterSpec;
use common::events::TaskEvent;
use common::messages::{LaunchBatch, LaunchResponse, LmSnapshot, StartTask, WorkerReport};
use common::{GmId, Micros};
use global_master::core::GmConfig;
use global_master::service::actor::{ApplySnapshot, GmActor, LaunchLink, Submit, SubmitRefused};
use global_master::service::api::NewTask;
use local_master::service::actor::{Launch, LmActor, PublishNow, Register, Reports};
use service_kit::links::{fn_link, LinkError, Sink};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use worker::service::actor::{Assign, Start, WorkerActor};

#[derive(Clone, Debug)]
pub struct EmbeddedConfig {
    pub cluster: ClusterSpec,
    pub workers_per_lm: u32,
    pub heartbeat: Micros,
    pub publish_min_interval: Duration,
    pub batch_size: usize,
    pub max_queued: usize,
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
    let gm_slot: Arc<OnceLock<Vec<Addr<GmActor>>>> = Arc::new(OnceLock::new());
    let fanout = gm_slot.clone();
    let snapshots: Sink<LmSnapshot> = Arc::new(move |s: LmSnapshot| {
        if let Some(gms) = fanout.get() {
            for g in gms {
                g.do_send(ApplySnapshot(s.clone()));
            }
        }
    });
    let gms = cfg.cluster.gms;
    let mut lms = Vec::new();
    let mut workers = Vec::new();
    for spec in &cfg.cluster.lms {
        let lm = LmActor::new(
            spec,
            gms,
            cfg.heartbeat,
            cfg.workers_per_lm,
            snapshots.clone(),
            events.clone(),
            cfg.publish_min_interval,
        )
        .start();
        for slot in 0..cfg.workers_per_lm {
            let to_lm = lm.clone();
            let reports = fn_link(move |r: Vec<WorkerReport>| {
                let lm = to_lm.clone();
                async move { lm.send(Reports(r)).await.map_err(mailbox) }
            });
            let w = WorkerActor::new(reports).start();
            let to_w = w.clone();
            let starts = fn_link(move |orders: Vec<StartTask>| {
                let w = to_w.clone();
                async move { w.send(Start(orders)).await.map_err(mailbox) }
            });
            let assignment = lm
                .send(Register {
                    slot,
                    url: String::new(),
                    link: starts,
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
        let links: Vec<LaunchLink> = lms
            .iter()
            .map(|lm| {
                let lm = lm.clone();
                fn_link(move |batch: LaunchBatch| {
                    let lm = lm.clone();
                    async move {
                        match lm.send(Launch(batch)).await {
                            Ok(Ok(r)) => Ok::<LaunchResponse, LinkError>(r),
                            Ok(Err(e)) => Err(LinkError::Failed(e)),
                            Err(e) => Err(mailbox(e)),
                        }
                    }
                })
            })
            .collect();
        let config = GmConfig {
            batch_size: cfg.batch_size,
            ..GmConfig::new(GmId(g), gms, lms.len() as u16)
        };
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
pub fn submitter(gms: Vec<Addr<GmActor>>) -> Submitter {
    let gms = Arc::new(gms);
    Arc::new(move |gm: usize, tasks: Vec<NewTask>| {
        let addr = gms[gm % gms.len()].clone();
        Box::pin(async move {
            match addr.send(Submit(tasks)).await {
                Ok(Ok((job, _))) => Ok(job),
                Ok(Err(SubmitRefused::QueueFull { .. })) => {
                    Err(SubmitError::Busy(Duration::from_millis(50)))
                }
                Ok(Err(SubmitRefused::ShuttingDown)) => {
                    Err(SubmitError::Refused("GM shutting down".into()))
                }
                Err(e) => Err(SubmitError::Refused(e.to_string())),
            }
        })
    })
}
