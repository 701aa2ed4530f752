//! What a phase's replay by the `loadgen` service reported (its tasks.csv and
//! problems.txt in the phase's output directory): the figures the chaos and standby
//! phases print, and the assertion that nothing was lost or ran twice.

use std::collections::HashSet;
use tests::checks::{describe_overlaps, overlaps_on_nodes, read_tasks_csv, Row};
use tests::compose::say;

/// A replay's report.
pub(crate) struct Report {
    /// The replay's output directory.
    out: std::path::PathBuf,
    pub(crate) problems: String,
    pub(crate) rows: Vec<Row>,
    /// (trace job, task) started more than once.
    pub(crate) twice: Vec<(u64, u32)>,
    /// (trace job, task) accepted and never finished.
    pub(crate) never: Vec<(u64, u32)>,
}

impl Report {
    pub(crate) fn read(out: &std::path::Path) -> Report {
        let problems = std::fs::read_to_string(out.join("problems.txt")).unwrap_or_default();
        Report {
            out: out.to_owned(),
            rows: read_tasks_csv(out),
            twice: listed(&problems, "tasks started more than once"),
            never: listed(&problems, "submitted tasks never finished"),
            problems,
        }
    }

    /// "submitted N, finished once N, failed N, run twice N, lost N" for the tasks of
    /// `rows` (a fault's scope).
    pub(crate) fn figures(&self, rows: &[&Row]) -> String {
        let ids: HashSet<(u64, u32)> = rows.iter().map(|r| (r.job, r.task)).collect();
        let finished = rows.iter().filter(|r| r.finish.is_some()).count();
        let run_twice = self.twice.iter().filter(|t| ids.contains(t)).count();
        format!(
            "submitted {}, finished once {}, failed {}, run twice {run_twice}, lost {}",
            ids.len(),
            finished.saturating_sub(run_twice),
            rows.len() - finished,
            self.never.iter().filter(|t| ids.contains(t)).count(),
        )
    }

    /// Prints the figures over every task, `extra` appended.
    pub(crate) fn say_all(&self, tag: &str, extra: &str) {
        say(&format!(
            "{tag} figures, all: submitted {}, finished {}, run twice {}, lost {}{extra}",
            self.rows.len(),
            self.rows.iter().filter(|r| r.finish.is_some()).count(),
            self.twice.len(),
            self.never.len()
        ));
    }

    /// Loadgen's judgement: the replay succeeded, all 183 tasks of the sample trace
    /// are reported, none lost or started twice, no node ran two at once.
    pub(crate) fn assert_nothing_lost(&self, phase: &str, replay: &std::process::Output) {
        assert!(
            replay.status.success(),
            "the {phase} replay failed ({}): {}\n{}",
            replay.status,
            self.problems,
            String::from_utf8_lossy(&replay.stderr)
        );
        assert_eq!(self.rows.len(), 183, "YH_small has 183 tasks");
        assert!(
            self.twice.is_empty() && self.never.is_empty(),
            "{}",
            self.problems
        );
        let overlaps = overlaps_on_nodes(&self.rows);
        assert!(
            overlaps.is_empty(),
            "{}\nevery event of these tasks, as received (events.jsonl):\n{}",
            describe_overlaps(&overlaps),
            self.events_of(overlaps.iter().flat_map(|o| [o.0, o.1]).collect())
        );
    }

    /// The lines of the replay's `events.jsonl` about the (trace job, task) pairs.
    fn events_of(&self, tasks: HashSet<(u64, u32)>) -> String {
        let text = std::fs::read_to_string(self.out.join("events.jsonl"))
            .unwrap_or_else(|e| format!("(no events.jsonl: {e})"));
        text.lines()
            .filter(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
                match (v["job"].as_u64(), v["task"].as_u64()) {
                    (Some(j), Some(t)) => tasks.contains(&(j, t as u32)),
                    _ => false,
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The (trace job, task) pairs loadgen's problems.txt lists under `title`.
fn listed(problems: &str, title: &str) -> Vec<(u64, u32)> {
    let mut lines = problems
        .lines()
        .skip_while(|l| !l.ends_with(&format!("{title}:")));
    lines.next();
    lines
        .map_while(|l| l.trim().strip_prefix("trace job "))
        .filter_map(|l| {
            let (job, task) = l.split_once(" task ")?;
            Some((job.parse().ok()?, task.parse().ok()?))
        })
        .collect()
}
