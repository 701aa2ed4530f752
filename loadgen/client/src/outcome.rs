//! A job's outcome as an exit status, for `megha wait`, `megha run --wait` and
//! `megha status JOB --exit-code` (pure, unit-tested). The codes are documented in
//! docs/cli.md and in `megha wait --help`; keep the three in step.

use serde_json::Value;

/// Every task finished.
pub const FINISHED: u8 = 0;
/// megha's own failure: bad arguments, an answer it cannot read, a GM unreachable
/// for longer than `--give-up-after`, a refused call (401, 403...).
pub const ERROR: u8 = 1;
/// The job has not ended yet (`status --exit-code`), or `wait --timeout` ran out.
pub const NOT_ENDED: u8 = 124;
/// The job failed and its first failed task has no exit code: lost with its worker,
/// could not start, unplaceable, or never run (a DAG parent stage failed).
pub const FAILED_WITHOUT_CODE: u8 = 125;
/// The job is unknown to the GM: never submitted there, another user's job (the
/// same answer, on purpose), or ended and forgotten after the retention time.
pub const UNKNOWN_JOB: u8 = 127;
/// A task killed by signal N (not by megha) gives 128 + N, as a shell does
/// (137: SIGKILL, an out-of-memory kill included).
pub const SIGNAL_BASE: u8 = 128;
/// The job was cancelled (as a shell's Ctrl-C: 128 + SIGINT).
pub const CANCELLED: u8 = 130;

/// How a job ended, from its `GET /v1/jobs/{id}` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Some task has not ended yet.
    Active,
    Finished,
    Cancelled,
    /// The failed (or unplaceable) task of lowest index, and why (human readable).
    Failed {
        index: u64,
        code: u8,
        why: String,
    },
}

impl Outcome {
    /// The outcome of a job status (`state`, `first_failed`); an answer without a
    /// known `state` is `None`.
    pub fn of(job: &Value) -> Option<Outcome> {
        Some(match job["state"].as_str()? {
            "active" => Outcome::Active,
            "finished" => Outcome::Finished,
            "cancelled" => Outcome::Cancelled,
            "failed" => {
                let first = &job["first_failed"];
                let (code, why) = failure_code(first);
                Outcome::Failed {
                    index: first["index"].as_u64().unwrap_or(0),
                    code,
                    why,
                }
            }
            _ => return None,
        })
    }

    /// The exit status for this outcome.
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Active => NOT_ENDED,
            Outcome::Finished => FINISHED,
            Outcome::Cancelled => CANCELLED,
            Outcome::Failed { code, .. } => *code,
        }
    }

    /// One line for a human: `finished`, `failed: task 2 exited with code 3`...
    pub fn describe(&self) -> String {
        match self {
            Outcome::Active => "active (not ended yet)".to_owned(),
            Outcome::Finished => "finished".to_owned(),
            Outcome::Cancelled => "cancelled".to_owned(),
            Outcome::Failed { index, why, .. } => format!("failed: task {index} {why}"),
        }
    }
}

/// The exit status of a failed task (`first_failed`: `state`, `failure`) and why.
fn failure_code(first: &Value) -> (u8, String) {
    let failure = &first["failure"];
    if let Some(code) = failure["exit"]["code"].as_i64() {
        return match u8::try_from(code) {
            Ok(c) if c != 0 => (c, format!("exited with code {code}")),
            _ => (FAILED_WITHOUT_CODE, format!("exited with code {code}")),
        };
    }
    if let Some(signal) = failure["signal"]["signal"].as_i64() {
        let words = super::render::signal_words(&failure["signal"]);
        let why = if words.starts_with("out of memory") {
            format!("ran {words}")
        } else {
            format!("was {words}")
        };
        return match u8::try_from(signal) {
            Ok(s) if (1..=127).contains(&s) => (SIGNAL_BASE + s, why),
            _ => (FAILED_WITHOUT_CODE, why),
        };
    }
    let why = if let Some(reason) = failure["start_failed"]["reason"].as_str() {
        format!("could not start: {reason}")
    } else if let Some(reason) = failure["lost"]["reason"].as_str() {
        format!("was lost: {reason}")
    } else if first["state"] == "unplaceable" {
        "is unplaceable (no node can ever host it)".to_owned()
    } else {
        "failed".to_owned()
    };
    (FAILED_WITHOUT_CODE, why)
}

/// The exit status of several jobs (in the order given): the first that is not 0,
/// or 0.
pub fn combined(codes: impl IntoIterator<Item = u8>) -> u8 {
    codes.into_iter().find(|c| *c != 0).unwrap_or(FINISHED)
}

/// The delay before poll number `n` (0 for the first after the submission):
/// 100 ms doubling up to `max_ms`.
pub fn poll_delay_ms(n: u32, max_ms: u64) -> u64 {
    100u64.saturating_mul(1u64 << n.min(20)).min(max_ms.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failed(first: Value) -> Value {
        json!({"state": "failed", "first_failed": first})
    }

    #[test]
    fn each_outcome_has_its_code() {
        let table = [
            (json!({"state": "active"}), NOT_ENDED),
            (json!({"state": "finished"}), 0),
            (json!({"state": "cancelled"}), 130),
            (
                failed(json!({"index": 1, "state": "failed", "failure": {"exit": {"code": 3}}})),
                3,
            ),
            (
                failed(json!({"index": 0, "state": "failed", "failure": {"exit": {"code": 255}}})),
                255,
            ),
            // Out of a process's range: no exit code to pass on.
            (
                failed(json!({"index": 0, "state": "failed", "failure": {"exit": {"code": -1}}})),
                125,
            ),
            (
                failed(json!({"index": 0, "state": "failed", "failure": {"exit": {"code": 256}}})),
                125,
            ),
            (
                failed(json!({"index": 0, "state": "failed",
                    "failure": {"signal": {"signal": 9, "out_of_memory": true}}})),
                137,
            ),
            (
                failed(json!({"index": 0, "state": "failed",
                    "failure": {"signal": {"signal": 15, "out_of_memory": false}}})),
                143,
            ),
            (
                failed(json!({"index": 0, "state": "failed",
                    "failure": {"lost": {"reason": "worker down"}}})),
                125,
            ),
            (
                failed(json!({"index": 0, "state": "failed",
                    "failure": {"start_failed": {"reason": "no such file"}}})),
                125,
            ),
            (
                failed(json!({"index": 0, "state": "unplaceable", "failure": null})),
                125,
            ),
            // An older GM without `first_failed`: still a failure, never 0.
            (json!({"state": "failed"}), 125),
        ];
        for (job, code) in table {
            let outcome = Outcome::of(&job).expect("a known state");
            assert_eq!(outcome.exit_code(), code, "{job}");
        }
        assert_eq!(Outcome::of(&json!({"state": "weird"})), None);
        assert_eq!(Outcome::of(&json!({})), None);
    }

    #[test]
    fn a_failure_names_its_task_and_why() {
        let job = failed(json!({"index": 4, "state": "failed",
            "failure": {"signal": {"signal": 9, "out_of_memory": true}}}));
        let o = Outcome::of(&job).expect("failed");
        assert_eq!(
            o.describe(),
            "failed: task 4 ran out of memory: killed by signal 9 at its memory limit"
        );
        let job = failed(json!({"index": 2, "state": "failed", "failure": {"exit": {"code": 3}}}));
        assert_eq!(
            Outcome::of(&job).expect("failed").describe(),
            "failed: task 2 exited with code 3"
        );
    }

    #[test]
    fn several_jobs_exit_with_the_first_that_did_not_finish() {
        assert_eq!(combined([0, 0]), 0);
        assert_eq!(combined([0, 3, 130]), 3);
        assert_eq!(combined([130, 3]), 130);
        assert_eq!(combined([]), 0);
    }

    #[test]
    fn polls_start_fast_and_slow_down_to_the_interval() {
        let delays: Vec<u64> = (0..6).map(|n| poll_delay_ms(n, 1000)).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(poll_delay_ms(60, 5000), 5000);
        assert_eq!(poll_delay_ms(0, 0), 1);
    }
}
