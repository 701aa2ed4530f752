//! `megha describe JOB`: one job in full, from the GM's answers: its status, its
//! spec as submitted (`GET /v1/jobs/{id}/spec`), each task's timeline (submitted,
//! launched where, started, failed runs and preemptions, ended how), times relative
//! to the job's submission, and its failures.

use crate::render::{failure, table};
use serde_json::Value;
use std::fmt::Write as _;

/// Seconds after `from` (microseconds), as `+1.250s`.
fn after(from: u64, at: &Value) -> Option<String> {
    let at = at.as_u64()?;
    Some(format!("+{:.3}s", at.saturating_sub(from) as f64 / 1e6))
}

/// One task's events, in time order: (time, what).
fn timeline(task: &Value) -> Vec<(u64, String)> {
    let mut events = Vec::new();
    let mut push = |at: &Value, what: String| {
        if let Some(t) = at.as_u64() {
            events.push((t, what));
        }
    };
    push(&task["submitted_at_us"], "submitted".into());
    let place = match (&task["lm"], &task["node"]) {
        (Value::Number(l), Value::Number(n)) => format!(" on lm{l}/node{n}"),
        _ => String::new(),
    };
    push(&task["launched_at_us"], format!("launched{place}"));
    push(
        &task["started_at_us"],
        format!("started (run {})", task["attempt"]),
    );
    for f in task["failures"].as_array().into_iter().flatten() {
        push(
            &f["ended_at_us"],
            format!(
                "run {} failed on node {}: {}",
                f["attempt"],
                f["node"],
                failure(&f["failure"])
            ),
        );
    }
    for k in task["killed_runs"].as_array().into_iter().flatten() {
        push(
            &k["at_us"],
            format!(
                "run {} preempted on lm{}: {}",
                k["attempt"],
                k["lm"],
                k["reason"].as_str().unwrap_or("?")
            ),
        );
    }
    let state = task["state"].as_str().unwrap_or("?");
    let end = match &task["failure"] {
        Value::Null => state.to_owned(),
        f => format!("{state}: {}", failure(f)),
    };
    push(&task["ended_at_us"], end);
    events.sort_by_key(|(t, _)| *t);
    events
}

/// The text of `megha describe`: `spec` is the job's spec, or why there is none.
pub fn describe(job: &Value, spec: Result<&Value, &str>, tasks: &[Value]) -> String {
    let mut out = String::new();
    let from = job["submitted_at_us"].as_u64().unwrap_or(0);
    let _ = writeln!(
        out,
        "job {}{}: {} ({} tasks), user {}, queues {}",
        job["job"],
        job["name"]
            .as_str()
            .map(|n| format!(" \"{n}\""))
            .unwrap_or_default(),
        job["state"].as_str().unwrap_or("?"),
        job["tasks"],
        job["user"].as_str().unwrap_or("-"),
        job["queues"]
            .as_array()
            .map(|q| q
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(","))
            .unwrap_or_default(),
    );
    if let Some(ended) = after(from, &job["ended_at_us"]) {
        let _ = writeln!(out, "ended {ended} after its submission");
    }
    out.push_str("\nspec:\n");
    match spec {
        Ok(spec) => {
            let text = serde_json::to_string_pretty(spec).unwrap_or_default();
            for line in text.lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        Err(why) => {
            let _ = writeln!(out, "  (none: {why})");
        }
    }
    out.push_str("\ntimeline (from the job's submission):\n");
    let mut rows = Vec::new();
    for task in tasks {
        for (at, what) in timeline(task) {
            rows.push(vec![
                task["index"].to_string(),
                after(from, &Value::from(at)).unwrap_or_default(),
                what,
            ]);
        }
    }
    out.push_str(&table(&["TASK", "AT", "EVENT"], &rows));
    let failed: Vec<&Value> = tasks.iter().filter(|t| !t["failure"].is_null()).collect();
    if !failed.is_empty() {
        out.push_str("\nfailures:\n");
        for t in failed {
            let _ = writeln!(
                out,
                "  task {} (run {} of {}): {}",
                t["index"],
                t["attempt"],
                t["max_attempts"],
                failure(&t["failure"])
            );
        }
    }
    if job["tasks"].as_u64().unwrap_or(0) > tasks.len() as u64 {
        let _ = writeln!(out, "(the first {} tasks shown)", tasks.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_then_retried_task_reads_in_time_order() {
        let job = json!({"job": 7, "name": "train", "state": "failed", "tasks": 1,
            "user": "alice", "queues": ["default"], "submitted_at_us": 1_000_000,
            "ended_at_us": 9_000_000});
        let task = json!({"index": 0, "state": "failed", "attempt": 2, "max_attempts": 2,
            "lm": 0, "node": 3, "submitted_at_us": 1_000_000, "launched_at_us": 5_000_000,
            "started_at_us": 5_500_000, "ended_at_us": 9_000_000,
            "failure": {"exit": {"code": 3}},
            "failures": [{"attempt": 1, "node": 2, "ended_at_us": 3_000_000,
                          "failure": {"exit": {"code": 3}}}],
            "killed_runs": []});
        let spec = json!({"tasks": [{"resources": {"cpu_millis": 500}}]});
        let text = describe(&job, Ok(&spec), &[task]);
        let order = [
            "+0.000s  submitted",
            "+2.000s  run 1 failed on node 2: exited with code 3",
            "+4.000s  launched on lm0/node3",
            "+4.500s  started (run 2)",
            "+8.000s  failed: exited with code 3",
        ];
        let mut at = 0;
        for line in order {
            let found = text[at..]
                .find(line)
                .unwrap_or_else(|| panic!("{line} in order in:\n{text}"));
            at += found;
        }
        assert!(
            text.contains("job 7 \"train\": failed (1 tasks), user alice"),
            "{text}"
        );
        assert!(text.contains("\"cpu_millis\": 500"), "{text}");
        assert!(
            text.contains("task 0 (run 2 of 2): exited with code 3"),
            "{text}"
        );
        let none = describe(&job, Err("not kept"), &[]);
        assert!(none.contains("(none: not kept)"), "{none}");
    }
}
