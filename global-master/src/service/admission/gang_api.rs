//! The job API's `gang` object (issue 37, docs/gangs.md): `{"min_members": N,
//! "timeout_s": S, "on_timeout": "fail" | "run_partial"}`. Checked against the job:
//! a bad value is a 400 naming its field (`gang.min_members`, `gang.timeout_s`); a
//! gang cannot be a DAG job nor hold GUARANTEED, QUEUEABLE or long-running work
//! (400 naming `gang`).

use super::error::ApiError;
use common::gang::{GangSpec, OnTimeout};
use common::TaskKind;
use serde::Deserialize;

/// How long a gang waits for room when `timeout_s` is absent: one hour.
pub const DEFAULT_TIMEOUT_S: f64 = 3600.0;

#[derive(utoipa::ToSchema, Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GangRequest {
    /// How many tasks must start together: 1 to the job's task count; absent: all.
    #[serde(default)]
    pub min_members: Option<i64>,
    /// How long the gang may wait for room, seconds (positive; absent: an hour).
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// What a gang that did not start in time does: `fail` (the default: every
    /// task fails unrun) or `run_partial` (its tasks are queued one by one).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub on_timeout: OnTimeout,
}

/// The job's gang, if it asks for one.
pub fn check_gang(
    gang: Option<GangRequest>,
    kinds: &[TaskKind],
    has_dag: bool,
) -> Result<Option<GangSpec>, ApiError> {
    let Some(gang) = gang else {
        return Ok(None);
    };
    if has_dag {
        return Err(ApiError::new(
            400,
            "gang",
            "a DAG job (stages or after_jobs) cannot be a gang",
        ));
    }
    if let Some(kind) = kinds.iter().find(|k| **k != TaskKind::Short) {
        return Err(ApiError::new(
            400,
            "gang",
            format!("a gang's tasks must all be short; this job has a {kind:?} task"),
        ));
    }
    let timeout = gang.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    GangSpec::checked(kinds.len(), gang.min_members, timeout, gang.on_timeout)
        .map(Some)
        .map_err(|e| ApiError::new(400, e.field, e.detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gang(json: &str) -> GangRequest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn bad_gangs_are_400s_naming_the_field() {
        let short = [TaskKind::Short; 4];
        let ok = check_gang(Some(gang(r#"{"timeout_s": 5}"#)), &short, false).unwrap();
        assert_eq!(ok.unwrap().min_members, 4);
        for (json, field) in [
            (r#"{"min_members": 0}"#, "gang.min_members"),
            (r#"{"min_members": 5}"#, "gang.min_members"),
            (r#"{"timeout_s": -1}"#, "gang.timeout_s"),
        ] {
            let e = check_gang(Some(gang(json)), &short, false).unwrap_err();
            assert_eq!((e.status, e.field.as_str()), (400, field), "{json}");
        }
        let e = check_gang(Some(gang("{}")), &short, true).unwrap_err();
        assert_eq!(e.field, "gang");
        let mixed = [TaskKind::Short, TaskKind::Queueable];
        assert_eq!(
            check_gang(Some(gang("{}")), &mixed, false)
                .unwrap_err()
                .field,
            "gang"
        );
        assert!(serde_json::from_str::<GangRequest>(r#"{"on_timeout": "maybe"}"#).is_err());
    }
}
