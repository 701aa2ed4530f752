//! Deterministic fault injection: a small seeded cluster (GMs, LMs, one worker core
//! per node) driven through the very cores the services run, over a modelled network
//! that loses, duplicates, delays and reorders messages, with partitions, crashes and
//! restarts, refusing workers, broker outages and clock skew as seeded events. The
//! invariants ([`check`]) are checked after every event; a broken one stops the run
//! with the seed, the event index and the events before it, and the same seed replays
//! it exactly.
//!
//! Separate from [`super::megha`] (the costed simulator the oracle pins byte for
//! byte): nothing here runs unless asked for, so `loadgen simulate` is unchanged.
//!
//! How the network mirrors the services' transport (service-kit `links.rs`, the LM
//! and GM drivers):
//! - GM -> LM requests are calls: a lost request or answer is a timeout, retried 50 ms
//!   apart doubling to 2 s until the doubt timeout (the LM answers a repeat from its
//!   record); a peer unreachable at the first attempt settles it at once as
//!   [`GmInput::Undelivered`](gm_core::GmInput::Undelivered). An LM answers
//!   once its orders reached the workers, and not before every worker registered
//!   after its start (503).
//! - LM -> worker orders, worker -> LM reports and LM -> GM `Requeue`/`Ended` are
//!   ordered streams retried until delivered: a loss is a later resend, a duplicate a
//!   resend whose first copy arrived; their content dies with the sender.
//! - State updates (heartbeats) go over the broker: lost while it is down or the
//!   sides are cut, and may be lost, duplicated, delayed or reordered.
//!
//! What a restart keeps mirrors the services: a worker comes back empty and registers
//! again; a restarted LM takes the tasks its workers still hold and those they
//! finished (lm-core `restart.rs`); a GM keeps nothing (its first batch number is its
//! clock, `GmConfig::first_batch_seq`) but its journal ([`FaultConfig::journal`], as
//! the GM service has it since issue 14): it resubmits every accepted task whose end
//! it had not heard. Workers silent for the worker timeout are lost at their LM
//! ([`FaultConfig::worker_timeout`], the LM service's worker liveness). Both can be
//! turned off to check the invariants against the roles before issue 14.
//!
//! Layout: [`plan`] (fault kinds, random and scripted schedules), [`check`] (the
//! invariants), `world` (the driver), `search` (many seeds on threads).

pub mod check;
pub mod plan;
mod search;
mod world;

pub use check::{Invariant, Known, Violation};
pub use plan::{Fault, FaultRates, Link, LinkRates, Role, Schedule};
pub use search::{search, SearchReport};

use common::Micros;
use std::collections::BTreeMap;

/// The cluster, workload and fault model of a run.
#[derive(Clone, Debug)]
pub struct FaultConfig {
    pub gms: u16,
    pub lms: u16,
    /// Nodes per partition (each LM has one partition per GM); one worker per node.
    pub nodes_per_partition: u16,
    /// Cores per node.
    pub cores: u64,
    pub jobs: u32,
    /// Tasks per job, drawn from 1 to this.
    pub max_tasks: u32,
    /// Task durations are drawn from 0.2 s to this (3 s by default: shorter than the
    /// worker timeout, so a cut-off worker's runs end before their retries start).
    pub max_duration: Micros,
    /// Faults happen (and jobs arrive) in `[0, horizon)`.
    pub horizon: Micros,
    /// After the horizon: no faults, then liveness and views are checked.
    pub quiet: Micros,
    pub heartbeat: Micros,
    pub network_delay: Micros,
    /// Largest extra delay of a delayed message.
    pub max_extra_delay: Micros,
    /// A GM -> LM call attempt with no answer by then failed (the GM's
    /// `launch_timeout_ms`, 5 s).
    pub call_timeout: Micros,
    /// A call in doubt is retried until then (the GM's `doubt_timeout_s`, 300 s).
    pub doubt_timeout: Micros,
    /// The GM journal of issue 14 (as the GM service has it): a restarted GM
    /// resubmits every task it accepted whose end it had not heard. Off: the GM
    /// before it (queued tasks die with it).
    pub journal: bool,
    /// Worker liveness of issue 14 (as the LM service has it, `--worker-timeout-ms`,
    /// 10 s): a worker silent this long is lost. `None`: the LM before it.
    pub worker_timeout: Option<Micros>,
    /// Workers fence themselves (as the LM's `--worker-fence` has them): unconfirmed
    /// by their LM for 3/5 of the worker timeout, they stop their tasks and report
    /// them lost. Off: a cut-off worker runs on.
    pub worker_fence: bool,
    /// How long a dead worker's task processes run on after it died (issue 31: each
    /// task's helper kills its run as soon as its socket to the worker closes, a
    /// few milliseconds). A retry of such a task started meanwhile anywhere is a run
    /// twice. Before issue 31 they ran to their end (model it with a long linger).
    pub orphan_linger: Micros,
    /// The GM's question to a restarted LM (as the GM service asks it,
    /// `--lm-reconcile-delay-ms`, 5 s after it saw the new life): which of its tasks
    /// there the LM still holds; the others end finished or lost. `None`: the GM
    /// before it.
    pub lm_reconcile: Option<Micros>,
    /// The retry policy of every job (issue 13); 3 attempts as in the chaos tests.
    pub retry: common::retry::RetryPolicy,
    /// Count known causes (issue 14's gaps, bugs found here) as violations.
    pub strict: bool,
    /// Model the GM before its batch-sequence fix: every life numbers its batches
    /// from 1 (the harness should find answers from another life's record).
    pub batch_seq_from_zero: bool,
    /// Events kept for a violation's history.
    pub history: usize,
    /// Print every event (replay).
    pub trace: bool,
    /// Faults of a random schedule; unused with a script.
    pub rates: FaultRates,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            gms: 2,
            lms: 2,
            nodes_per_partition: 1,
            cores: 2,
            jobs: 8,
            max_tasks: 3,
            max_duration: Micros::from_secs(3),
            horizon: Micros::from_secs(20),
            quiet: Micros::from_secs(30),
            heartbeat: Micros::from_secs(1),
            network_delay: Micros::from_millis(1),
            max_extra_delay: Micros::from_millis(500),
            call_timeout: Micros::from_secs(5),
            doubt_timeout: Micros::from_secs(300),
            journal: true,
            worker_timeout: Some(Micros::from_secs(10)),
            worker_fence: true,
            orphan_linger: Micros::from_millis(50),
            lm_reconcile: Some(Micros::from_secs(5)),
            strict: false,
            retry: common::retry::RetryPolicy {
                max_attempts: 3,
                backoff: common::retry::Backoff::default(),
            },
            batch_seq_from_zero: false,
            history: 30,
            trace: false,
            rates: FaultRates::default(),
        }
    }
}

/// What one seed's run did.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    pub seed: u64,
    pub events: u64,
    pub accepted: usize,
    pub finished: u64,
    pub failed: u64,
    /// Tasks stuck for a known reason (issue 14), per reason.
    pub known: BTreeMap<Known, u32>,
    pub violation: Option<Violation>,
    /// The faults the run injected (the random schedule, or the script).
    pub schedule: Schedule,
}

/// Runs one seed: the schedule given, or a random one drawn from the seed.
///
/// A violation about a task (a liveness failure is found at the end, long after its
/// cause) takes its history from a second, identical run keeping every event: the
/// faults and the events that name the task, up to the violation.
pub fn run(seed: u64, config: &FaultConfig, script: Option<&Schedule>) -> RunReport {
    let mut report = world::World::new(seed, config, script).run();
    let keep = config.history;
    if let Some(v) = report
        .violation
        .as_mut()
        .filter(|_| keep > 0 && !config.trace)
    {
        if let Some(task) = v.task {
            let all = FaultConfig {
                history: usize::MAX,
                ..config.clone()
            };
            let again = world::World::new(seed, &all, script).run_history();
            let token = format!(" {task}");
            let mut lines: Vec<String> = Vec::new();
            for line in again {
                let index: Option<u64> = line
                    .strip_prefix('#')
                    .and_then(|l| l.split(' ').next())
                    .and_then(|n| n.parse().ok());
                if index.is_some_and(|i| i > v.event) {
                    break;
                }
                if line.contains("FAULT") || mentions(&line, &token) {
                    lines.push(line);
                }
            }
            let mut lines = collapse(lines);
            if lines.len() > keep {
                lines.drain(..lines.len() - keep);
            }
            v.history = lines;
        }
    }
    report
}

/// A smaller schedule that still breaks the same way: faults are dropped one at a
/// time (greedily, last first, until none can go) while `still` holds of the run and
/// every fault still ends ([`Schedule::is_closed`], when the original does).
/// Turns a seed the search found into a short regression script.
pub fn shrink(
    seed: u64,
    config: &FaultConfig,
    schedule: &Schedule,
    still: impl Fn(&RunReport) -> bool,
) -> Schedule {
    let quiet = FaultConfig {
        history: 0,
        trace: false,
        ..config.clone()
    };
    let mut best = schedule.clone();
    let closed = schedule.is_closed();
    loop {
        let mut dropped = false;
        for i in (0..best.faults.len()).rev() {
            let mut fewer = best.clone();
            fewer.faults.remove(i);
            if (!closed || fewer.is_closed()) && still(&run(seed, &quiet, Some(&fewer))) {
                best = fewer;
                dropped = true;
            }
        }
        if !dropped {
            return best;
        }
    }
}

/// Runs of lines that differ only in numbers (a GM retrying a placement every pass)
/// keep their first and last line and say how many were left out between.
fn collapse(lines: Vec<String>) -> Vec<String> {
    // The part after `#index time`, numbers removed.
    let shape = |l: &str| -> String {
        l.splitn(3, char::is_whitespace)
            .nth(2)
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect()
    };
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<String> = Vec::new();
    let flush = |run: &mut Vec<String>, out: &mut Vec<String>| {
        if run.len() > 3 {
            let n = run.len() - 2;
            out.push(run[0].clone());
            out.push(format!("    ... {n} similar lines ..."));
            out.push(run[run.len() - 1].clone());
        } else {
            out.append(run);
        }
        run.clear();
    };
    for line in lines {
        if run.last().is_some_and(|last| shape(last) != shape(&line)) {
            flush(&mut run, &mut out);
        }
        run.push(line);
    }
    flush(&mut run, &mut out);
    out
}

/// Whether a history line names the task (`1.2`, not `11.2` or `1.23`).
fn mentions(line: &str, token: &str) -> bool {
    let id = &token[1..];
    line.match_indices(id).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + id.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit() || c == '.')
            && !after.is_some_and(|c| c.is_ascii_digit() || c == '.')
    })
}

#[cfg(test)]
mod tests {
    use super::{collapse, mentions};

    #[test]
    fn a_history_collapses_runs_that_differ_only_in_numbers_and_names_tasks_exactly() {
        let mut lines: Vec<String> = (0..6)
            .map(|i| format!("#{i} {i}.000s   gm1 sends launch seq {i} [1.0]"))
            .collect();
        lines.push("#9 9.000s FAULT heal".into());
        let out = collapse(lines);
        assert_eq!(out.len(), 4, "{out:?}");
        assert!(out[1].contains("4 similar lines"), "{out:?}");
        assert_eq!(out[3], "#9 9.000s FAULT heal");
        assert!(mentions("start 1.2 on w0", " 1.2"));
        assert!(!mentions("start 11.2 on w0", " 1.2"));
        assert!(!mentions("start 1.23 on w0", " 1.2"));
    }
}
