//! Running one seed ([`run`], with the violation's history from a second run) and
//! shrinking a failing schedule ([`shrink`]).

use super::config::{FaultConfig, RunReport};
use super::plan::Schedule;
use super::world;

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
