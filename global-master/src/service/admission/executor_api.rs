//! The optional `executor` of a submitted task (JSON) and its validation: how the
//! worker runs it. Absent: the worker's default executor.
//!
//! `{"type":"synthetic"}`, `{"type":"burn"}`, `{"type":"burn","slow_duration_ms":30000}`
//! (placement-dependent: its `duration_ms` on a branch of its job's utility tree,
//! `slow_duration_ms` elsewhere; docs/alsched.md), or
//! `{"type":"exec","command":["sh","-c","exit 3"],"env":{"K":"V"},"cwd":"/tmp"}`.

use super::error::ApiError;
use common::{BurnByPlacement, ExecCommand, Executor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most arguments (program included) of an exec command.
pub(super) const MAX_ARGS: usize = 4096;
/// Most bytes of an exec command: arguments, environment and cwd together.
pub(super) const MAX_COMMAND_BYTES: usize = 128 * 1024;

#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExecutorRequest {
    Synthetic,
    Burn {
        /// How long the task burns when its placement took no branch of its job's
        /// utility tree (which the job must have); absent: always `duration_ms`.
        #[serde(default)]
        #[schema(minimum = 0, maximum = 604_800_000)]
        slow_duration_ms: Option<f64>,
    },
    Exec {
        /// The program and its arguments.
        command: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// An absolute path; absent: the task's directory at the worker.
        #[serde(default)]
        cwd: Option<String>,
    },
}

/// Checks an executor request; a refusal (422) names the field under `field`.
pub(super) fn check_executor(field: &str, e: ExecutorRequest) -> Result<Executor, ApiError> {
    let (command, env, cwd) = match e {
        ExecutorRequest::Synthetic => return Ok(Executor::Synthetic),
        ExecutorRequest::Burn {
            slow_duration_ms: None,
        } => return Ok(Executor::Burn),
        ExecutorRequest::Burn {
            slow_duration_ms: Some(ms),
        } => {
            // Between 0 and a week, as `duration_ms`.
            const WEEK_MS: f64 = 7.0 * 24.0 * 3600.0 * 1000.0;
            if !(ms.is_finite() && (0.0..=WEEK_MS).contains(&ms)) {
                return Err(ApiError::new(
                    400,
                    format!("{field}.slow_duration_ms"),
                    format!("must be a number of milliseconds between 0 and {WEEK_MS}"),
                ));
            }
            let slow_duration = common::Micros((ms * 1000.0).round() as u64);
            return Ok(Executor::BurnByPlacement(BurnByPlacement {
                slow_duration,
                preferred: false,
            }));
        }
        ExecutorRequest::Exec { command, env, cwd } => (command, env, cwd),
    };
    let bad = |sub: &str, why: &str| Err(ApiError::new(422, format!("{field}.{sub}"), why));
    let Some((program, args)) = command.split_first() else {
        return bad("command", "must name at least the program");
    };
    if program.trim().is_empty() {
        return bad("command[0]", "the program must not be empty");
    }
    if command.len() > MAX_ARGS {
        return bad("command", &format!("at most {MAX_ARGS} arguments"));
    }
    if let Some(i) = command.iter().position(|a| a.contains('\0')) {
        return bad(&format!("command[{i}]"), "must not contain NUL bytes");
    }
    for (key, value) in &env {
        if key.is_empty() || key.contains(['=', '\0']) {
            return bad(
                &format!("env.{key}"),
                "a variable name must be non-empty, without `=` or NUL",
            );
        }
        if value.contains('\0') {
            return bad(&format!("env.{key}"), "must not contain NUL bytes");
        }
    }
    if let Some(cwd) = &cwd {
        if !cwd.starts_with('/') || cwd.contains('\0') {
            return bad("cwd", "must be an absolute path");
        }
    }
    let bytes = command.iter().map(String::len).sum::<usize>()
        + env.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
        + cwd.as_ref().map_or(0, String::len);
    if bytes > MAX_COMMAND_BYTES {
        return bad(
            "command",
            &format!("command, env and cwd exceed {MAX_COMMAND_BYTES} bytes"),
        );
    }
    Ok(Executor::Exec(Arc::new(ExecCommand {
        program: program.clone(),
        args: args.to_vec(),
        env,
        cwd,
    })))
}

/// A burn by placement runs slow off its job's preferred placement, which only a
/// job with a utility tree has: without one, such a task is a 400 naming its
/// `slow_duration_ms`.
pub(super) fn check_burn_needs_tree<'a>(
    executors: impl IntoIterator<Item = Option<&'a Executor>>,
    has_tree: bool,
) -> Result<(), ApiError> {
    if has_tree {
        return Ok(());
    }
    match executors
        .into_iter()
        .position(|e| matches!(e, Some(Executor::BurnByPlacement(_))))
    {
        Some(i) => Err(ApiError::new(
            400,
            format!("tasks[{i}].executor.slow_duration_ms"),
            "a burn runs slow off its job's preferred placement, and the job has no `utility` tree to prefer one",
        )),
        None => Ok(()),
    }
}

/// The variable an exec task finds its job's task count in (the worker sets the
/// others: docs/cli.md).
pub const TASK_COUNT_VARIABLE: &str = "MEGHA_TASK_COUNT";

/// Sets [`TASK_COUNT_VARIABLE`] to `count` (the job's tasks) in an exec task's
/// environment, replacing a value the submission gave.
pub(super) fn set_task_count(executor: &mut Option<Executor>, count: usize) {
    if let Some(Executor::Exec(cmd)) = executor {
        Arc::make_mut(cmd)
            .env
            .insert(TASK_COUNT_VARIABLE.to_owned(), count.to_string());
    }
}

#[cfg(test)]
mod tests {
    use crate::service::admission::api::{parse_job, QueueTable};
    use common::{Executor, GmId};

    fn parse(executor: &str) -> Result<Option<Executor>, (u16, String, String)> {
        let body = format!(
            r#"{{"tasks":[{{"resources":{{"cpu_millis":1000,"memory_mb":64}},"duration_ms":10,"executor":{executor}}}]}}"#
        );
        let queues = QueueTable::new(GmId(0), None);
        parse_job(body.as_bytes(), 1, &queues)
            .map(|mut t| t.remove(0).executor)
            .map_err(|e| (e.status, e.field, e.error))
    }

    #[test]
    fn exec_burn_and_synthetic_are_accepted() {
        let Ok(Some(Executor::Exec(c))) =
            parse(r#"{"type":"exec","command":["sh","-c","exit 3"],"env":{"A":"1"},"cwd":"/tmp"}"#)
        else {
            panic!("exec refused");
        };
        assert_eq!((c.program.as_str(), c.args.len()), ("sh", 2));
        assert_eq!(c.env.get("A").map(String::as_str), Some("1"));
        assert_eq!(
            c.env.get("MEGHA_TASK_COUNT").map(String::as_str),
            Some("1"),
            "the GM tells a task its job's task count"
        );
        assert_eq!(c.cwd.as_deref(), Some("/tmp"));
        assert_eq!(parse(r#"{"type":"burn"}"#), Ok(Some(Executor::Burn)));
        assert_eq!(
            parse(r#"{"type":"synthetic"}"#),
            Ok(Some(Executor::Synthetic))
        );
        assert_eq!(parse("null"), Ok(None));
    }

    /// A burn with `slow_duration_ms` (issue 36 item 5) needs its job's utility
    /// tree; a bad value is a 400 naming the field.
    #[test]
    fn a_burn_by_placement_needs_a_tree_and_a_good_slow_duration() {
        let queues = QueueTable::new(GmId(0), None);
        let job = |slow: &str, tree: &str| {
            let body = format!(
                r#"{{"tasks":[{{"resources":{{"cpu_millis":1000,"memory_mb":64}},"duration_ms":10,"executor":{{"type":"burn","slow_duration_ms":{slow}}}}}]{tree}}}"#
            );
            parse_job(body.as_bytes(), 1, &queues)
                .map(|mut t| t.remove(0).executor)
                .map_err(|e| (e.status, e.field))
        };
        let tree = r#","utility":{"prefer":{"set":"c3"}}"#;
        assert_eq!(
            job("30", tree),
            Ok(Some(Executor::BurnByPlacement(common::BurnByPlacement {
                slow_duration: common::Micros::from_millis(30),
                preferred: false,
            })))
        );
        let field = "tasks[0].executor.slow_duration_ms".to_owned();
        for bad in ["-1", "1e300"] {
            assert_eq!(job(bad, tree), Err((400, field.clone())), "{bad}");
        }
        assert_eq!(job("30", ""), Err((400, field)), "no tree to prefer by");
    }

    #[test]
    fn bad_executors_are_refused_naming_the_field() {
        let cases = [
            (r#"{"type":"fork-bomb"}"#, 400, "tasks[0].executor.type"),
            (r#"{"type":"exec"}"#, 400, "tasks[0].executor"),
            (
                r#"{"type":"exec","command":[]}"#,
                422,
                "tasks[0].executor.command",
            ),
            (
                r#"{"type":"exec","command":[" "]}"#,
                422,
                "tasks[0].executor.command[0]",
            ),
            (
                r#"{"type":"exec","command":["a","b\u0000"]}"#,
                422,
                "tasks[0].executor.command[1]",
            ),
            (
                r#"{"type":"exec","command":["a"],"env":{"A=B":"1"}}"#,
                422,
                "tasks[0].executor.env.A=B",
            ),
            (
                r#"{"type":"exec","command":["a"],"cwd":"tmp"}"#,
                422,
                "tasks[0].executor.cwd",
            ),
            (
                r#"{"type":"exec","command":["a"],"user":"root"}"#,
                400,
                "tasks[0].executor",
            ),
        ];
        for (executor, status, field) in cases {
            let got = parse(executor).expect_err(executor);
            assert_eq!(
                (got.0, got.1.as_str()),
                (status, field),
                "{executor}: {}",
                got.2
            );
        }
    }
}
