//! A worker actor with real executors and one node (4 cores, 4 GiB), its reports
//! captured with the time they reached the LM link. Shared by the tests and the
//! start-latency example.

use actix::prelude::*;
use common::messages::{WorkerAssignment, WorkerReport};
use common::{Executor, LmId, NodeId, Resources};
use service_kit::links::fn_link;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use worker::exec::{ExecSettings, Executors};
use worker::service::actor::{Assign, WorkerActor};

pub type Reports = mpsc::UnboundedReceiver<(Instant, WorkerReport)>;

/// Must run inside an actix system.
pub async fn one_node_worker(data_dir: &Path, cgroups: bool) -> (Addr<WorkerActor>, Reports) {
    let (tx, rx) = mpsc::unbounded_channel();
    let link = fn_link(move |reports: Vec<WorkerReport>| {
        for r in reports {
            let _ = tx.send((Instant::now(), r));
        }
        async { Ok(()) }
    });
    let exec = Executors::new(ExecSettings {
        grace: Duration::from_millis(200),
        keep_logs: 16,
        cgroups,
        // Tests get the helper built for them; the example finds it beside itself.
        helper: option_env!("CARGO_BIN_EXE_megha-task-exec").map(Into::into),
        ..ExecSettings::as_self(data_dir.to_owned())
    })
    .expect("data dir");
    println!("limits: {}", exec.limits().describe());
    let worker = WorkerActor::new(link)
        .with_executors(exec, Executor::Synthetic)
        .start();
    worker
        .send(Assign(WorkerAssignment {
            lm: LmId(0),
            slot: 0,
            nodes: vec![(NodeId(0), Resources::cores(4, 4096))],
            incarnation: 1,
            lease_ms: 0,
            orders_from: 0,
        }))
        .await
        .expect("assign");
    (worker, rx)
}
