//! One-line descriptions of events and messages for the history and the trace.

use super::event::{Ev, Item};
use common::messages::{LaunchOutcome, WorkerReport};
use common::protocol::{GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::TaskId;

pub(super) fn describe(ev: &Ev) -> String {
    match ev {
        Ev::Arrival(k) => format!("job {k} arrives"),
        Ev::Fault(f) => format!("FAULT {f}"),
        Ev::Pass(g, _) => format!("gm{g} pass"),
        Ev::Tick(l, _) => format!("lm{l} tick"),
        Ev::Wake(w, _) => format!("w{w} wake"),
        Ev::Fence(w, _) => format!("w{w} fence timer"),
        Ev::Attempt(c) => format!("call {c} attempt"),
        Ev::Timeout(c, a) => format!("call {c} attempt {a} timeout?"),
        Ev::Request(c, life, m) => {
            format!("call {c} (life {life}) reaches lm: {}", describe_request(m))
        }
        Ev::Answer(c, a, m) => format!("call {c} attempt {a} answered: {}", describe_lm_to_gm(m)),
        Ev::Busy(c, a) => format!("call {c} attempt {a} answered busy"),
        Ev::Pump(a, b) => format!("stream {a}->{b}"),
        Ev::State(g, m) => format!("gm{g} gets {}", describe_lm_to_gm(m)),
        Ev::Settle(c) => format!("call {c} unreachable"),
        Ev::GmTick(g, _) => format!("gm{g} wakes"),
        Ev::LmReconcile(g, _, l, _) => format!("gm{g} asks restarted lm{l} about its tasks"),
        Ev::ResumeAsk(g, _) => format!("gm{g} asks silent LMs again before resuming"),
    }
}

pub(super) fn tasks(ids: impl Iterator<Item = TaskId>) -> String {
    ids.map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}

pub(super) fn describe_request(m: &GmToLm) -> String {
    match m {
        GmToLm::Launch(b) => format!(
            "launch gm{}->lm{} seq {} [{}]",
            b.gm.0,
            b.lm.0,
            b.seq,
            tasks(b.requests.iter().map(|r| r.task.id))
        ),
        GmToLm::Preempt(p) => format!("preempt gm{}->lm{} for {}", p.gm.0, p.lm.0, p.task.id),
        GmToLm::Cancel(c) => format!("cancel gm{}->lm{} job {}", c.gm.0, c.lm.0, c.job.0),
        GmToLm::Reconcile(r) => format!(
            "reconcile gm{}->lm{} [{}]",
            r.gm.0,
            r.lm.0,
            tasks(r.tasks.iter().map(|t| t.0))
        ),
        GmToLm::Gang(g) => format!(
            "gang {} gm{}->lm{} job {} gen {} [{}]",
            g.op.label(),
            g.gm.0,
            g.lm.0,
            g.job.0,
            g.generation,
            tasks(m.placed_tasks().into_iter())
        ),
    }
}

fn describe_lm_to_gm(m: &LmToGm) -> String {
    match m {
        LmToGm::LaunchAnswer(r) => format!(
            "launch answer lm{} seq {} [{}]",
            r.lm.0,
            r.seq,
            r.outcomes
                .iter()
                .map(|(t, o)| match o {
                    LaunchOutcome::Launched { .. } => format!("{t} ok"),
                    LaunchOutcome::Rejected(r) => format!("{t} rejected {r:?}"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        LmToGm::State(s) => format!("state of lm{} v{}", s.lm.0, s.version),
        LmToGm::Ended(e) => format!(
            "ended [{}]",
            e.ends
                .iter()
                .map(|x| match &x.failure {
                    None => format!("{}#{} finished", x.task, x.attempt),
                    Some(f) => format!("{}#{} {f}", x.task, x.attempt),
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.kind().to_string(),
    }
}

pub(super) fn describe_item(item: &Item) -> String {
    match item {
        Item::ToGm(m) => describe_lm_to_gm(m),
        Item::ToWorker(o, _) => format!("{} {}", o.kind(), order_task(o)),
        Item::ToLm(WorkerToLm::Report(r)) => {
            let what = match r {
                WorkerReport::Started { .. } => "started",
                WorkerReport::Finished { .. } => "finished",
                WorkerReport::Killed { .. } => "killed",
                WorkerReport::Failed { .. } => "failed",
            };
            format!("report {}#{} {what} on {}", r.task(), r.attempt(), r.node())
        }
        Item::Register { holding, ended, .. } => format!(
            "register holding [{}] ended [{}]",
            tasks(holding.iter().map(|h| h.task.id)),
            tasks(ended.iter().map(|e| e.task))
        ),
    }
}

fn order_task(o: &LmToWorker) -> TaskId {
    match o {
        LmToWorker::Start(s) => s.task.id,
        LmToWorker::Kill(k) => k.task,
        LmToWorker::Promote(p) => p.task,
    }
}
