//! The internal wire codec: the envelope every internal message travels in (HTTP
//! bodies, broker messages, the GM's journal records): one version byte, the sender's
//! cluster name (one length byte, then its bytes), then the message in bincode 2
//! (serde, standard config). A message of another cluster is refused here, before
//! anything reads it. Changing the codec is a change to this file only.

use crate::cluster_name::ClusterName;
use serde::{de::DeserializeOwned, Serialize};

/// Bumped whenever an internal message changes shape (5: attempts; 6: the cluster
/// name in the envelope; 7: the GM's life in launch batches and preemptions; 8: a
/// launch batch's resend flag, the worker's lease in its assignment; 9: a task's
/// preemption count and priority, the `rate_limited` preemption refusal; 10: the
/// gang transaction's messages and gang submissions; 11: the gang's `Stop`, the
/// preemption hold, a held preemption's outcome and the `held` flag of its final
/// answer).
pub const WIRE_VERSION: u8 = 11;

/// The content type internal HTTP bodies carry.
pub const CONTENT_TYPE: &str = "application/x-megha-bincode";

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("empty message")]
    Empty,
    #[error("wire version {found} is not supported (this build speaks {WIRE_VERSION})")]
    Version { found: u8 },
    #[error("message of cluster `{found}` refused: this process belongs to cluster `{expected}`")]
    ForeignCluster { found: String, expected: String },
    #[error("message truncated in its envelope")]
    Truncated,
    #[error("cannot decode message: {0}")]
    Decode(#[from] bincode::error::DecodeError),
    #[error("cannot encode message: {0}")]
    Encode(#[from] bincode::error::EncodeError),
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
}

impl CodecError {
    /// True for a well-formed message of another cluster (counted apart from garbage).
    pub fn is_foreign(&self) -> bool {
        matches!(self, CodecError::ForeignCluster { .. })
    }
}

/// `msg` in the envelope of `cluster`.
pub fn encode<T: Serialize>(cluster: &ClusterName, msg: &T) -> Result<Vec<u8>, CodecError> {
    let name = cluster.as_str().as_bytes();
    let mut out = Vec::with_capacity(2 + name.len() + 64);
    out.push(WIRE_VERSION);
    // A validated name is at most 64 bytes.
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    bincode::serde::encode_into_std_write(msg, &mut out, bincode::config::standard())?;
    Ok(out)
}

/// Earlier versions whose *stored* records (the GM's journal and idempotency keys)
/// read as this build's: versions 7 and 8 changed only messages between processes
/// (GM -> LM, LM -> worker), so a journal written by a version-6, 7 or 8 GM is taken
/// up after an upgrade. Version 9 changed `TaskSpec`, which the journal's jobs
/// hold: the GM reads those of versions 6 to 8 in their old shape
/// (`global-master`'s `journal/legacy.rs`); every other stored record is unchanged.
/// Version 10 added enum variants only (gang messages), so version-9 records read
/// as they are. Version 11 added an enum variant only (the gang's `Stop`; the
/// journal's gang specs are a table of their own), so version-10 records read as
/// they are.
pub const STORED_COMPATIBLE: &[u8] = &[6, 7, 8, 9, 10];

/// The message in `bytes`, if its envelope is of this build's version and of `cluster`.
pub fn decode<T: DeserializeOwned>(cluster: &ClusterName, bytes: &[u8]) -> Result<T, CodecError> {
    decode_versions(cluster, bytes, &[])
}

/// [`decode`] for records kept on disk: also of the versions in
/// [`STORED_COMPATIBLE`].
pub fn decode_stored<T: DeserializeOwned>(
    cluster: &ClusterName,
    bytes: &[u8],
) -> Result<T, CodecError> {
    decode_versions(cluster, bytes, STORED_COMPATIBLE)
}

fn decode_versions<T: DeserializeOwned>(
    cluster: &ClusterName,
    bytes: &[u8],
    also: &[u8],
) -> Result<T, CodecError> {
    let (&version, rest) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != WIRE_VERSION && !also.contains(&version) {
        return Err(CodecError::Version { found: version });
    }
    let (&len, rest) = rest.split_first().ok_or(CodecError::Truncated)?;
    let (name, body) = rest
        .split_at_checked(usize::from(len))
        .ok_or(CodecError::Truncated)?;
    if name != cluster.as_str().as_bytes() {
        return Err(CodecError::ForeignCluster {
            found: String::from_utf8_lossy(name).into_owned(),
            expected: cluster.to_string(),
        });
    }
    let (msg, used) = bincode::serde::decode_from_slice(body, bincode::config::standard())?;
    if used != body.len() {
        return Err(CodecError::Trailing(body.len() - used));
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{LaunchBatch, LaunchRequest, Placement};
    use crate::{GmId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};

    #[test]
    fn round_trip_and_version_check() {
        let batch = LaunchBatch {
            gm: GmId(1),
            life: 0,
            lm: LmId(2),
            seq: 3,
            resend: false,
            requests: vec![LaunchRequest {
                task: TaskSpec::short(TaskId::new(4, 5), Resources::cores(1, 64), Micros(9)),
                node: NodeId(6),
                placement: Placement::Repartition,
            }],
        };
        let c = ClusterName::default();
        let bytes = encode(&c, &batch).unwrap();
        assert_eq!(bytes[0], WIRE_VERSION);
        assert_eq!(decode::<LaunchBatch>(&c, &bytes).unwrap(), batch);
        let mut wrong = bytes.clone();
        wrong[0] = 99;
        assert!(matches!(
            decode::<LaunchBatch>(&c, &wrong),
            Err(CodecError::Version { found: 99 })
        ));
        assert!(matches!(
            decode::<LaunchBatch>(&c, &[]),
            Err(CodecError::Empty)
        ));
        assert!(matches!(
            decode::<LaunchBatch>(&c, &bytes[..4]),
            Err(CodecError::Truncated)
        ));
    }

    #[test]
    fn a_message_of_another_cluster_is_refused_naming_both() {
        let blue = ClusterName::new("blue").unwrap();
        let green = ClusterName::new("green").unwrap();
        let bytes = encode(&blue, &42u32).unwrap();
        assert_eq!(decode::<u32>(&blue, &bytes).unwrap(), 42);
        let e = decode::<u32>(&green, &bytes).unwrap_err();
        assert!(e.is_foreign());
        let text = e.to_string();
        assert!(
            text.contains("`blue`") && text.contains("`green`"),
            "{text}"
        );
    }

    #[test]
    fn a_response_with_refusals_round_trips() {
        use crate::messages::{LaunchOutcome, LaunchResponse, LmSnapshot, LmTopology};
        use crate::reasons::RejectReason;
        use std::sync::Arc;
        let response = LaunchResponse {
            lm: LmId(1),
            gm: GmId(0),
            seq: 9,
            outcomes: vec![
                (
                    TaskId::new(1, 0),
                    LaunchOutcome::Rejected(RejectReason::UnknownNode),
                ),
                (
                    TaskId::new(1, 1),
                    LaunchOutcome::Rejected(RejectReason::InsufficientResources {
                        free: Resources::new(1, 2),
                    }),
                ),
                (
                    TaskId::new(1, 2),
                    LaunchOutcome::Rejected(RejectReason::Invalid { detail: "x".into() }),
                ),
                (
                    TaskId::new(1, 3),
                    LaunchOutcome::Launched {
                        placement: Placement::Internal,
                    },
                ),
            ],
            snapshot: LmSnapshot {
                lm: LmId(1),
                incarnation: 2,
                version: 3,
                taken_at: Micros(4),
                topology: Arc::new(LmTopology {
                    lm: LmId(1),
                    gms: 1,
                    home: vec![GmId(0)],
                    constraints: vec![crate::ConstraintSet::EMPTY],
                    capacity: vec![Resources::new(1000, 10)],
                }),
                free: Arc::new(vec![Resources::new(1000, 10)]),
                free_changed: Arc::default(),
                applied_batches: vec![9],
                usage: vec![],
                queue_delay: Arc::new(vec![Micros(7)]),
                queueable_held: Arc::new(vec![Resources::new(500, 5)]),
                jobs: Arc::new(vec![(
                    crate::JobId(1),
                    crate::quota::JobContainers {
                        queueable: 2,
                        guaranteed: 1,
                    },
                )]),
            },
        };
        let c = ClusterName::default();
        let bytes = encode(&c, &response).unwrap();
        assert_eq!(decode::<LaunchResponse>(&c, &bytes).unwrap(), response);
    }

    #[test]
    fn stored_records_of_the_previous_version_still_read() {
        let c = ClusterName::default();
        let mut bytes = encode(&c, &(7u64, "job".to_owned())).expect("encode");
        bytes[0] = 6;
        assert!(matches!(
            decode::<(u64, String)>(&c, &bytes),
            Err(CodecError::Version { found: 6 })
        ));
        assert_eq!(
            decode_stored::<(u64, String)>(&c, &bytes).expect("stored"),
            (7, "job".to_owned())
        );
        bytes[0] = 5;
        assert!(decode_stored::<(u64, String)>(&c, &bytes).is_err());
    }
}
