//! One-line descriptions of events and messages for the history and the trace.

use super::event::{Ev, Item};
use common::messages::WorkerReport;
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
        Ev::Late(l, w, o, _) => format!(
            "lm{l}'s abandoned {} {} reaches w{w}",
            o.kind(),
            order_task(o)
        ),
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
    m.trace()
}

fn describe_lm_to_gm(m: &LmToGm) -> String {
    m.trace()
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
