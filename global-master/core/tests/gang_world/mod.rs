//! The world of the gang tests (`gang.rs`, `gang_restart.rs`): one GM, four LMs
//! over the pure cores, every message moved by hand.
#![allow(dead_code, unused_imports)]

pub use common::cluster::{LmSpec, NodeSpec};
pub use common::events::TaskEventKind;
pub use common::gang::GangSpec;
pub use common::messages::{
    GangOp, GangOutcome, LaunchBatch, LaunchRequest, Placement, WorkerReport,
};
pub use common::protocol::{ClientToGm, GmToLm, LmToGm, LmToWorker, WorkerToLm};
pub use common::retry::RetryPolicy;
pub use common::{ConstraintSet, GmId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
pub use gm_core::gang::GangConfig;
pub use gm_core::{GlobalMaster, GmConfig, GmInput, GmOutput};
pub use lm_core::{LmInput, LocalMaster};
pub use std::collections::BTreeSet;

pub const LMS: u16 = 4;
pub const HOLD: Micros = Micros(10_000_000);
pub const RESTART: Micros = Micros(2_000_000);

pub struct World {
    pub gm: GlobalMaster,
    pub lms: Vec<LocalMaster>,
    /// Tasks the LMs launched (their `Launched` events), in order.
    pub launched: Vec<TaskId>,
    /// Start orders the LMs sent their workers.
    pub start_orders: usize,
    /// Kill orders the LMs sent their workers: (task, run).
    pub kills: Vec<(TaskId, u32)>,
}

/// Each LM: one node of 2 cores (one GM: every node is the GM's own).
pub fn world() -> World {
    let node = NodeSpec {
        capacity: Resources::cores(2, 2048),
        constraints: ConstraintSet::EMPTY,
    };
    let mut lms: Vec<LocalMaster> = (0..LMS)
        .map(|l| {
            let spec = LmSpec {
                id: LmId(l),
                partitions: vec![vec![node]],
            };
            LocalMaster::new(&spec, 1, lm_core::LmConfig::default(), Micros(0))
        })
        .collect();
    let mut gm = GlobalMaster::new(GmConfig::new(GmId(0), 1, LMS));
    gm.set_gang_config(GangConfig {
        hold_for: HOLD,
        retry_after: Micros(1_000),
        restart_after: RESTART,
    });
    for lm in &mut lms {
        let snapshot = lm.snapshot(Micros(0));
        gm.step(Micros(0), GmInput::Lm(LmToGm::State(snapshot)));
    }
    World {
        gm,
        lms,
        launched: Vec::new(),
        start_orders: 0,
        kills: Vec::new(),
    }
}

pub fn gang_of(job: u64, n: u32) -> ClientToGm {
    ClientToGm::SubmitGang {
        tasks: (0..n)
            .map(|i| {
                TaskSpec::short(
                    TaskId::new(job, i),
                    Resources::cores(1, 100),
                    Micros(1_000_000),
                )
            })
            .collect(),
        retry: RetryPolicy::default(),
        gang: GangSpec::all(n, Micros(600_000_000)),
    }
}

impl World {
    /// One GM -> LM message delivered: the LM's messages for the GM come back.
    pub fn deliver(&mut self, now: Micros, message: GmToLm) -> Vec<LmToGm> {
        let l = message.lm().index();
        let out = self.lms[l]
            .step(now, LmInput::Gm(message))
            .expect("for this LM");
        for e in &out.events {
            if let TaskEventKind::Launched { .. } = e.kind {
                self.launched.push(e.task);
            }
        }
        self.start_orders += (out.to_workers.iter())
            .filter(|o| matches!(o, LmToWorker::Start(_)))
            .count();
        self.kills
            .extend(out.to_workers.iter().filter_map(|o| match o {
                LmToWorker::Kill(k) => Some((k.task, k.attempt)),
                _ => None,
            }));
        out.to_gms.into_iter().map(|(_, m)| m).collect()
    }

    /// Moves messages until none is left (every one delivered, in order).
    pub fn run(&mut self, now: Micros, mut to_lms: Vec<GmToLm>) {
        while !to_lms.is_empty() {
            let mut answers = Vec::new();
            for m in std::mem::take(&mut to_lms) {
                answers.extend(self.deliver(now, m));
            }
            for a in answers {
                to_lms.extend(self.gm.step(now, GmInput::Lm(a)).to_lms);
            }
        }
    }

    pub fn free_everywhere(&self) -> bool {
        (self.lms.iter()).all(|lm| lm.free() == &lm.topology().capacity[..])
    }
}

/// The gang requests of one kind ("reserve", "commit", "release") among a GM's
/// output: (LM, generation).
pub fn gang_ops(out: &GmOutput, op: &str) -> Vec<(LmId, u32)> {
    (out.to_lms.iter())
        .filter_map(|m| match m {
            GmToLm::Gang(g) if g.op.label() == op => Some((g.lm, g.generation)),
            _ => None,
        })
        .collect()
}

/// The kills confirmed by the workers (as their reports would), at every LM.
pub fn workers_confirm_kills(w: &mut World, now: Micros) {
    for (task, attempt) in std::mem::take(&mut w.kills) {
        for lm in &mut w.lms {
            let Some(node) = lm
                .running()
                .get(&task)
                .map(|a| a.node)
                .or_else(|| lm.is_cancelling(task).then_some(NodeId(0)))
            else {
                continue;
            };
            let report = WorkerReport::Killed {
                node,
                task,
                attempt,
                at: now,
            };
            lm.step(now, LmInput::Worker(WorkerToLm::Report(report)))
                .expect("a report for this LM");
        }
    }
}

/// The gang requests of one kind among messages to LMs: (LM, generation).
pub fn gang_ops_of(to_lms: &[GmToLm], op: &str) -> Vec<(LmId, u32)> {
    (to_lms.iter())
        .filter_map(|m| match m {
            GmToLm::Gang(g) if g.op.label() == op => Some((g.lm, g.generation)),
            _ => None,
        })
        .collect()
}
