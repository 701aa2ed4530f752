//! Gangs: a job whose tasks (or `min_members` of them) start together or not at all
//! (issue 37 item 1; the design and its failure cases are in `docs/gangs.md`).
//!
//! A gang's placement is a transaction the LMs verify. The GM that owns the job picks
//! a node for each member from its view, across one or several LMs, and sends each
//! LM its part as a reserve ([`crate::messages::GangRequest`], a reserve)
//! numbered with the gang's *generation*. The LM checks the part against its
//! authoritative state and holds it (the held room is given to no one else) until a
//! commit or a release of that generation, or until the hold expires; it answers
//! held or refused. The GM commits when every part
//! is held and releases every part otherwise, retrying later with the next
//! generation. An LM launches a part only on a commit of the generation it holds, so
//! a late answer of an abandoned generation can never start half a gang.
//!
//! This file holds what a job asks ([`GangSpec`]); the transaction's messages are
//! in [`crate::messages`] ([`crate::messages::GangRequest`],
//! [`crate::messages::GangOp`], [`crate::messages::GangAnswer`],
//! [`crate::messages::GangOutcome`]).

use crate::Micros;
use serde::{Deserialize, Serialize};

/// What a job asks of its gang (the public API's `gang` object).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GangSpec {
    /// How many of the job's tasks must start together: all of them by default.
    /// When fewer, the gang starts with as many as fit (at least this many) and the
    /// rest are queued as ordinary tasks once it started.
    pub min_members: u32,
    /// How long the gang may wait for room, from its submission.
    pub timeout: Micros,
    pub on_timeout: OnTimeout,
}

/// What becomes of a gang that could not start within its timeout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// Every task of the job ends failed ("gang timed out"); nothing ran.
    #[default]
    Fail,
    /// The gang gives up on starting together: its tasks are queued as ordinary
    /// tasks and each starts when it fits.
    RunPartial,
}

/// A gang a GM cannot take, naming the field at fault (the API answers 400).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {detail}")]
pub struct GangSpecError {
    pub field: &'static str,
    pub detail: String,
}

/// How long an LM holds a part by default, from the reserve's arrival.
pub const DEFAULT_HOLD: Micros = Micros(30_000_000);

/// The generation of a restarted GM's `Stop` of a gang an earlier life of it left
/// running in part (its journal keeps no generation; docs/gangs.md, "A GM restarted
/// mid-commit"): it stops whatever an earlier life of that GM committed at the LM,
/// never what this life committed, gives back a part held, and is not remembered
/// as seen.
pub const ANY_GENERATION: u32 = u32::MAX;

impl GangSpec {
    /// A gang of every one of `tasks` tasks, failing after `timeout`.
    pub fn all(tasks: u32, timeout: Micros) -> Self {
        GangSpec {
            min_members: tasks,
            timeout,
            on_timeout: OnTimeout::Fail,
        }
    }

    /// The spec of the API: `min_members` (`None`: all `tasks`), `timeout_s`
    /// (seconds, positive and finite), `on_timeout`. Each error names its field.
    pub fn checked(
        tasks: usize,
        min_members: Option<i64>,
        timeout_s: f64,
        on_timeout: OnTimeout,
    ) -> Result<Self, GangSpecError> {
        let min = min_members.unwrap_or(tasks as i64);
        if min < 1 || min > tasks as i64 {
            return Err(GangSpecError {
                field: "gang.min_members",
                detail: format!("{min} is not between 1 and the job's {tasks} tasks"),
            });
        }
        if !timeout_s.is_finite() || timeout_s <= 0.0 || timeout_s > 30.0 * 86_400.0 {
            return Err(GangSpecError {
                field: "gang.timeout_s",
                detail: format!(
                    "{timeout_s} is not a positive number of seconds (at most 30 days)"
                ),
            });
        }
        Ok(GangSpec {
            min_members: min as u32,
            timeout: Micros((timeout_s * 1e6) as u64),
            on_timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_the_field_at_fault() {
        let ok = GangSpec::checked(8, None, 60.0, OnTimeout::Fail).unwrap();
        assert_eq!((ok.min_members, ok.timeout), (8, Micros(60_000_000)));
        for (min, timeout, field) in [
            (Some(0), 1.0, "gang.min_members"),
            (Some(9), 1.0, "gang.min_members"),
            (Some(-1), 1.0, "gang.min_members"),
            (None, -1.0, "gang.timeout_s"),
            (None, 0.0, "gang.timeout_s"),
            (None, f64::NAN, "gang.timeout_s"),
        ] {
            let e = GangSpec::checked(8, min, timeout, OnTimeout::Fail).unwrap_err();
            assert_eq!(e.field, field, "{min:?} {timeout}");
        }
        assert_eq!(
            GangSpec::checked(8, Some(3), 1.0, OnTimeout::RunPartial)
                .unwrap()
                .min_members,
            3
        );
    }
}
